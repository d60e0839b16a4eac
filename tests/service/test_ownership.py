"""Shards, rendezvous owners and heartbeat leases (service.fleet.ownership,
service.fleet.membership)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from service.fleet.membership import RedisMembership, SQLiteMembership
from service.fleet.ownership import SHARDS, OwnershipView, shard_of, stable_hash

NAMES = [f"model-{i}" for i in range(2000)]


def test_stable_hash_is_fixed_across_processes() -> None:
    # A fixed value: Python's hash() would differ per process (PYTHONHASHSEED).
    import hashlib

    want = int.from_bytes(hashlib.blake2b(b"clicks", digest_size=8).digest(), "big")
    assert stable_hash("clicks") == want
    assert all(0 <= shard_of(n) < SHARDS for n in NAMES)
    assert len({shard_of(n) for n in NAMES}) > SHARDS // 2  # spread over the shards


def test_r_distinct_owners_spread_evenly() -> None:
    members = [f"m{i}" for i in range(4)]
    view = OwnershipView(members, 2)
    load = dict.fromkeys(members, 0)
    for n in NAMES:
        owners = view.owners(n)
        assert len(set(owners)) == 2
        for m in owners:
            load[m] += 1
    assert sum(load.values()) == 2 * len(NAMES)
    assert all(700 < v < 1300 for v in load.values()), load  # ~1000 each


def test_a_leaving_member_moves_only_its_own_models() -> None:
    members = [f"m{i}" for i in range(5)]
    before = OwnershipView(members, 2)
    after = OwnershipView(members[:-1], 2)
    for n in NAMES:
        kept = set(before.owners(n)) - {"m4"}
        assert kept <= set(after.owners(n))  # survivors keep what they owned
        if "m4" not in before.owners(n):
            assert before.owners(n) == after.owners(n)


def test_sqlite_leases_expire(tmp_path: Path) -> None:
    async def main() -> None:
        a, b = SQLiteMembership(tmp_path / "db"), SQLiteMembership(tmp_path / "db")
        assert await a.renew("a", 0.4) == ("a",)
        assert await b.renew("b", 0.4) == ("a", "b")
        deadline = time.monotonic() + 10
        while await b.renew("b", 0.4) != ("b",):  # a stopped renewing
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        await b.leave("b")
        assert await a.renew("a", 5) == ("a",)
        await a.close()
        await b.close()

    asyncio.run(main())


def test_redis_leases_expire_and_leave(redis_url: str) -> None:
    import redis.asyncio as aioredis

    async def main() -> None:
        client = aioredis.from_url(redis_url)
        m = RedisMembership(client)
        assert await m.renew("x", 0.4) == ("x",)
        assert await m.renew("y", 5) == ("x", "y")
        deadline = time.monotonic() + 10
        while await m.renew("y", 5) != ("y",):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        await m.leave("y")
        assert await client.zcard("ls:{members}:leases") == 0
        await client.aclose()

    asyncio.run(main())
