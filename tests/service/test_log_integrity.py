"""The update log's chain of heads, and a worker that notices a log that lost its tail.

Redis replicates asynchronously: a failover can lose the last entries of a model's
log, which a worker had applied (and acknowledged). Later appends then take those
positions again with other entries. Every entry carries the log's chain head
(``chain_head(previous head, payload)``), so the worker notices, counts the lost
entries (``learnserve_log_entries_lost_total``) and rebuilds the model from the
store instead of answering a version it never applied.

The failover is simulated on a real redis-server the way it looks afterwards: the
stream without its last entry, ``seq`` and ``head`` set back by one.
"""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest
import redis

from service.settings import Settings
from service.store import LogDiverged, chain_head
from service.store.redis import RedisStore
from service.store.sqlite import SQLiteStore
from tests.service.serving import ServerThread, dense_model


@pytest.fixture(params=["sqlite", "redis"])
def store_factory(request, tmp_path):
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "s.sqlite3")
    url = request.getfixturevalue("redis_url")
    return lambda: RedisStore(url)


def _run(factory, fn) -> None:
    async def main() -> None:
        store = factory()
        await store.open()
        try:
            await fn(store)
        finally:
            await store.close()

    asyncio.run(main())


def test_appends_carry_the_chain_of_heads(store_factory) -> None:
    async def check(store) -> None:
        await store.create_model("m", {"kind": "linear"})
        p1, h1 = await store.append_entry("m", b"one")
        p2 = await store.append("m", b"two")  # the plain append continues the chain
        p3, _, replayed = await store.append_once("m", b"three", "k", "hash", 1, 60.0)
        p4, h4 = await store.append_entry("m", b"four")
        assert (p1, p2, p3, p4, replayed) == (1, 2, 3, 4, False)
        assert h1 == chain_head("", b"one")
        entries = await store.read_log("m", 0)
        expect, head = [], ""
        for payload in (b"one", b"two", b"three", b"four"):
            head = chain_head(head, payload)
            expect.append(head)
        assert [e.head for e in entries] == expect
        assert h4 == expect[-1]
        # A model created again under the name starts a new chain.
        await store.delete_model("m")
        await store.create_model("m", {"kind": "linear"})
        assert (await store.append_entry("m", b"one")) == (1, h1)

    _run(store_factory, check)


def test_redis_refuses_a_checkpoint_the_log_does_not_hold(redis_url) -> None:
    async def check(store) -> None:
        await store.create_model("m", {"kind": "linear"})
        _, h1 = await store.append_entry("m", b"one")
        _, h2 = await store.append_entry("m", b"two")
        with pytest.raises(LogDiverged):
            await store.put_checkpoint("m", 2, b"state", head=h1)  # wrong head at 2
        with pytest.raises(LogDiverged):
            await store.put_checkpoint("m", 3, b"state", head=chain_head(h2, b"x"))  # past seq
        assert await store.get_checkpoint("m") is None
        await store.put_checkpoint("m", 2, b"state", head=h2)
        await store.put_checkpoint("m", 1, b"older", head=h1)  # older: ignored, no error
        cp = await store.get_checkpoint("m")
        assert cp is not None and (cp.position, cp.blob) == (2, b"state")

    _run(lambda: RedisStore(redis_url), check)


def _lose_last_entry(r: redis.Redis, name: str) -> None:
    """What a failover to a replica that missed the last append leaves behind."""
    log, seq, head = (f"ls:{{{name}}}:{k}" for k in ("log", "seq", "head"))
    last = int(r.get(seq))
    kept = r.xrange(log, "-", f"{last - 1}-0")
    r.delete(log)  # rebuilt: XDEL would keep the stream's last id at the lost entry
    for eid, fields in kept:
        r.xadd(log, fields, id=eid)
    r.set(seq, last - 1)
    r.set(head, kept[-1][1][b"h"])


def _lost_metric(c: httpx.Client, name: str) -> float:
    text = c.get("/metrics").text
    m = re.search(rf'learnserve_log_entries_lost_total{{model="{name}"}} ([0-9.e+]+)', text)
    return float(m.group(1)) if m else 0.0


def _update(c: httpx.Client, name: str, x: list[float], y: int) -> httpx.Response:
    return c.post("/update", json={"model": name, "examples": [{"x": x, "y": y}]})


def _fresh_digest(settings: Settings, name: str) -> tuple[int, str]:
    with ServerThread(settings) as fresh, fresh.client() as c:
        d = c.get(f"/models/{name}").json()
        return d["version"], d["state_digest"]


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_target(request, tmp_path):
    """(settings, a plain client on the node holding the model "m"'s keys)."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        return Settings(redis_url=url, data_dir=str(tmp_path), checkpoint_every_updates=3), (
            redis.Redis.from_url(url)
        )
    from tests.service.test_store_redis_cluster import node_of

    cluster = request.getfixturevalue("redis_cluster")
    url = request.getfixturevalue("redis_cluster_url")
    node = node_of(cluster, "m")
    settings = Settings(
        redis_url=url, redis_cluster=True, data_dir=str(tmp_path), checkpoint_every_updates=3
    )
    return settings, redis.Redis(host="127.0.0.1", port=node.port)


def test_worker_notices_a_lost_tail_at_its_next_update(redis_target):
    settings, r = redis_target
    with ServerThread(settings) as srv, srv.client() as c:
        assert c.put("/models/m", json=dense_model(4, "pa")).status_code == 201
        for i in range(5):
            r_ = _update(c, "m", [1.0, i, -1.0, 0.5], 1 if i % 2 else -1)
            assert r_.json()["version"] == i + 1
        lost_before = _lost_metric(c, "m")  # the counter is per process (other tests)
        _lose_last_entry(r, "m")
        # The store hands position 5 out again, for another entry.
        resp = _update(c, "m", [-3.0, 2.0, 0.0, 1.0], 1)
        assert resp.status_code == 200 and resp.json()["version"] == 5
        served = c.get("/models/m").json()
        assert _lost_metric(c, "m") - lost_before == 1.0
    # The running worker holds exactly what a worker started from the store holds.
    assert _fresh_digest(settings, "m") == (5, served["state_digest"])


def test_worker_notices_a_lost_tail_without_new_updates(redis_server, redis_url, tmp_path):
    # Found by the apply-loop's reconciliation (every reconcile_seconds).
    settings = Settings(redis_url=redis_url, data_dir=str(tmp_path), reconcile_seconds=0.2)
    r = redis.Redis.from_url(redis_url)
    with ServerThread(settings) as srv, srv.client() as c:
        assert c.put("/models/q", json=dense_model(3, "arow")).status_code == 201
        for i in range(4):
            assert _update(c, "q", [float(i), 1.0, -2.0], i % 2).json()["version"] == i + 1
        assert c.get("/models/q").json()["version"] == 4
        lost_before = _lost_metric(c, "q")
        _lose_last_entry(r, "q")
        deadline = time.monotonic() + 20
        while c.get("/models/q").json()["version"] != 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        served = c.get("/models/q").json()
        assert served["version"] == 3
        assert _lost_metric(c, "q") - lost_before == 1.0
        # ... and goes on learning from the log as the store holds it.
        assert _update(c, "q", [0.5, 0.5, 0.5], 1).json()["version"] == 4
        served = c.get("/models/q").json()
    assert _fresh_digest(settings, "q") == (4, served["state_digest"])


# ------------------------------------------------------------------ checkpoint lease
def test_lease_one_holder_at_a_time(store_factory) -> None:
    async def check(store) -> None:
        assert not await store.try_lease("m", "checkpoint", "a", 5.0)  # no such model
        await store.create_model("m", {"kind": "linear"})
        assert await store.try_lease("m", "checkpoint", "a", 0.3)
        assert not await store.try_lease("m", "checkpoint", "b", 5.0)
        assert await store.try_lease("m", "checkpoint", "a", 0.3)  # renewed
        await asyncio.sleep(0.5)
        assert await store.try_lease("m", "checkpoint", "b", 5.0)  # a's ran out
        assert not await store.try_lease("m", "checkpoint", "a", 5.0)
        await store.delete_model("m")  # deleted with the model
        await store.create_model("m", {"kind": "linear"})
        assert await store.try_lease("m", "checkpoint", "a", 5.0)

    _run(store_factory, check)


def test_one_checkpoint_writer_per_model(tmp_path) -> None:
    """Two workers apply the same log; only the lease holder writes its checkpoints."""
    from service.models.kinds import adapter_class
    from tests.service.test_review_fixes import BODY, payload, two_workers

    async def main() -> None:
        a, b, s1, s2 = await two_workers(tmp_path, checkpoint_every_updates=3)
        try:
            cls = adapter_class("linear")
            config = cls.normalize_config(BODY, a.settings)
            ha, _ = await a.create("m", cls, config)
            hb, _ = await b.create("m", cls, config)
            for i in range(12):
                await (a if i % 2 else b).submit_update(ha if i % 2 else hb, payload(i))
                await a.catch_up(ha)
                await b.catch_up(hb)
                await a.checkpoint(ha)
                await b.checkpoint(hb)
            written = [h.checkpoint_position for h in (ha, hb)]
            assert sorted(written)[0] == 0 and sorted(written)[1] >= 9, written
            cp = await s1.get_checkpoint("m")
            assert cp is not None and cp.position == max(written)
        finally:
            await a.close()
            await b.close()
            await s1.close()
            await s2.close()

    asyncio.run(main())
