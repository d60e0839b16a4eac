"""Many idle models (issue 11): how fast a second server sees one hot model's updates, and
what the idle models cost Redis.

For each M in ``--models`` (default 100, 1000, 5000): a private redis-server, two
``learnserve serve`` processes A and B on it (one worker each), M idle models plus one
hot model (AROW, 4 dense features). Then:

- **idle**: Redis commands per second over ``--idle`` seconds with no traffic at all
  (what the two apply-loops cost by themselves);
- **hot**: ``--updates`` one-example ``/update`` requests to the hot model through A,
  one at a time; after each, B's ``GET /models/hot`` is polled every ms until it shows
  the version A answered. The time from A's answer to B showing it is the propagation
  delay (median, p90, p99); Redis commands per second over the phase.

``--baseline REF`` runs the same measurement on another commit of learnserve (checked
out with ``git worktree`` into a temp dir; its numba kernels compile cold once), in the
same run, e.g. ``--baseline 65016d5`` for the code before wake streams.

    .venv/bin/python bench/many_models.py                      # bench/results/many_models.json
    .venv/bin/python bench/many_models.py --models 5000 --baseline 65016d5
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import redis  # noqa: E402

from bench._common import print_table, write_results  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

REPO = _HERE.parent
MODEL = {"algorithm": "arow", "features": {"kind": "dense", "dim": 4}}


def serve(code: Path, redis_url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        "PYTHONPATH": str(code),
        "LEARNSERVE_REDIS_URL": redis_url,
        "LEARNSERVE_LOG_LEVEL": "warning",
    }
    # -P: no current directory on sys.path, so PYTHONPATH decides which code runs
    args = [sys.executable, "-P", "-c", "from service.cli.main import main; main()", "serve"]
    proc = start_service(
        [*args, "--port", str(port)], env, port, timeout=900, health_path="/readyz"
    )
    return proc, f"http://127.0.0.1:{port}"


async def create_models(url: str, names: list[str]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        sem = asyncio.Semaphore(16)

        async def one(name: str) -> None:
            async with sem:
                r = await c.put(f"/models/{name}", json=MODEL)
                assert r.status_code in (200, 201), r.text

        await asyncio.gather(*(one(n) for n in names))


def commands(r: redis.Redis) -> int:
    return int(r.info("stats")["total_commands_processed"])


def run_one(code: Path, m: int, updates: int, idle: float) -> dict[str, Any]:
    server = find_redis_server()
    assert server is not None, "redis-server not found"
    rs = RedisServer(server, Path(tempfile.mkdtemp(prefix="bench-many-")))
    rs.start()
    procs = []
    try:
        a, url_a = serve(code, rs.url)
        procs.append(a)
        t0 = time.perf_counter()
        asyncio.run(create_models(url_a, [f"idle-{i}" for i in range(m)] + ["hot"]))
        created_s = time.perf_counter() - t0
        b, url_b = serve(code, rs.url)
        procs.append(b)
        r = redis.Redis.from_url(rs.url)
        time.sleep(2.0)  # let both settle (catalog sync, first reconcile)
        c0, t0 = commands(r), time.perf_counter()
        time.sleep(idle)
        idle_cps = (commands(r) - c0) / (time.perf_counter() - t0)
        delays = []
        with (
            httpx.Client(base_url=url_a, timeout=30) as ca,
            httpx.Client(base_url=url_b, timeout=30) as cb,
        ):
            c0, t0 = commands(r), time.perf_counter()
            for i in range(updates):
                body = {"model": "hot", "examples": [{"x": [1.0, i % 3, -1.0, 0.5], "y": i % 2}]}
                v = ca.post("/update", json=body).json()["version"]
                sent = time.perf_counter()
                while cb.get("/models/hot").json()["version"] < v:
                    if time.perf_counter() - sent > 30:
                        raise RuntimeError(f"B did not reach version {v} in 30 s")
                    time.sleep(0.001)
                delays.append((time.perf_counter() - sent) * 1000)
            hot_cps = (commands(r) - c0) / (time.perf_counter() - t0)
        q = statistics.quantiles(delays, n=100)
        return {
            "models": m,
            "create_s": round(created_s, 1),
            "delay_ms_median": round(statistics.median(delays), 2),
            "delay_ms_p90": round(q[89], 2),
            "delay_ms_p99": round(q[98], 2),
            "redis_cmds_per_s_idle": round(idle_cps, 1),
            "redis_cmds_per_s_hot": round(hot_cps, 1),
        }
    finally:
        for p in procs:
            stop_process(p)
        rs.stop()


def checkout(ref: str) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="bench-baseline-")) / "src"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(dest), ref],
        check=True,
        capture_output=True,
    )
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", default="100,1000,5000", help="comma-separated idle-model counts")
    ap.add_argument("--updates", type=int, default=200, help="hot-model updates per size")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of the idle measurement")
    ap.add_argument("--baseline", help="a git ref to measure too (e.g. 65016d5)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.models.split(",")]
    codes: dict[str, Path] = {"current": REPO}
    if args.baseline:
        codes[f"baseline {args.baseline}"] = checkout(args.baseline)
    results = []
    try:
        for label, code in codes.items():
            for m in sizes:
                res = {"code": label, **run_one(code, m, args.updates, args.idle)}
                print(res, flush=True)
                results.append(res)
    finally:
        for label, code in codes.items():
            if label != "current":
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(code)],
                    check=False,
                    capture_output=True,
                )
    print_table(
        "B's view of a hot model updated through A, with M idle models (1 Redis, 2 servers)",
        ["code", "M", "median ms", "p90 ms", "p99 ms", "Redis cmd/s idle", "Redis cmd/s hot"],
        [
            [
                r["code"],
                r["models"],
                r["delay_ms_median"],
                r["delay_ms_p90"],
                r["delay_ms_p99"],
                r["redis_cmds_per_s_idle"],
                r["redis_cmds_per_s_hot"],
            ]
            for r in results
        ],
        right_align_from=1,
    )
    path = write_results(
        "many_models",
        {"updates": args.updates, "idle_seconds": args.idle, "cpus": os.cpu_count(),
         "results": results},
    )  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
