"""Bulk ingestion through the Python client (``learnserve update``'s path): a9a
(32,561 rows, 1-based SVMlight) into an AROW model, at several batch sizes.

For each batch size: examples/s of the client alone (reading the file and encoding
the JSON bodies, nothing sent) and of the whole path (read, send, learned and
durable: ``Client.update`` against ``learnserve serve`` on SQLite, a fresh model per
run). Writes ``bench/results/ingest.json``::

    .venv/bin/python -m bench.ingest [--batches 100,1000,5000] [--repeats 3]

(as a module: run as a script, bench/http.py would shadow the standard library's http)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench._common import fmt_rate, measure, print_table, shared_data_dir, write_results
from service.client import Client
from service.client._core import batched
from service.client.files import ExampleFile, Target


def examples(path: Path) -> ExampleFile:
    return ExampleFile(path, "svmlight", Target("sparse", 123, model_base=1, file_base=1))


def encode_only(path: Path, batch: int) -> None:
    for chunk in batched((r.example() for r in examples(path)), batch):
        orjson.dumps({"model": "m", "examples": chunk})


def serve(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    from tests.service.procs import free_port

    port = free_port()
    args = [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
            "--data-dir", data_dir, "--log-level", "warning"]  # fmt: skip
    return subprocess.Popen(args), f"http://127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="100,1000,5000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    path = shared_data_dir() / "a9a" / "a9a"
    if not path.exists():
        sys.exit(f"{path} is absent (set LEARNSERVE_SHARED_DATA)")
    n = sum(1 for _ in examples(path))
    sizes = [int(b) for b in args.batches.split(",")]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as data:
        proc, url = serve(data)
        try:
            with Client(url, timeout=120) as c:
                c.wait_ready(600)
                runs = iter(range(10**6))

                def fresh() -> str:
                    name = f"a9a-{next(runs)}"
                    c.create_model(name, "arow", {"kind": "sparse", "dim": 123, "index_base": 1})
                    return name

                for b in sizes:
                    enc = measure(
                        lambda _, b=b: encode_only(path, b), repeats=args.repeats, n_items=n
                    )

                    def learn(name: str, b: int = b) -> None:
                        s = c.update(name, (r.example() for r in examples(path)), batch_size=b)
                        assert s.examples == n

                    e2e = measure(learn, setup=fresh, repeats=args.repeats, n_items=n)
                    results.append({"batch": b, "client_only": enc.to_json(),
                                    "end_to_end": e2e.to_json()})  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)
    rows = [(r["batch"], fmt_rate(r["client_only"]["rate_median"]),
             fmt_rate(r["end_to_end"]["rate_median"])) for r in results]  # fmt: skip
    columns = ["batch", "client only (read + encode)", "end to end (learned, durable)"]
    print_table("a9a into AROW through service.client (examples/s, median)", columns, rows)
    out = write_results("ingest", {"dataset": "a9a", "examples": n, "results": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
