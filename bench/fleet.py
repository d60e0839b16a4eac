"""A fleet of ``learnserve serve`` processes on one Redis: replicate-all vs sharded.

For each ownership mode, in the same run: N processes (one worker each) on a fresh
Redis database, M AROW models of ``2**bits`` sparse dimensions. Then

1. **Apply CPU**: the bench appends the update log itself (entries encoded exactly
   as ``/update`` encodes them, written with the service's own store client), so
   the fleet's CPU is the cost of *applying* updates (apply loops, restore, the
   membership heartbeat, idling), not of parsing HTTP, which one process does per
   request in either mode. Waits until every owner has applied every entry
   (``min_version`` on each owner; replicated: every process owns every model) and
   reads each process's user+system CPU from ``/proc/<pid>/stat`` before and after.
   Reported as fleet CPU seconds per 100,000 examples learned (by the fleet, once).
2. **Memory**: each process's RSS (``/proc/<pid>/status``) once all models have
   learned, so each held model has its weights and covariances allocated.

Target (issue #12): sharded apply CPU <= (R / N) x 1.25 of replicate-all's.

    python -m bench.fleet                  # N=4, R=2, 40 models of 2**18 dims
    python -m bench.fleet --quick          # fewer examples
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench._common import print_table, write_results
from service.fleet.ownership import OwnershipView
from tests.service.procs import RedisServer, find_redis_server, free_port, stop_process
from tests.service.serving import start_learnserve

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def server_pid(proc: Any) -> int:
    """``learnserve serve`` with one worker serves in its own process."""
    return int(proc.pid)


def batches(bits: int, n: int, size: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        examples = []
        for _ in range(size):
            x = {str(rng.randrange(1 << bits)): rng.uniform(-1, 1) for _ in range(20)}
            examples.append({"x": x, "y": "pos" if rng.random() < 0.5 else "neg"})
        out.append({"examples": examples})
    return out


async def append_log(redis_url: str, models: list[str], config: dict[str, Any],
                     bodies: list[dict[str, Any]]) -> dict[str, int]:  # fmt: skip
    """Encode each body as ``/update`` would and append it to a model's log; the
    last position of every model."""
    from service.models.kinds import adapter_class
    from service.settings import Settings
    from service.store.redis import RedisStore

    settings = Settings()
    adapter = adapter_class(config["kind"]).create(config)
    store = RedisStore(redis_url)
    await store.open()
    last: dict[str, int] = {}
    try:
        for i, body in enumerate(bodies):
            name = models[i % len(models)]
            payload, _ = adapter.parse_update({"model": name, **body}, settings)
            last[name] = await store.append(name, payload)
    finally:
        await store.close()
    return last


def run_mode(mode: str, redis: RedisServer, args: argparse.Namespace) -> dict[str, Any]:
    redis.flushall()
    procs, clients = [], []
    work = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{mode}-"))
    try:
        for i in range(args.processes):
            port = free_port()
            env = {
                "LEARNSERVE_REDIS_URL": redis.url,
                "LEARNSERVE_DATA_DIR": str(work / f"p{i}"),
                "LEARNSERVE_OWNERSHIP": mode,
                "LEARNSERVE_REPLICAS_PER_MODEL": str(args.replicas),
                "LEARNSERVE_MEMBER_ID": f"p{i}",
                "LEARNSERVE_LRU_BYTES": "0",  # no guests kept: RSS is what owners hold
                "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1000000",
                "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "100000",
                "LEARNSERVE_MAX_BODY_BYTES": str(64 << 20),
            }
            procs.append(start_learnserve(port, env))
            clients.append(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120))
        deadline = time.monotonic() + 60
        while mode == "sharded":
            views = [c.get("/readyz").json()["fleet"]["members"] for c in clients]
            if all(len(v) == args.processes for v in views):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"fleet did not settle: {views}")
            time.sleep(0.3)
        config = {"algorithm": "arow", "features": {"kind": "sparse", "dim": 1 << args.bits}}
        models = [f"m{i:02d}" for i in range(args.models)]
        for k, name in enumerate(models):
            r = clients[k % len(clients)].put(f"/models/{name}", json=config)
            assert r.status_code == 201, r.text
        stored = clients[0].get(f"/models/{models[0]}").json()
        # The same computation every member makes (service.fleet.ownership).
        view = OwnershipView([f"p{i}" for i in range(args.processes)], args.replicas)
        owners = {
            name: [int(m[1:]) for m in view.owners(name)]
            if mode == "sharded" else list(range(args.processes))
            for name in models
        }  # fmt: skip
        bodies = batches(args.bits, args.entries, args.batch, seed=7)
        pids = [server_pid(p) for p in procs]
        time.sleep(2.0)  # let start-up work (catalog loads, guest evictions) settle
        cpu0 = [cpu_seconds(p) for p in pids]
        t0 = time.monotonic()
        last = asyncio.run(append_log(redis.url, models, stored["config"], bodies))
        for name, version in last.items():
            for k in owners[name]:
                body = {"model": name, "instances": [{"x": {"1": 1.0}}], "min_version": version}
                while True:
                    r = clients[k].post(f"/models/{name}/predict", json=body)
                    if r.status_code == 200:
                        break
                    assert r.status_code == 503, r.text
        elapsed = time.monotonic() - t0
        cpu = [cpu_seconds(p) - c for p, c in zip(pids, cpu0, strict=True)]
        time.sleep(1.5)  # guests evicted (LRU 0) before RSS is read
        rss = [rss_bytes(p) for p in pids]
        owned = [c.get("/readyz").json()["fleet"]["owned_models"] for c in clients]
        examples = args.entries * args.batch
        return {
            "mode": mode,
            "examples": examples,
            "fleet_cpu_seconds": sum(cpu),
            "cpu_seconds_per_100k_examples": sum(cpu) / examples * 100_000,
            "cpu_seconds_by_process": cpu,
            "wall_seconds": elapsed,
            "rss_bytes_by_process": rss,
            "owned_models_by_process": owned,
        }
    finally:
        for c in clients:
            c.close()
        for p in procs:
            stop_process(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--entries", type=int, default=1000, help="log entries (batches)")
    ap.add_argument("--batch", type=int, default=100, help="examples per entry")
    ap.add_argument("--quick", action="store_true", help="200 entries")
    args = ap.parse_args()
    if args.quick:
        args.entries = 200
    binary = find_redis_server()
    if binary is None:
        sys.exit("no redis-server found (set LEARNSERVE_REDIS_SERVER)")
    redis = RedisServer(binary, Path(tempfile.mkdtemp(prefix="bench-fleet-redis-")))
    redis.start()
    try:
        results = [run_mode(m, redis, args) for m in ("replicate", "sharded")]
    finally:
        redis.kill()
    rep, shd = results
    ratio = shd["cpu_seconds_per_100k_examples"] / rep["cpu_seconds_per_100k_examples"]
    target = args.replicas / args.processes * 1.25
    rows = [
        [
            r["mode"],
            f"{r['cpu_seconds_per_100k_examples']:.2f}",
            " ".join(f"{c:.1f}" for c in r["cpu_seconds_by_process"]),
            " ".join(f"{b / 2**20:.0f}" for b in r["rss_bytes_by_process"]),
            " ".join(str(n) for n in r["owned_models_by_process"]),
        ]
        for r in results
    ]
    print_table(
        f"fleet of {args.processes}, R={args.replicas}, {args.models} models of 2^{args.bits}",
        ["mode", "fleet CPU s / 100k examples", "CPU s by process", "RSS MiB", "owned"],
        rows,
    )
    print(f"sharded / replicate apply CPU = {ratio:.3f} (target <= {target:.3f})")
    path = write_results(
        "fleet",
        {
            "params": vars(args),
            "results": results,
            "sharded_over_replicate_cpu": ratio,
            "target_ratio": target,
            "meets_target": ratio <= target,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
