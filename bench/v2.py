"""Open Inference Protocol (``/v2/models/{name}/infer``) next to ``/predict`` (issue 13).

One ``learnserve`` (uvicorn, 1 worker, embedded SQLite store) holds an AROW model of
MNIST's 784 dense features that learned the first 3,000 training images (from
``../shared/data/mnist``; random [0, 1] rows when it is absent, said in the JSON).
Scenarios, with the same test images as rows, 1 and 100 rows per request:

- ``/predict``: ``{"instances": [{"x": [...]}]}``, the service's own route (plain ASGI);
- ``v2 JSON``: ``/v2/models/digits/infer``, FP64 data as a flat JSON array, JSON outputs;
- ``v2 binary``: the same with the binary tensor data extension (FP32 input bytes after
  the JSON, every output binary), what ``tritonclient`` sends by default.

Closed-loop load (``bench/_loadgen.py``), ``--connections`` keep-alive connections,
``--duration`` seconds per scenario, interleaved over ``--rounds`` rounds; the best
round is reported (all in ``bench/results/v2.json``). Generator and server share the
machine: compare the ratios of one run.

    .venv/bin/python bench/v2.py                      # ~1 min
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run as a script, bench/ comes first on sys.path and bench/http.py would shadow the
# standard library's ``http``: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import fmt_rate, print_table, shared_data_dir, write_results  # noqa: E402
from bench._loadgen import build_request, run_load  # noqa: E402
from tests.service.procs import free_port, start_service, stop_process  # noqa: E402

HOST = "127.0.0.1"


def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    d = shared_data_dir() / "mnist"
    if (d / "train-images-idx3-ubyte.gz").exists():
        from learners.io.idx import read_mnist

        X, y = read_mnist(d, "train")
        Xt, _ = read_mnist(d, "test")
        return X[:3000], y[:3000], Xt[:100], "mnist"
    rng = np.random.default_rng(0)  # absent: random rows of the same shape
    return rng.random((3000, 784)), rng.integers(0, 10, 3000), rng.random((100, 784)), "random"


def requests(Xt: np.ndarray, n: int) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {"/predict": [], "v2 JSON": [], "v2 binary": []}
    for i in range(0, len(Xt) - n + 1, max(n, 1)):
        X = Xt[i : i + n]
        body = {"model": "digits", "instances": [{"x": r} for r in X.tolist()]}
        out["/predict"].append(build_request("POST", "/predict", json.dumps(body).encode()))
        t = {"name": "x", "shape": list(X.shape), "datatype": "FP64", "data": X.ravel().tolist()}
        v2 = json.dumps({"inputs": [t]}).encode()
        out["v2 JSON"].append(build_request("POST", "/v2/models/digits/infer", v2))
        raw = X.astype("<f4").tobytes()
        t = {**t, "datatype": "FP32", "parameters": {"binary_data_size": len(raw)}}
        del t["data"]
        head = json.dumps({"inputs": [t], "parameters": {"binary_data_output": True}}).encode()
        hdr = {"Inference-Header-Content-Length": str(len(head))}
        out["v2 binary"].append(build_request("POST", "/v2/models/digits/infer", head + raw, hdr))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=8)
    args = ap.parse_args()
    X, y, Xt, source = digits()
    port = free_port()
    env = {
        "LEARNSERVE_DATA_DIR": tempfile.mkdtemp(prefix="bench-v2-"),
        "LEARNSERVE_LOG_LEVEL": "warning",
    }
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "service.app:factory",
        "--factory",
        "--host",
        HOST,
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    proc = start_service(cmd, env, port, health_path="/readyz")
    rounds: dict[str, list[dict[str, Any]]] = {}
    try:
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=120) as c:
            features = {"kind": "dense", "dim": 784}
            assert c.put("/models/digits", json={"algorithm": "arow", "features": features})
            for i in range(0, len(X), 1000):
                ex = [
                    {"x": r, "y": int(v)}
                    for r, v in zip(X[i : i + 1000].tolist(), y[i : i + 1000], strict=True)
                ]
                assert c.post("/update", json={"model": "digits", "examples": ex}).is_success
        scenarios = [
            (f"{route}, {n} row{'s' * (n > 1)}", reqs)
            for n in (1, 100)
            for route, reqs in requests(Xt, n).items()
        ]
        for _ in range(args.rounds):
            for name, reqs in scenarios:
                asyncio.run(run_load(HOST, port, reqs, args.connections, 0.5))  # warm-up
                r = asyncio.run(run_load(HOST, port, reqs, args.connections, args.duration))
                lat = np.array(r.latencies) * 1000
                rounds.setdefault(name, []).append(
                    {
                        "rps": r.rps,
                        "errors": r.errors,
                        "p50_ms": float(np.percentile(lat, 50)),
                        "p99_ms": float(np.percentile(lat, 99)),
                    }
                )
    finally:
        stop_process(proc)
    best = {k: max(v, key=lambda d: d["rps"]) for k, v in rounds.items()}
    table = []
    for name, b in best.items():
        base = best[name.replace("v2 JSON", "/predict").replace("v2 binary", "/predict")]
        table.append(
            [
                name,
                fmt_rate(b["rps"]),
                f"{b['rps'] / base['rps']:.2f}x",
                f"{b['p50_ms']:.2f}",
                f"{b['p99_ms']:.2f}",
                b["errors"],
            ]
        )
    print_table(
        "v2 infer vs /predict (AROW, 784 dense features)",
        ["scenario", "req/s", "vs /predict", "p50 ms", "p99 ms", "errors"],
        table,
    )
    path = write_results(
        "v2", {"data": source, "connections": args.connections, "best": best, "rounds": rounds}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
