"""The checkpoint stall of ``bench/http.py``: how long the event loop of a server stops
while a 2**20-dimensional AROW model checkpoints.

:func:`checkpoint_stall` sends ``GET /healthz`` back to back on one connection while
``POST /models/big/checkpoint`` runs, next to the same probe without a checkpoint, and
reads the server's own loop lag (``learnserve_event_loop_lag_seconds``) before and
after; :func:`print_stall` prints it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import numpy as np

from bench._common import print_table
from bench._loadgen import _read_response, build_request

HOST = "127.0.0.1"


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
