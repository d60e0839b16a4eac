"""RedisStore while Redis goes away and comes back, with the same store object.

Each test leaves the server running (the ``redis_url`` fixture would restart it anyway).
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from service.store import StoreUnavailable
from service.store.redis import RedisStore
from tests.service.procs import RedisServer

CFG = {"kind": "arow"}


async def _unavailable(what: str, coro: object) -> float:
    """Await ``coro``, require StoreUnavailable, return how long it took."""
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await coro  # type: ignore[misc]
    took = time.monotonic() - t0
    print(f"{what}: StoreUnavailable after {took:.3f}s")
    return took


def test_outage_raises_store_unavailable_then_recovers(
    redis_server: RedisServer, redis_url: str
) -> None:
    async def t() -> None:
        s = RedisStore(redis_url, socket_timeout=1.0, connect_timeout=1.0)
        await s.open()
        try:
            await s.create_model("m", CFG)
            acked = {await s.append("m", b"before-%d" % i): b"before-%d" % i for i in range(20)}
            assert await s.ping() is True

            redis_server.stop()
            assert await s.ping() is False
            await _unavailable("append", s.append("m", b"lost?"))
            await _unavailable("read_log", s.read_log("m", 0))
            await _unavailable("last_position", s.last_position("m"))
            await _unavailable("put_checkpoint", s.put_checkpoint("m", 1, b"x"))
            await _unavailable("wait_for_entries", s.wait_for_entries({"m": 20}, timeout=5))
            await _unavailable("catalog_epoch", s.catalog_epoch())

            redis_server.start()
            # The same object, no reconnect by the caller: dead pooled connections are
            # replaced on the next call.
            assert await s.ping() is True
            pos = await s.append("m", b"after")
            acked[pos] = b"after"
            log = await s.read_log("m", 0)
            got = {e.position: e.payload for e in log}
            # Every acknowledged entry is there, with its payload, positions contiguous.
            assert all(got.get(p) == b for p, b in acked.items())
            assert [e.position for e in log] == list(range(1, len(log) + 1))
            assert pos == len(log)
            # The blocking (XREAD) connection pool recovered too.
            await s.wait_for_entries({"m": pos - 1}, timeout=30)
        finally:
            await s.close()

    asyncio.run(t())


def test_entries_acknowledged_before_sigkill_survive(
    redis_server: RedisServer, redis_url: str
) -> None:
    """SIGKILL of Redis alone: whatever was acknowledged comes back from the AOF.

    Under ``appendfsync always`` (set here) Redis writes the AOF before it replies. Under
    ``everysec`` it usually does too, but not always: while the previous second's fsync
    is still running (a busy disk, as when the tests run two at a time), Redis postpones
    the write for up to 2 s and replies anyway, and a SIGKILL then loses those entries
    (Redis's documented trade-off; WAITAOF, tests/service/test_redis_durable_acks.py,
    is how a deployment on ``everysec`` gets the guarantee)."""

    async def write() -> dict[int, bytes]:
        admin = aioredis.from_url(redis_url)
        await admin.config_set("appendfsync", "always")  # (the restart resets it)
        await admin.aclose()
        s = RedisStore(redis_url)
        await s.open()
        try:
            await s.create_model("m", CFG)
            payloads = [b"p%d" % i for i in range(300)]
            positions = await asyncio.gather(*(s.append("m", p) for p in payloads))
            await s.put_checkpoint("m", 150, b"state")
            return dict(zip(positions, payloads, strict=True))
        finally:
            await s.close()

    acked = asyncio.run(write())
    redis_server.kill()
    redis_server.start()

    async def read() -> None:
        s = RedisStore(redis_url)
        await s.open()
        try:
            log = await s.read_log("m", 0, limit=1000)
            assert {e.position: e.payload for e in log} == acked
            assert await s.last_position("m") == 300
            ckpt = await s.get_checkpoint("m")
            assert ckpt is not None and ckpt.position == 150
        finally:
            await s.close()

    asyncio.run(read())


def test_open_while_redis_is_down(redis_server: RedisServer, redis_url: str) -> None:
    """The service may start before Redis: open() succeeds, calls fail until Redis is up."""

    async def t() -> None:
        redis_server.stop()
        s = RedisStore(redis_url, connect_timeout=0.5, waitaof=True)
        await s.open()
        try:
            assert await s.ping() is False
            assert s.server_version is None  # unknown until Redis answers
            await _unavailable("create_model", s.create_model("m", CFG))
            redis_server.start()
            assert await s.ping() is True
            assert await s.create_model("m", CFG) is True
            assert await s.append("m", b"x") == 1
            assert s.server_version is not None  # learnt at the first append
            assert s.waitaof == (s.server_version >= (7, 2))
        finally:
            await s.close()

    asyncio.run(t())


def test_waitaof_is_used_only_when_the_server_has_it(redis_url: str) -> None:
    async def t() -> None:
        s = RedisStore(redis_url, waitaof=True)
        await s.open()
        try:
            assert s.server_version is not None
            assert s.waitaof == (s.server_version >= (7, 2))
            await s.create_model("m", CFG)
            assert [await s.append("m", b"x") for _ in range(3)] == [1, 2, 3]
        finally:
            await s.close()

    asyncio.run(t())


def test_append_is_not_acknowledged_when_waitaof_cannot_confirm(redis_url: str) -> None:
    """Forces the WAITAOF path. On a server without WAITAOF (< 7.2) the command fails,
    so the append must not be acknowledged: StoreUnavailable, although the entry was
    written (an unconfirmed write is reported as such, never as durable)."""

    async def t() -> None:
        s = RedisStore(redis_url)
        await s.open()
        try:
            assert s.server_version is not None
            if s.server_version >= (7, 2):
                pytest.skip("server has WAITAOF; the failure path needs an older Redis")
            await s.create_model("m", CFG)
            s.waitaof = True
            with pytest.raises(StoreUnavailable, match="WAITAOF"):
                await s.append("m", b"x")
            s.waitaof = False
            assert [e.payload for e in await s.read_log("m", 0)] == [b"x"]
        finally:
            await s.close()

    asyncio.run(t())
