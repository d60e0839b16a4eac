"""The store's rules between leaders and followers (``Store.create_follower``), on
SQLiteStore and RedisStore (a real redis-server). On a Redis Cluster a leader's and a
follower's keys live in two slots: the rules are the service's checks there, not the
store's, and these tests are skipped."""

from __future__ import annotations

from typing import Any

import pytest

from service.store import ModelNotFound, Store
from service.store.base import LeaderGone, ModelInUse, NotAFollower
from tests.service.test_store_contract import CFG, Backend, backend  # noqa: F401


def follower(lead: str, start: int) -> dict[str, Any]:
    return {**CFG, "follows": {"model": lead, "from_version": start}}


def atomic(backend: Backend) -> Backend:  # noqa: F811
    if backend.kind == "redis-cluster":
        pytest.skip("two slots: the service's checks, not the store's")
    return backend


def test_a_follower_is_created_only_with_its_leader(backend: Backend) -> None:  # noqa: F811
    async def fn(s: Store) -> None:
        with pytest.raises(LeaderGone):
            await s.create_follower("f", follower("lead", 0), "")
        assert await s.get_config("f") is None
        await s.create_model("lead", CFG)
        gen = await s.get_generation("lead") or ""
        with pytest.raises(LeaderGone):  # another generation: deleted and created again
            await s.create_follower("f", follower("lead", 0), "0" * 16)
        assert await s.create_follower("f", follower("lead", 0), gen)
        assert not await s.create_follower("f", follower("lead", 0), gen)  # the same
        with pytest.raises(ModelInUse) as e:
            await s.delete_model("lead")
        assert (e.value.reason, e.value.others) == ("has_followers", ["f"])
        assert await s.get_config("lead") == CFG
        assert await s.delete_model("f")
        assert await s.delete_model("lead")

    atomic(backend).run(fn)


def test_a_follower_from_a_trimmed_position_is_refused(backend: Backend) -> None:  # noqa: F811
    async def fn(s: Store) -> None:
        await s.create_model("lead", CFG)
        gen = await s.get_generation("lead") or ""
        for i in range(5):
            await s.append("lead", b"e%d" % i)
        await s.trim_log("lead", 3)
        with pytest.raises(LeaderGone) as e:
            await s.create_follower("f", follower("lead", 1), gen)
        assert e.value.trimmed
        assert await s.create_follower("f", follower("lead", 3), gen)

    atomic(backend).run(fn)


def test_a_promoted_follower_is_not_deleted(backend: Backend) -> None:  # noqa: F811
    async def fn(s: Store) -> None:
        await s.create_model("lead", CFG)
        gen = await s.get_generation("lead") or ""
        await s.create_follower("f", follower("lead", 0), gen)
        with pytest.raises(NotAFollower):
            await s.append_serving("lead", b"promote g", "g")
        assert await s.last_position("lead") == 0  # nothing appended
        pos, head = await s.append_serving("lead", b"promote f", "f")
        assert pos == 1 and head
        assert [e.payload for e in await s.read_log("lead", 0)] == [b"promote f"]
        with pytest.raises(ModelInUse) as e:
            await s.delete_model("f")
        assert (e.value.reason, e.value.others) == ("promoted", ["lead"])
        assert (await s.append_serving("lead", b"demote", None))[0] == 2
        assert await s.delete_model("f")
        with pytest.raises(NotAFollower):  # deleted: never promoted after
            await s.append_serving("lead", b"promote f", "f")
        with pytest.raises(ModelNotFound):
            await s.append_serving("nobody", b"demote", None)

    atomic(backend).run(fn)


def test_a_trim_keeps_what_a_follower_needs(backend: Backend) -> None:  # noqa: F811
    async def fn(s: Store) -> None:
        await s.create_model("lead", CFG)
        gen = await s.get_generation("lead") or ""
        for i in range(4):
            await s.append("lead", b"e%d" % i)
        await s.create_follower("f", follower("lead", 4), gen)
        await s.create_follower("g", follower("lead", 2), gen)
        for i in range(6):
            await s.append("lead", b"e%d" % (4 + i))
        await s.trim_log("lead", 8)  # g needs 3 on: nothing past 2 goes
        assert (await s.read_log("lead", 0, 1))[0].position == 3
        await s.put_checkpoint("g", 7, b"state")
        await s.trim_log("lead", 8)  # f needs 5 on now (g: 8 on)
        assert (await s.read_log("lead", 0, 1))[0].position == 5
        await s.put_checkpoint("f", 9, b"state")
        await s.trim_log("lead", 8)
        assert (await s.read_log("lead", 0, 1))[0].position == 8
        assert await s.delete_model("g") and await s.delete_model("f")
        await s.trim_log("lead", 9)
        assert (await s.read_log("lead", 0, 1))[0].position == 10

    atomic(backend).run(fn)
