"""What uvicorn, learnserve's stack and the model work each cost per request (issue 21).

Three servers, each one uvicorn process pinned with nothing else to one core, ``wrk``
pinned to the other (``bench/_wrk.py``), the same 1-instance dense ``/predict`` body
(28 features) to each:

- ``bare ASGI`` (``bench._http_apps:bare``): reads the body, answers a fixed JSON: the
  ceiling ``bench/http.py`` measures against;
- ``learnserve stack`` (``bench._http_apps:stack_floor``): learnserve with ``/predict``'s
  handler answering a constant: metrics, API-key and content-type checks, the body
  read with its deadline, the answer's JSON; no model;
- ``learnserve /predict``: the real thing, an AROW model trained on 2,000 rows;
- ``learnserve /update x1``: one example per request (on the SQLite store here: the
  durable append is a thread's fsync-free commit; ``bench/http.py`` has Redis).

Per server: requests/s and the server process's CPU per request (user and system, from
``/proc/<pid>/stat``), the best of ``--rounds`` interleaved rounds (least CPU), and the
ratios to bare ASGI (req/s, and bare's CPU over the server's: what "x bare" can be at
most when the server is CPU-bound). The stack's CPU is the floor under every hot route.

    .venv/bin/python bench/stack_floor.py                  # ~1 min
    .venv/bin/python bench/stack_floor.py --duration 2 --rounds 1
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run as a script, bench/ comes first on sys.path and bench/http.py would shadow the
# standard library's http package: the repository root instead (as bench/http.py does).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import httpx  # noqa: E402

from bench._baseline import REPO, cpu_seconds  # noqa: E402
from bench._common import print_table, write_results  # noqa: E402
from bench._loadgen import build_request  # noqa: E402
from bench._wrk import find_wrk, pin, two_cores, wrk_load  # noqa: E402
from tests.service.procs import free_port, start_service, stop_process  # noqa: E402

DIM = 28
HOST = "127.0.0.1"


def _uvicorn(target: str, port: int, factory: bool) -> list[str]:
    args = [sys.executable, "-P", "-m", "uvicorn", target, "--app-dir", str(REPO)]
    args += ["--host", HOST, "--port", str(port), "--log-level", "warning", "--no-access-log"]
    return args + (["--factory"] if factory else [])


def _rows(rng: random.Random, n: int) -> list[list[float]]:
    return [[round(rng.gauss(0, 1), 5) for _ in range(DIM)] for _ in range(n)]


def _train(port: int, rng: random.Random) -> None:
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=60) as c:
        model = {"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}}
        assert c.put("/models/m", json=model).status_code == 201
        for _ in range(20):
            ex = [{"x": x, "y": rng.choice(["s", "b"])} for x in _rows(rng, 100)]
            assert c.post("/update", json={"model": "m", "examples": ex}).status_code == 200


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--out-dir", help="JSON directory (default: bench/results)")
    args = ap.parse_args()
    if find_wrk() is None:
        raise SystemExit("wrk not found: apt-get install -y wrk")
    load_cpu, server_cpu = two_cores()
    rng = random.Random(0)
    import orjson

    predict = [
        build_request("POST", "/predict", orjson.dumps({"model": "m", "instances": [{"x": x}]}))
        for x in _rows(rng, 200)
    ]
    floor = [
        build_request("POST", "/predict", orjson.dumps({"model": "floor", "instances": [{"x": x}]}))
        for x in _rows(rng, 200)
    ]
    update = [
        build_request(
            "POST",
            "/update",
            orjson.dumps({"model": "m", "examples": [{"x": x, "y": rng.choice(["s", "b"])}]}),
        )
        for x in _rows(rng, 200)
    ]
    procs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as data:
        try:
            for name, target, factory, health in (
                ("bare ASGI", "bench._http_apps:bare", False, "/"),
                ("learnserve stack", "bench._http_apps:stack_floor", True, "/readyz"),
                ("learnserve", "service.app:factory", True, "/readyz"),
            ):
                port = free_port()
                env = {"LEARNSERVE_DATA_DIR": str(Path(data) / name.replace(" ", "-"))}
                proc = start_service(_uvicorn(target, port, factory), env, port, 900, health)
                pin(proc.pid, {server_cpu})
                procs[name] = (proc, port)
            _train(procs["learnserve"][1], rng)
            scenarios = [
                ("bare ASGI", "bare ASGI", floor),
                ("learnserve stack, constant answer", "learnserve stack", floor),
                ("learnserve /predict, 1 instance", "learnserve", predict),
                ("learnserve /update, 1 example", "learnserve", update),
            ]
            best: dict[str, dict[str, Any]] = {}
            for _ in range(args.rounds):
                for label, server, reqs in scenarios:
                    proc, port = procs[server]
                    c0 = cpu_seconds(proc.pid)
                    res = wrk_load(HOST, port, reqs, args.connections, args.duration, load_cpu)
                    cpu = cpu_seconds(proc.pid) - c0
                    row = {
                        "scenario": label,
                        "requests": res.requests,
                        "errors": res.errors,
                        "req_per_s": res.requests / res.seconds,
                        "server_cpu_us_per_request": 1e6 * cpu / max(res.requests, 1),
                    }
                    old = best.get(label)
                    if (
                        old is None
                        or row["server_cpu_us_per_request"] < old["server_cpu_us_per_request"]
                    ):
                        best[label] = row
        finally:
            for proc, _ in procs.values():
                stop_process(proc)
    bare = best["bare ASGI"]
    for row in best.values():
        row["req_per_s_vs_bare"] = row["req_per_s"] / bare["req_per_s"]
        row["bare_cpu_over_this"] = (
            bare["server_cpu_us_per_request"] / row["server_cpu_us_per_request"]
        )
    rows = list(best.values())
    print_table(
        "Per-request cost: uvicorn, learnserve's stack, the model work",
        ["scenario", "req/s", "x bare (req/s)", "server CPU us/req", "bare CPU / this", "errors"],
        [
            [
                r["scenario"],
                f"{r['req_per_s']:,.0f}",
                f"{r['req_per_s_vs_bare']:.2f}",
                f"{r['server_cpu_us_per_request']:.1f}",
                f"{r['bare_cpu_over_this']:.2f}",
                str(r["errors"]),
            ]
            for r in rows
        ],
        caption="one uvicorn worker per server on its own core, wrk on the other",
    )
    out_dir = Path(args.out_dir) if args.out_dir else None
    path = write_results(
        "stack_floor", {"scenarios": rows, "connections": args.connections}, results_dir=out_dir
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
