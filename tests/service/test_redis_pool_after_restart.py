"""After Redis restarts, the store's pooled connections do not fail requests one by one.

Every connection of redis-py's pool that was idle across the restart is dead, and the
pool's check at checkout does not see it: each used to fail the one call that next
checked it out (``store_unavailable`` on a request long after Redis was back: the CI
failure of the dashboards test). After a lost connection the store now closes the idle
ones, which connect afresh on their next use.
"""

from __future__ import annotations

import asyncio

from service.store.base import StoreUnavailable
from service.store.redis import RedisStore
from tests.service.procs import RedisServer


def test_no_stale_connection_fails_a_call_after_a_restart(
    redis_server: RedisServer, redis_url: str
) -> None:
    async def run() -> list[list[object]]:
        store = RedisStore(redis_url)
        await store.open()

        async def call() -> object:
            try:
                return await store.create_model("m", {"kind": "linear", "algorithm": "pa"})
            except StoreUnavailable:
                return "unavailable"

        rounds = [await asyncio.gather(*[call() for _ in range(12)])]  # 12 pooled connections
        redis_server.stop()
        try:
            rounds.append(await asyncio.gather(*[call() for _ in range(2)]))  # Redis is down
        finally:
            redis_server.start()
        rounds.append(await asyncio.gather(*[call() for _ in range(12)]))
        await store.close()
        return rounds

    before, down, after = asyncio.run(run())
    assert set(before) <= {True, False} and before.count(True) == 1  # created once
    assert down == ["unavailable", "unavailable"]
    assert after == [False] * 12  # the model exists (AOF); no call failed
