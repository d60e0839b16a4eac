"""Group commit: concurrent single-example updates to one model share log entries, and
nothing about what each client is told or what each replica learns changes.

Two workers on one Redis; 32 clients send 1-example updates at once (a few of them
refused: a non-finite feature). Each good request is answered 200 with its own
``applied``/``correct`` once durable; the log holds fewer entries than requests; the
log read back from Redis, fed to the ``learners`` model in its order, gives the state
both workers serve, and a restart replays it to the same state.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np

from learners.linear import make_classifier
from service.models.payload import GROUP_MAGIC, decode_payload, split_group
from service.store import open_store
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve

DIM = 8
N = 96


def _example(i: int) -> dict:
    rng = np.random.default_rng(900 + i)
    x = rng.normal(size=DIM)
    return {
        "x": {str(j): round(float(v), 6) for j, v in enumerate(x) if v > -0.5},
        "y": "p" if x[0] + 0.3 * x[1] > 0 else "n",
    }


def _bad(i: int) -> bool:
    return i % 16 == 5  # six requests out of 96 are refused, amid the others


def _send(url: str, i: int) -> tuple[int, dict]:
    ex = _example(i)
    if _bad(i):
        ex = {**ex, "x": {**ex["x"], "3": "NaN"}}
    with httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/update", json={"model": "g", "examples": [ex]})
    return r.status_code, r.json()


async def _log(redis_url: str) -> list[bytes]:
    store = open_store(redis_url, None)
    await store.open()
    try:
        entries = await store.read_log("g", 0, 100_000)
    finally:
        await store.close()
    return [bytes(e.payload) for e in entries]


def test_concurrent_small_updates_share_entries_and_every_replica_learns_them_alike(
    redis_url: str, tmp_path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LEARNSERVE_REDIS_URL": redis_url, "LEARNSERVE_DATA_DIR": str(tmp_path)}
    proc = start_learnserve(port, env, workers=2)
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            body = {"algorithm": "arow", "features": {"kind": "sparse", "dim": DIM}}
            assert c.put("/models/g", json=body).status_code == 201
        with ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(lambda i: _send(url, i), range(N)))
        good = [i for i in range(N) if not _bad(i)]
        for i, (status, body) in enumerate(answers):
            if _bad(i):
                assert status == 422, body
                assert body["detail"]["field"].startswith("examples[0].x"), body
            else:
                assert status == 200, body
                assert body["applied"] == 1 and body["correct"] in (0, 1), body
        versions = {body["version"] for status, body in answers if status == 200}

        log = asyncio.run(_log(redis_url))
        last = max(versions)
        assert len(log) == last  # one log, one order; no refused request reached it
        grouped = [p for p in log if p[:4] == GROUP_MAGIC]
        assert grouped, "no two of 32 concurrent requests shared an entry"
        assert len(log) < len(good)
        rows = [e for p in log for e in (split_group(p) if p[:4] == GROUP_MAGIC else [p])]
        assert len(rows) == len(good)

        # the library, fed the log's requests in its order
        ref = make_classifier("arow", dim=DIM, params={})
        for entry in rows:
            batch, meta = decode_payload(entry, DIM)
            ref.update(batch, meta["y"])
        digests = _digests(url, last)
        assert set(digests.values()) == {ref.state_digest()}, digests  # both workers
        with httpx.Client(base_url=url, timeout=60) as c:
            assert c.get("/models/g").json()["examples_learned"] == len(good)
    finally:
        stop_process(proc)

    proc = start_learnserve(port, env, workers=1)  # a restart replays the same entries
    try:
        assert set(_digests(url, last, workers=1).values()) == set(digests.values())
    finally:
        stop_process(proc)


def _digests(url: str, version: int, workers: int = 2) -> dict[str, str]:
    out: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(out) < workers:
        with httpx.Client(base_url=url, timeout=60, headers={"Connection": "close"}) as c:
            ask = {"model": "g", "instances": [{"x": {"1": 1.0}}], "min_version": version}
            assert c.post("/predict", json=ask).status_code == 200
            r = c.get("/models/g")
            out[r.headers["x-worker"]] = r.json()["state_digest"]
    return out
