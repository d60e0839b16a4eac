"""HTTP service benchmark (issue 3): learnserve next to the ceilings uvicorn allows.

Servers (each one uvicorn process, 1 worker, access log off, started by this script):

- ``bare``: a raw ASGI callable answering a fixed JSON — the ceiling.
- ``noop``: FastAPI with one ``POST /predict`` route that reads the body and answers
  a fixed JSON — what any FastAPI service pays before doing work.
- ``learnserve`` on a private redis-server (``appendonly yes``, ``appendfsync everysec``):
  ``/predict`` 1 instance, ``/update`` 1 example, ``/update`` 100 and 1000 examples
  (an AROW model over 28 dense features, HIGGS-shaped synthetic data).

Load: a closed-loop asyncio HTTP/1.1 generator (``bench/_loadgen.py``), ``--connections``
keep-alive connections, ``--duration`` seconds per scenario after a 1 s warm-up, the
scenarios interleaved over ``--rounds`` rounds with the servers running side by side;
the best round of each is reported (all rounds are in the JSON). The generator runs on
the same machine as the servers, so absolute req/s depend on the free cores; the ratios
(measured in the same run) are the comparable figures. Latency percentiles are per
request as seen by the client.

Checkpoint stall: a 2**20-dimensional AROW model (hashed features, ~16 MB of state) is
checkpointed with ``POST /models/big/checkpoint`` while a probe sends ``GET /healthz``
back to back on another connection. The probe's worst latency during the checkpoint,
next to its worst latency without one, is the event-loop stall a checkpoint causes.

    .venv/bin/python bench/http.py                 # ~2 min; JSON to bench/results/http.json
    .venv/bin/python bench/http.py --duration 1 --rounds 1    # quicker
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and this file
# (http.py) would shadow the standard library's ``http`` package: put the repo
# root there instead, before anything imports ``http``.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import fmt_rate, fmt_ratio, print_table, write_results  # noqa: E402
from bench._loadgen import LoadResult, build_request, run_load  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

DIM = 28
HOST = "127.0.0.1"


def uvicorn_args(target: str, port: int, factory: bool = False) -> list[str]:
    args = [sys.executable, "-m", "uvicorn", target, "--host", HOST, "--port", str(port)]
    args += ["--log-level", "warning", "--no-access-log"]
    return args + (["--factory"] if factory else [])


def rows(rng: np.random.Generator, n: int, decimals: int | None = 5) -> list[dict[str, Any]]:
    """``decimals=None``: full-precision doubles (``repr``, up to 17 digits), what a
    client sending ``numpy.tolist()`` output writes."""
    X = rng.normal(size=(n, DIM))
    X = X if decimals is None else X.round(decimals)
    w = np.linspace(-1, 1, DIM)
    y = np.where(X @ w + rng.normal(scale=0.5, size=n) > 0, "s", "b")
    return [{"x": x, "y": str(t)} for x, t in zip(X.tolist(), y.tolist(), strict=True)]


def named_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    """Examples as the README's: named features, two categorical, ~14 per example."""
    jobs, towns = ["clerk", "exec", "tech", "sales"], [f"town{k}" for k in range(50)]
    out = []
    for _ in range(n):
        x: dict[str, Any] = {"age": int(rng.integers(18, 90))}
        x["job"] = jobs[int(rng.integers(0, 4))]
        x["town"] = towns[int(rng.integers(0, 50))]
        for k in rng.choice(1000, 11, replace=False).tolist():
            x[f"w{k}"] = round(float(rng.random()), 4)
        out.append({"x": x, "y": "+1" if rng.random() < 0.5 else "-1"})
    return out


def load(port: int, requests: list[bytes], connections: int, duration: float) -> LoadResult:
    asyncio.run(run_load(HOST, port, requests, connections, min(1.0, duration)))  # warm-up
    return asyncio.run(run_load(HOST, port, requests, connections, duration))


def summarise(name: str, res: LoadResult, examples_per_request: int) -> dict[str, Any]:
    return {
        "scenario": name,
        "requests": res.requests,
        "seconds": res.seconds,
        "req_per_s": res.rps,
        "examples_per_request": examples_per_request,
        "examples_per_s": res.rps * examples_per_request,
        "p50_ms": res.percentile(0.50) * 1e3,
        "p99_ms": res.percentile(0.99) * 1e3,
        "statuses": {str(k): v for k, v in res.statuses.items()},
        "errors": res.errors,
    }


async def probe_during(port: int, action: Any, seconds: float | None = None) -> dict[str, Any]:
    """Back-to-back GET /healthz on one connection while ``action()`` runs (or for ``seconds``)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    req = build_request("GET", "/healthz")
    lat: list[float] = []
    done = asyncio.Event()

    async def run_action() -> Any:
        try:
            if action is None:
                await asyncio.sleep(seconds or 1.0)
                return None
            return await action()
        finally:
            done.set()

    task = asyncio.create_task(run_action())
    from bench._loadgen import _read_response

    while not done.is_set():
        t0 = time.perf_counter()
        writer.write(req)
        await _read_response(reader)
        lat.append(time.perf_counter() - t0)
    writer.close()
    result = await task
    lat.sort()
    return {
        "probes": len(lat),
        "p50_ms": lat[len(lat) // 2] * 1e3 if lat else None,
        "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3 if lat else None,
        "max_ms": lat[-1] * 1e3 if lat else None,
        "action": result,
    }


_LAG_METRIC = "learnserve_event_loop_lag_seconds"


def loop_lag_buckets(metrics_text: str) -> dict[str, float]:
    """Cumulative ``learnserve_event_loop_lag_seconds`` bucket counts by ``le`` (summed
    over any other labels, e.g. one series per worker), from ``GET /metrics`` text."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != _LAG_METRIC:
            continue
        for sample in family.samples:
            if sample.name == _LAG_METRIC + "_bucket":
                le = sample.labels["le"]
                out[le] = out.get(le, 0.0) + sample.value
    return out


def loop_lag_between(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The server's loop-lag samples observed between two reads of /metrics: how many,
    how many above 10 ms, and the bucket the largest one fell in (its upper bound)."""
    delta = {le: after[le] - before.get(le, 0.0) for le in after}
    bounds = sorted(delta, key=float)  # "+Inf" sorts last
    total = delta.get("+Inf", 0.0)
    above = total - delta.get("0.01", 0.0)
    max_le = next((le for le in bounds if delta[le] >= total), None) if total else None
    lower = bounds[bounds.index(max_le) - 1] if max_le and bounds.index(max_le) > 0 else "0"
    return {
        "samples": int(total),
        "samples_above_10ms": int(above),
        "max_lag_bucket": None if max_le is None else [lower, max_le],  # (lower, upper] in s
        "bucket_deltas": {le: int(delta[le]) for le in bounds},
    }


def _fmt_bucket(b: list[str] | None) -> str:
    if b is None:
        return "-"
    lo, hi = (f"{float(x) * 1e3:g}" if x != "+Inf" else "inf" for x in b)
    return f"({lo}, {hi}]"


def checkpoint_stall(port: int, repeats: int) -> dict[str, Any]:
    """Probe latency and the server's own loop lag (learnserve_event_loop_lag_seconds,
    sampled every 1 ms: the server runs with LEARNSERVE_LOOP_LAG_INTERVAL_SECONDS=0.001)
    during checkpoints of a 2**20-dimension model."""
    base = f"http://{HOST}:{port}"
    with httpx.Client(base_url=base, timeout=120) as c:
        r = c.put(
            "/models/big",
            json={"algorithm": "arow", "features": {"kind": "hashed", "bits": 20}},
        )
        assert r.status_code in (200, 201), r.text
        rng = np.random.default_rng(7)
        for _ in range(5):  # touch many dimensions so the state is not trivial
            ex = [
                {"x": {f"f{int(k)}": 1.0 for k in rng.integers(0, 10**7, 50)}, "y": int(t)}
                for t in rng.integers(0, 2, 500)
            ]
            assert c.post("/update", json={"model": "big", "examples": ex}).status_code == 200

    async def checkpoint(ac: httpx.AsyncClient) -> dict[str, Any]:
        async with ac:
            # A checkpoint only writes when the version moved: learn one example first.
            await ac.post("/update", json={"model": "big", "examples": [{"x": {"a": 1.0}, "y": 1}]})
            before = (await ac.get("/metrics")).text  # parsed after the probe stops
            t0 = time.perf_counter()
            r = await ac.post("/models/big/checkpoint")
            body = r.json()
            body["client_seconds"] = time.perf_counter() - t0
            body["metrics_text"] = (before, (await ac.get("/metrics")).text)
            return body

    def run_checkpoint() -> dict[str, Any]:
        # Built before the probe starts: constructing an httpx client loads the CA
        # certificates, which blocks the bench's own event loop for ~50 ms (it showed
        # up as a 30-70 ms probe "stall" that the server never had).
        ac = httpx.AsyncClient(base_url=base, timeout=120)
        res = asyncio.run(probe_during(port, lambda: checkpoint(ac)))
        before, after = res["action"].pop("metrics_text")
        res["action"]["server_loop_lag"] = loop_lag_between(
            loop_lag_buckets(before), loop_lag_buckets(after)
        )
        return res

    async def warm_up() -> None:
        # The first request of an httpx.AsyncClient in a process imports its async
        # backend (~40 ms blocking the bench's loop): pay that before any probe.
        async with httpx.AsyncClient(base_url=base, timeout=120) as ac:
            await ac.get("/healthz")

    asyncio.run(warm_up())
    with httpx.Client(base_url=base, timeout=120) as c:
        before = loop_lag_buckets(c.get("/metrics").text)
        baseline = asyncio.run(probe_during(port, None, seconds=2.0))
        baseline["server_loop_lag"] = loop_lag_between(
            before, loop_lag_buckets(c.get("/metrics").text)
        )
    runs = [run_checkpoint() for _ in range(repeats)]
    return {"dim": 1 << 20, "baseline": baseline, "during_checkpoint": runs}


def print_stall(store: str, stall: dict[str, Any]) -> None:
    b = stall["baseline"]

    def lag_cells(r: dict[str, Any]) -> list[Any]:
        lag = r.get("server_loop_lag") or {}
        return [lag.get("samples_above_10ms", "-"), _fmt_bucket(lag.get("max_lag_bucket"))]

    print_table(
        f"Event-loop stall while a 2**20-dim AROW model checkpoints to {store} (GET /healthz "
        "probe; server-side learnserve_event_loop_lag_seconds sampled every 1 ms)",
        ["run", "checkpoint s", "probe p50 ms", "probe p99 ms", "probe max ms",
         "server lag >10 ms (samples)", "server max lag bucket ms"],
        [["no checkpoint", "-", f"{b['p50_ms']:.2f}", f"{b['p99_ms']:.2f}",
          f"{b['max_ms']:.2f}", *lag_cells(b)]]
        + [
            [f"checkpoint {i + 1}", f"{r['action'].get('duration_seconds', 0):.3f}",
             f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", f"{r['max_ms']:.2f}",
             *lag_cells(r["action"])]
            for i, r in enumerate(stall["during_checkpoint"])
        ],
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per scenario per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; best one kept")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--checkpoints", type=int, default=3, help="checkpoint-stall repeats")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    predict_bodies = [
        json.dumps({"model": "bench", "instances": [{"x": r["x"]}]}).encode() for r in rows(rng, 64)
    ]
    predict_reqs = [build_request("POST", "/predict", b) for b in predict_bodies]

    redis_bin = find_redis_server()
    if redis_bin is None:
        sys.exit("redis-server not found: install it or set LEARNSERVE_REDIS_SERVER")
    redis = RedisServer(redis_bin, Path(tempfile.mkdtemp(prefix="bench-redis-")))
    redis.start()
    env = {
        "LEARNSERVE_REDIS_URL": redis.url,
        "LEARNSERVE_LOG_LEVEL": "warning",
        # Checkpoints every 1000 updates, the default: the log is trimmed behind them as in
        # production (without, the log grows by GBs over the run and Redis' AOF rewrites
        # of it take a core from every later scenario). No timed ones: the stall
        # measurement below triggers its own.
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1000",
        "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "3600",
        "LEARNSERVE_LOOP_LAG_INTERVAL_SECONDS": "0.001",  # checkpoint_stall reads the lag
    }
    # All servers run side by side and the scenarios are interleaved round by round,
    # so a burst of load from elsewhere on the machine hits them alike; the best
    # round of each scenario is reported (the median is in the JSON).
    ports = {k: free_port() for k in ("bare", "noop", "learnserve")}
    procs = [
        start_service(uvicorn_args("bench._http_apps:bare", ports["bare"]), None, ports["bare"],
                      health_path="/"),
        start_service(uvicorn_args("bench._http_apps:noop", ports["noop"]), None, ports["noop"]),
        start_service(uvicorn_args("service.app:factory", ports["learnserve"], factory=True), env,
                      ports["learnserve"], health_path="/readyz"),
    ]  # fmt: skip
    port = ports["learnserve"]
    stall: dict[str, Any] = {}
    stall_sqlite: dict[str, Any] = {}
    rounds: dict[str, list[dict[str, Any]]] = {}
    try:
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=60) as c:
            r = c.put(
                "/models/bench",
                json={"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}},
            )
            assert r.status_code in (200, 201), r.text
            assert c.post(
                "/update", json={"model": "bench", "examples": rows(rng, 1000)}
            ).is_success
            r = c.put(
                "/models/hashed",
                json={"algorithm": "arow", "features": {"kind": "hashed", "bits": 20}},
            )
            assert r.status_code in (200, 201), r.text
        scenarios: list[tuple[str, int, list[bytes], int]] = [
            ("bare ASGI", ports["bare"], predict_reqs, 1),
            ("no-op FastAPI", ports["noop"], predict_reqs, 1),
            ("learnserve /predict (1 instance)", port, predict_reqs, 1),
        ]
        for n, count in ((1, 256), (100, 64), (1000, 8)):
            bodies = [
                json.dumps({"model": "bench", "examples": rows(rng, n)}).encode()
                for _ in range(count)
            ]
            reqs = [build_request("POST", "/update", b) for b in bodies]
            scenarios.append((f"learnserve /update ({n} per request)", port, reqs, n))
        full = [
            json.dumps({"model": "bench", "examples": rows(rng, 100, None)}).encode()
            for _ in range(64)
        ]
        reqs = [build_request("POST", "/update", b) for b in full]
        scenarios.append(("learnserve /update (100, full-precision floats)", port, reqs, 100))
        hashed = [
            json.dumps({"model": "hashed", "examples": named_rows(rng, 100)}).encode()
            for _ in range(64)
        ]
        reqs = [build_request("POST", "/update", b) for b in hashed]
        scenarios.append(("learnserve /update (100, hashed named features)", port, reqs, 100))
        for _ in range(args.rounds):
            for name, p, reqs, n in scenarios:
                res = load(p, reqs, args.connections, args.duration)
                rounds.setdefault(name, []).append(summarise(name, res, n))
        time.sleep(3.0)  # let the checkpoints the last scenarios triggered finish
        stall = checkpoint_stall(port, args.checkpoints)
        # The same on the embedded store (SQLite under a temporary --data-dir), started
        # only now and alone, so it never competes with the other servers.
        for proc in procs:
            stop_process(proc)
        procs.clear()
        sqlite_env = {k: v for k, v in env.items() if k != "LEARNSERVE_REDIS_URL"}
        sqlite_env["LEARNSERVE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-sqlite-")
        sqlite_port = free_port()
        procs.append(
            start_service(uvicorn_args("service.app:factory", sqlite_port, factory=True),
                          sqlite_env, sqlite_port, health_path="/readyz")
        )  # fmt: skip
        stall_sqlite = checkpoint_stall(sqlite_port, args.checkpoints)
    finally:
        for proc in procs:
            stop_process(proc)
        redis.stop()

    results = []
    for rs in rounds.values():
        best = dict(max(rs, key=lambda r: r["req_per_s"]))
        best["req_per_s_median"] = float(np.median([r["req_per_s"] for r in rs]))
        best["req_per_s_rounds"] = [r["req_per_s"] for r in rs]
        results.append(best)
    by = {r["scenario"]: r for r in results}
    bare, noop = by["bare ASGI"]["req_per_s"], by["no-op FastAPI"]["req_per_s"]
    pred = by["learnserve /predict (1 instance)"]["req_per_s"]
    ratios = {
        "predict_vs_bare_asgi": pred / bare if bare else None,
        "predict_vs_noop_fastapi": pred / noop if noop else None,
        "noop_fastapi_vs_bare_asgi": noop / bare if bare else None,
    }
    print_table(
        f"HTTP: {args.connections} connections, best of {args.rounds} interleaved rounds "
        f"of {args.duration:.0f} s",
        ["scenario", "req/s", "examples/s", "p50 ms", "p99 ms", "non-200"],
        [
            [r["scenario"], fmt_rate(r["req_per_s"]), fmt_rate(r["examples_per_s"]),
             f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", r["errors"]]
            for r in results
        ],
        caption="predict / bare ASGI = {}, predict / no-op FastAPI = {} "
        "(target >= 0.25x bare)".format(
            fmt_ratio(ratios["predict_vs_bare_asgi"]), fmt_ratio(ratios["predict_vs_noop_fastapi"])
        ),
    )  # fmt: skip
    for store, st in (("Redis", stall), ("SQLite", stall_sqlite)):
        if st:
            print_stall(store, st)
    path = write_results(
        "http",
        {
            "settings": {
                "duration_s": args.duration,
                "rounds": args.rounds,
                "connections": args.connections,
            },
            "scenarios": results,
            "ratios": ratios,
            "checkpoint_stall": stall,
            "checkpoint_stall_sqlite": stall_sqlite,
        },
        extra_packages=("fastapi", "starlette", "uvicorn", "orjson", "redis"),
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
