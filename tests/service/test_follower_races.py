"""Challengers under races (issue 32, defects 1-3), as repeated concurrent rounds
against real servers: two ``learnserve serve`` processes on one real redis-server, and
one in-process server on SQLite.

1. A promotion reaches every worker at once: right after the answer to
   ``POST /models/lead/promote``, the other worker's ``/predict`` under ``lead``
   answers from the promoted follower's state within a second (no update between).
2. ``DELETE`` of a leader racing ``PUT`` of a follower of it: exactly one wins (the
   leader is gone and the follower never created, or the follower exists and the
   leader's delete is a 409); never an orphan follower, never a 5xx.
3. ``DELETE`` of a follower racing its promotion: never both.
4. A follower created on one worker while the other, which does not know it yet (its
   catalog poll), checkpoints the leader and trims its log: the trim keeps what the
   follower needs (the store knows it), and the other worker loads it (no FollowerLost).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, dense_model, start_learnserve_all

ROUNDS = 30
LEADER = dense_model(4, "arow")
X = [1.0, -2.0, 0.5, 3.0]
EXAMPLES = {"model": "lead", "examples": [{"x": X, "y": 1}, {"x": [-1.0, 2.0, 0.0, -3.0], "y": -1}]}


def follower(lead: str = "lead") -> dict[str, Any]:
    return {**dense_model(4, "pa1"), "follows": lead}


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Iterator[list[str]]:
    """Two service processes on one Redis (each test leaves no model behind)."""
    if not redis_server.running:
        redis_server.start()
    redis_server.flushall()
    env = {**os.environ, "LEARNSERVE_REDIS_URL": redis_server.url,
           "LEARNSERVE_DATA_DIR": str(tmp_path_factory.mktemp("races")),
           # a promotion must not wait for the catalog poll (it wakes every worker), nor
           # a follower created on one worker for the other's to keep its leader's log
           "LEARNSERVE_CATALOG_POLL_SECONDS": "5",
           "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "2",
           "LEARNSERVE_LOG_RETAIN_ENTRIES": "0"}  # fmt: skip
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    try:
        yield [f"http://127.0.0.1:{p}" for p in ports]
    finally:
        for p in procs:
            stop_process(p)


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[list[str]]:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv:
        yield [srv.url, srv.url]


def clients(urls: list[str]) -> list[httpx.AsyncClient]:
    return [httpx.AsyncClient(base_url=u, timeout=30) for u in urls]


async def promoted(c: httpx.AsyncClient) -> bool:
    """Whether ``c`` answers ``/predict`` under ``lead`` from an untaught follower's state
    (409 not_fitted), not from the taught leader's (a score)."""
    r = await c.post("/predict", json={"model": "lead", "instances": [{"x": X}]})
    if r.status_code == 409 and r.json()["detail"]["error"] == "not_fitted":
        return True
    assert r.status_code == 200, r.text
    return False


async def fresh_leader(c: httpx.AsyncClient, name: str = "lead") -> None:
    """``name`` created and taught two examples."""
    r = await c.put(f"/models/{name}", json=LEADER)
    assert r.status_code == 201, r.text
    r = await c.post("/update", json={**EXAMPLES, "model": name})
    assert r.status_code == 200, r.text


async def wait_for(c: httpx.AsyncClient, want: bool, within: float) -> float:
    """Seconds until ``promoted(c)`` is ``want``; ``inf`` if not within ``within``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        if await promoted(c) == want:
            return time.monotonic() - t0
        await asyncio.sleep(0.02)
    return float("inf")


async def after(seconds: float, request: Any) -> httpx.Response:
    """``request`` sent ``seconds`` late: the rounds of a race cover several overlaps."""
    await asyncio.sleep(seconds)
    r: httpx.Response = await request
    return r


async def orphans(c: httpx.AsyncClient) -> list[str]:
    """Followers (in the store's catalog) whose leader is gone, and failed models."""
    r = await c.get("/models")
    assert r.status_code == 200, r.text
    body = r.json()
    models = body["models"] if isinstance(body, dict) else body
    names = {m["name"] for m in models}
    out = []
    for m in models:
        lead = (m.get("config") or {}).get("follows")
        lead = lead.get("model") if isinstance(lead, dict) else lead
        if lead is not None and lead not in names:
            out.append(m["name"])
    ready = (await c.get("/readyz")).json()
    return out + sorted(ready.get("failed_models") or {})


# ------------------------------------------------------------------ 1: promotion reaches
def test_a_promotion_reaches_the_other_worker_at_once(two_workers: list[str]) -> None:
    async def run() -> list[float]:
        a, b = clients(two_workers)
        await fresh_leader(a)
        late = []
        for i in range(ROUNDS):
            assert await wait_for(b, False, 5.0) < 5.0  # the leader answers on b
            r = await a.put(f"/models/f{i}", json=follower())
            assert r.status_code == 201, r.text
            r = await a.post("/models/lead/promote", json={"follower": f"f{i}"})
            assert r.status_code == 200, r.text
            late.append(await wait_for(b, True, 1.0))
            r = await a.post("/models/lead/promote", json={"follower": None})
            assert r.status_code == 200, r.text
            assert (await a.delete(f"/models/f{i}")).status_code == 204
        assert (await a.delete("/models/lead")).status_code == 204
        await a.aclose()
        await b.aclose()
        return late

    late = asyncio.run(run())
    assert all(t <= 1.0 for t in late), late


# ------------------------------------------------------------------ 2: delete vs create
async def _delete_leader_vs_create_follower(urls: list[str]) -> list[str]:
    """Each round its own names: a worker's copy of an earlier round's model (dropped at
    its next catalog poll) plays no part."""
    a, b = clients(urls)
    problems = []
    for i in range(ROUNDS):
        lead, f = f"lead{i}", f"f{i}"
        await fresh_leader(a, lead)
        d, p = await asyncio.gather(
            after(i % 8 * 0.0005, a.delete(f"/models/{lead}")),
            b.put(f"/models/{f}", json=follower(lead)),
        )
        if d.status_code == 204:
            if p.status_code not in (404, 409, 422):
                problems.append(f"round {i}: leader deleted, PUT {p.status_code} {p.text}")
        elif d.status_code == 409:
            if p.status_code != 201:
                problems.append(f"round {i}: DELETE 409, PUT {p.status_code} {p.text}")
        else:
            problems.append(f"round {i}: DELETE {d.status_code} {d.text}")
        for c in (a, b):  # both workers see the same catalog
            if found := await orphans(c):
                problems.append(f"round {i}: orphans {found}")
            r = await c.get(f"/models/{f}")
            if (r.status_code == 200) != (p.status_code == 201):
                problems.append(f"round {i}: PUT {p.status_code}, GET {r.status_code} {r.text}")
        for name in (f, lead):  # the next round starts afresh
            r = await a.delete(f"/models/{name}")
            assert r.status_code in (204, 404), r.text
    await a.aclose()
    await b.aclose()
    return problems


def test_deleting_a_leader_racing_a_follower_leaves_no_orphan(two_workers: list[str]) -> None:
    assert asyncio.run(_delete_leader_vs_create_follower(two_workers)) == []


def test_deleting_a_leader_racing_a_follower_leaves_no_orphan_sqlite(
    sqlite_server: list[str],
) -> None:
    assert asyncio.run(_delete_leader_vs_create_follower(sqlite_server)) == []


# ------------------------------------------------------------------ 3: delete vs promote
async def _delete_follower_vs_promote(urls: list[str]) -> list[str]:
    a, b = clients(urls)
    await fresh_leader(a)
    problems = []
    for i in range(ROUNDS):
        f = f"f{i}"
        r = await a.put(f"/models/{f}", json=follower())
        assert r.status_code == 201, r.text
        d, p = await asyncio.gather(
            after(i % 8 * 0.0005, b.delete(f"/models/{f}")),
            a.post("/models/lead/promote", json={"follower": f}),
        )
        if (d.status_code, p.status_code) not in ((204, 409), (409, 200)):
            problems.append(f"round {i}: DELETE {d.status_code} {d.text}, promote "
                            f"{p.status_code} {p.text}")  # fmt: skip
        if p.status_code == 200:
            lead = (await a.get("/models/lead")).json()
            if lead.get("serving") != f or (await a.get(f"/models/{f}")).status_code != 200:
                problems.append(f"round {i}: promoted, then serving {lead.get('serving')}")
            r = await a.post("/models/lead/promote", json={"follower": None})
            assert r.status_code == 200, r.text
        r = await a.delete(f"/models/{f}")
        assert r.status_code in (204, 404), r.text
        for c in (a, b):
            if found := await orphans(c):
                problems.append(f"round {i}: orphans {found}")
    assert (await a.delete("/models/lead")).status_code == 204
    await a.aclose()
    await b.aclose()
    return problems


def test_deleting_a_follower_racing_its_promotion_never_both(two_workers: list[str]) -> None:
    assert asyncio.run(_delete_follower_vs_promote(two_workers)) == []


def test_deleting_a_follower_racing_its_promotion_never_both_sqlite(
    sqlite_server: list[str],
) -> None:
    assert asyncio.run(_delete_follower_vs_promote(sqlite_server)) == []


# ------------------------------------------------------------------ 4: trim vs new follower
def test_a_trim_by_a_worker_that_does_not_know_a_follower_keeps_its_entries(
    two_workers: list[str],
) -> None:
    async def run() -> list[str]:
        a, b = clients(two_workers)
        problems = []
        for i in range(10):
            lead, f = f"lead{i}", f"f{i}"
            await fresh_leader(a, lead)  # a checkpoints it (and holds its lease)
            r = await b.put(f"/models/{f}", json=follower(lead))
            assert r.status_code == 201, r.text
            for _ in range(4):  # a checkpoints and trims, not knowing f (its poll: 5 s)
                r = await a.post("/update", json={**EXAMPLES, "model": lead})
                assert r.status_code == 200, r.text
            version = r.json()["version"]
            wait = {"model": f, "instances": [{"x": X}], "min_version": version}
            digests = []
            for c in (a, b):
                r = await c.post("/predict", json=wait)
                if r.status_code != 200:
                    problems.append(f"round {i}: {f} {r.status_code} {r.text}")
                    continue
                digests.append((await c.get(f"/models/{f}")).json()["state_digest"])
                if found := await orphans(c):
                    problems.append(f"round {i}: failed {found}")
            if len(set(digests)) > 1:
                problems.append(f"round {i}: {f} differs between the workers: {digests}")
            for name in (f, lead):
                r = await a.delete(f"/models/{name}")
                assert r.status_code in (204, 404), r.text
        await a.aclose()
        await b.aclose()
        return problems

    assert asyncio.run(run()) == []
