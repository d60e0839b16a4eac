"""Store contract, both stores: the outcome of a keyed entry that could not be applied
(``record_outcome`` by position, ``get_outcome`` by key) lives and dies with the key."""

from __future__ import annotations

import asyncio

from service.store import Store
from service.store.redis import RedisStore, _keys
from tests.service import test_store_contract as contract
from tests.service.test_store_contract import CFG, Backend

backend = contract.backend  # the contract suite's fixture: SQLite and a real redis-server

DAY = 86400.0


def test_outcome_recorded_by_position_answered_by_key(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        gen = await s.get_generation("m")
        assert await s.append_once("m", b"p1", "k1", "h1", 3, DAY) == (1, 3, False)
        assert await s.append("m", b"plain") == 2
        assert await s.append_once("m", b"p3", "k3", "h3", 1, DAY) == (3, 1, False)
        assert await s.get_outcome("m", "k1") is None  # not failed (yet)
        assert await s.record_outcome("m", 2, "no key here") is False
        assert await s.record_outcome("m", 1, "first", gen) is True
        assert await s.record_outcome("m", 1, "second") is False  # the first one stays
        assert await s.record_outcome("m", 1, "stale", "another-generation") is False
        assert await s.record_outcome("m", 9, "no such entry") is False
        assert await s.record_outcome("ghost", 1, "no model") is False
        assert await s.get_outcome("m", "k1") == "first"
        assert await s.get_outcome("m", "k3") is None
        assert await s.get_outcome("m", "nope") is None
        # Opaque text, any characters.
        text = '{"message": "x[\\"17\\"]: caf\u00e9 \u2603 %d %s"}'
        assert await s.record_outcome("m", 3, text) is True
        assert await s.get_outcome("m", "k3") == text
        # A replay of the key itself is unchanged.
        assert await s.append_once("m", b"p1", "k1", "h1", 3, DAY) == (1, 3, True)

    backend.run(t)


def test_outcome_survives_restart(backend: Backend) -> None:
    async def write(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.append_once("m", b"p", "k", "h", 4, DAY)
        assert await s.record_outcome("m", 1, "failed")

    async def read(s: Store) -> None:
        assert await s.get_outcome("m", "k") == "failed"

    backend.run(write)
    backend.restart()
    backend.run(read)


def test_outcome_goes_with_the_key(backend: Backend) -> None:
    """Expired or deleted keys take their outcomes along; a new model never sees them."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.append_once("m", b"p", "short", "h", 1, 0.3)
        await s.append_once("m", b"q", "long", "h", 1, DAY)
        assert await s.record_outcome("m", 1, "failed short")
        assert await s.record_outcome("m", 2, "failed long")
        await asyncio.sleep(0.6)
        assert await s.get_outcome("m", "short") is None
        assert await s.record_outcome("m", 1, "too late") is False
        # The key, new again, appends a new entry with no outcome.
        assert await s.append_once("m", b"p", "short", "h", 1, DAY) == (3, 1, False)
        assert await s.get_outcome("m", "short") is None
        assert await s.record_outcome("m", 1, "old position") is False
        assert await s.get_outcome("m", "long") == "failed long"
        if isinstance(s, RedisStore):  # the expired record's index entry was swept
            k = _keys("m")
            assert await s.r.hgetall(k["idempos"]) == {b"2": b"long", b"3": b"short"}
            assert await s.r.hkeys(k["idemout"]) == [b"long"]
            assert 0 < await s.r.pttl(k["idemout"]) <= DAY * 1000
        old = await s.get_generation("m")
        await s.delete_model("m")
        await s.create_model("m", CFG)
        assert await s.get_outcome("m", "long") is None
        await s.append_once("m", b"x", "k", "h", 1, DAY)
        assert await s.record_outcome("m", 1, "stale worker", old) is False
        assert await s.get_outcome("m", "k") is None
        if isinstance(s, RedisStore):
            await s.delete_model("m")
            k = _keys("m")
            assert await s.r.exists(k["idempos"], k["idemout"]) == 0

    backend.run(t)


def test_outcome_is_atomic_across_store_instances(backend: Backend) -> None:
    """Workers racing to record one entry's outcome: exactly one write lands."""
    n = 3

    async def t(s1: Store) -> None:
        others = [backend.new() for _ in range(n)]
        for o in others:
            await o.open()
        try:
            await s1.create_model("m", CFG)
            await s1.append_once("m", b"p", "k", "h", 1, DAY)
            res = await asyncio.gather(
                *(o.record_outcome("m", 1, f"w{i}") for i, o in enumerate([s1, *others]))
            )
            assert sorted(res) == [False] * n + [True]
            winner = next(f"w{i}" for i, r in enumerate(res) if r)
            assert {await o.get_outcome("m", "k") for o in others} == {winner}
        finally:
            for o in others:
                await o.close()

    backend.run(t)
