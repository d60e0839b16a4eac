"""Redis Cluster benchmark (issue 11): ``/update`` throughput of learnserve on one Redis
next to learnserve on a 3-master Redis Cluster, in the same run.

Servers (each one uvicorn process, 1 worker, started by this script, side by side):

- ``single``: learnserve on one private redis-server (AOF, ``appendfsync everysec``).
- ``cluster``: learnserve with ``LEARNSERVE_REDIS_CLUSTER=true`` on a private 3-master
  Redis Cluster (AOF on every master, no replicas), started with ``redis-cli --cluster
  create`` as the tests do (``tests/service/cluster_procs.py``).

Load: ``--models`` AROW models over 28 dense features (their names spread over the
masters), ``/update`` with 100 examples and with 1 example per request, the requests
cycling over the models, ``--connections`` keep-alive connections, ``--duration`` s per
scenario after a 1 s warm-up, interleaved over ``--rounds`` rounds; the best round is
reported (all are in the JSON). Everything shares the machine's cores: compare the
ratio cluster / single, not absolute figures.

    .venv/bin/python bench/cluster.py                  # ~1 min; bench/results/cluster.json
"""

from __future__ import annotations

import sys
from pathlib import Path

# As in bench/http.py: this directory must not shadow the standard library's ``http``.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import fmt_rate, fmt_ratio, print_table, write_results  # noqa: E402
from bench._loadgen import build_request  # noqa: E402
from bench.http import HOST, load, rows, summarise, uvicorn_args  # noqa: E402
from tests.service.cluster_procs import RedisClusterNodes, find_redis_cli  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

DIM = 28


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per scenario per round")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds; best one kept")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--models", type=int, default=6)
    args = ap.parse_args()

    server, cli = find_redis_server(), find_redis_cli(find_redis_server())
    if server is None or cli is None:
        sys.exit("redis-server / redis-cli not found: install them or set LEARNSERVE_REDIS_SERVER")
    single = RedisServer(server, Path(tempfile.mkdtemp(prefix="bench-redis-")))
    cluster = RedisClusterNodes(server, cli, Path(tempfile.mkdtemp(prefix="bench-cluster-")))
    base_env = {
        "LEARNSERVE_LOG_LEVEL": "warning",
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1000",
        "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "3600",
    }
    envs = {
        "single": {**base_env, "LEARNSERVE_REDIS_URL": single.url},
        "cluster": {**base_env, "LEARNSERVE_REDIS_URL": cluster.url,
                    "LEARNSERVE_REDIS_CLUSTER": "true"},
    }  # fmt: skip
    ports = {k: free_port() for k in envs}
    names = [f"bench-{i}" for i in range(args.models)]
    rng = np.random.default_rng(0)
    procs = []
    rounds: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        single.start()
        cluster.start()
        for k, env in envs.items():
            procs.append(
                start_service(uvicorn_args("service.app:factory", ports[k], factory=True), env,
                              ports[k], health_path="/readyz")
            )  # fmt: skip
            with httpx.Client(base_url=f"http://{HOST}:{ports[k]}", timeout=60) as c:
                for m in names:
                    r = c.put(
                        f"/models/{m}",
                        json={"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}},
                    )
                    assert r.status_code in (200, 201), r.text
        scenarios: list[tuple[str, list[bytes], int]] = []
        for n, count in ((100, 64), (1, 256)):
            reqs = [
                build_request(
                    "POST",
                    "/update",
                    json.dumps({"model": names[i % len(names)], "examples": rows(rng, n)}).encode(),
                )
                for i in range(count)
            ]
            scenarios.append((f"/update ({n} per request, {len(names)} models)", reqs, n))
        for _ in range(args.rounds):
            for name, reqs, n in scenarios:
                for k in envs:
                    res = load(ports[k], reqs, args.connections, args.duration)
                    rounds.setdefault((name, k), []).append(summarise(name, res, n))
    finally:
        for proc in procs:
            stop_process(proc)
        single.stop()
        cluster.stop()

    results = []
    for (_name, store), rs in rounds.items():
        best = dict(max(rs, key=lambda r: r["req_per_s"]))
        best["store"] = store
        best["req_per_s_rounds"] = [r["req_per_s"] for r in rs]
        results.append(best)
    by = {(r["scenario"], r["store"]): r for r in results}
    ratios = {
        name: by[(name, "cluster")]["req_per_s"] / by[(name, "single")]["req_per_s"]
        for name, _, _ in scenarios
        if by[(name, "single")]["req_per_s"]
    }
    print_table(
        f"/update: {args.connections} connections, best of {args.rounds} interleaved rounds "
        f"of {args.duration:.0f} s",
        ["scenario", "store", "req/s", "examples/s", "p50 ms", "p99 ms", "non-200"],
        [
            [r["scenario"], r["store"], fmt_rate(r["req_per_s"]), fmt_rate(r["examples_per_s"]),
             f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", r["errors"]]
            for r in results
        ],
        caption="cluster / single: "
        + ", ".join(f"{name}: {fmt_ratio(x)}" for name, x in ratios.items()),
    )  # fmt: skip
    path = write_results(
        "cluster",
        {
            "settings": {
                "duration_s": args.duration,
                "rounds": args.rounds,
                "connections": args.connections,
                "models": args.models,
                "masters": len(cluster.nodes),
            },
            "scenarios": results,
            "cluster_vs_single": ratios,
        },
        extra_packages=("redis", "uvicorn"),
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
