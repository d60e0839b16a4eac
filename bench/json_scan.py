"""Reading a dense ``/update`` body: orjson + a Python split + ``np.array`` against
the numba scanner (``service/models/fast_json.py``), in one run.

    flock /tmp/bench.lock .venv/bin/python bench/json_scan.py

Bodies: ``{"model": "adult", "examples": [{"x": [...28 floats...], "y": "s"|"h"}, ...]}``
with 1, 100 and 1000 examples, ``x`` = ``np.round(N(0, 1) * scale, 5).tolist()``
serialized by ``json.dumps`` (case ``round5``), and ``rng.normal(size=28).tolist()``
serialized by ``json.dumps`` (case ``full``: full-precision doubles, 16-17 significant
digits, what a client sending numpy output as is sends). Measured per body:

- ``orjson``: ``orjson.loads(raw)``, then the x/y split loop (the type checks of
  ``service/models/linear_inputs.py``'s ``split_examples``), then
  ``np.array(xs, dtype=np.float64)``;
- ``scan``: ``scan_dense_examples(raw, 28, max_examples)`` (model, matrix and labels).

Each timed run parses the same body ``calls`` times; the best of ``--repeats``
runs (median in the JSON), in microseconds per body, the ratio orjson / scan and
examples per second of the scanner. Compile time is kept out (warm-up first).
Results: ``bench/results/json_scan.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson

# Run as a script, this directory comes first on sys.path and bench/http.py would
# shadow the standard library's http package (imported by the service's deps).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._common import fmt_rate, fmt_ratio, measure, print_table, write_results  # noqa: E402
from service.models.fast_json import scan_dense_examples, warmup  # noqa: E402

DIM = 28


def make_body(n: int, seed: int = 0, kind: str = "round5") -> bytes:
    rng = np.random.default_rng(seed)
    if kind == "full":  # numpy output as is: the repr of computed doubles (~17 digits)
        X = rng.normal(size=(n, DIM))
    else:
        X = np.round(rng.normal(size=(n, DIM)) * rng.uniform(0.1, 100, size=DIM), 5)
    examples = [{"x": row, "y": "s" if row[0] > 0 else "h"} for row in X.tolist()]
    return json.dumps({"model": "adult", "examples": examples}).encode()


def orjson_path(raw: bytes) -> tuple[str, np.ndarray, list[Any]]:
    body = orjson.loads(raw)
    xs: list[Any] = []
    ys: list[Any] = []
    for ex in body["examples"]:
        if type(ex) is not dict:
            raise ValueError("example must be an object")
        x, y = ex["x"], ex["y"]
        t = type(y)
        if not ((t is str and y) or t is int):
            raise ValueError("bad label")
        xs.append(x)
        ys.append(y)
    return body["model"], np.array(xs, dtype=np.float64), ys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,100,1000", help="examples per body")
    ap.add_argument("--kinds", default="round5,full", help="number formats (round5, full)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--examples-per-run", type=int, default=100_000)
    ap.add_argument("--out", default="json_scan")
    args = ap.parse_args()

    warmup()
    results = []
    table = []
    cases = [(k, int(s)) for k in args.kinds.split(",") for s in args.rows.split(",")]
    for kind, n in cases:
        raw = make_body(n, kind=kind)
        got = scan_dense_examples(raw, DIM, max(n, 1000))
        model, X, ys = orjson_path(raw)
        if got is None or got.model != model or got.labels != ys:
            raise SystemExit(f"the scanner did not read the {kind} {n}-row body like orjson")
        if not np.array_equal(got.X.view(np.uint64), X.view(np.uint64)):
            raise SystemExit(f"the scanner's matrix differs from orjson's ({kind}, {n} rows)")
        calls = max(20, args.examples_per_run // n)

        def run_orjson(_: Any, raw: bytes = raw, calls: int = calls) -> None:
            for _ in range(calls):
                orjson_path(raw)

        def run_scan(_: Any, raw: bytes = raw, calls: int = calls, m: int = max(n, 1000)) -> None:
            for _ in range(calls):
                scan_dense_examples(raw, DIM, m)

        t_or = measure(run_orjson, repeats=args.repeats, n_items=calls)
        t_sc = measure(run_scan, repeats=args.repeats, n_items=calls)
        us_or = t_or.best / calls * 1e6
        us_sc = t_sc.best / calls * 1e6
        entry = {
            "kind": kind,
            "rows": n,
            "dim": DIM,
            "body_bytes": len(raw),
            "calls_per_run": calls,
            "orjson_us_per_body": us_or,
            "scan_us_per_body": us_sc,
            "orjson_us_per_body_median": t_or.median / calls * 1e6,
            "scan_us_per_body_median": t_sc.median / calls * 1e6,
            "ratio": us_or / us_sc,
            "scan_examples_per_s": n / (us_sc * 1e-6),
            "orjson_examples_per_s": n / (us_or * 1e-6),
            "orjson": t_or.to_json(),
            "scan": t_sc.to_json(),
        }
        results.append(entry)
        table.append(
            [
                kind,
                n,
                f"{len(raw):,}",
                f"{us_or:,.1f}",
                f"{us_sc:,.1f}",
                fmt_ratio(entry["ratio"]),
                fmt_rate(entry["orjson_examples_per_s"]),
                fmt_rate(entry["scan_examples_per_s"]),
            ]
        )
    print_table(
        f"dense /update body -> matrix ({DIM} dims, best of {args.repeats})",
        ["numbers", "rows", "bytes", "orjson us", "scan us", "ratio", "orjson ex/s", "scan ex/s"],
        table,
    )
    path = write_results(args.out, {"rows": results}, extra_packages=("orjson",))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
