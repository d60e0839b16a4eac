"""A checkpoint the store refuses is tried again after a backoff (doubling, capped), not at
every update or tick; the failures show in the metrics and in the model's description.
Both stores, each failing for real: SQLite with its limit on one value lowered below the
checkpoint's size, Redis out of memory (``maxmemory`` 1 byte, no eviction)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from service.api.descriptions import describe
from service.engine.checkpoints import count_due
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.models.kinds import adapter_class
from service.settings import Settings
from service.store import open_store
from service.store.redis import RedisStore
from service.store.sqlite import SQLiteStore

BODY = {"algorithm": "pa", "features": {"kind": "sparse", "dim": 4096}}
BATCH = {"examples": [{"x": {"3": 1.0, "70": -2.0}, "y": "p"}, {"x": {"9": 1.5}, "y": "n"}]}


def sample(name: str, model: str) -> float:
    return REGISTRY.get_sample_value(name, {"model": model}) or 0.0


async def break_store(reg: Engine, broken: bool) -> None:
    s = reg.store
    if isinstance(s, SQLiteStore):  # the checkpoint (~64 KB) is over the limit, appends not
        db = s._db
        assert db is not None
        await s._run(db.setlimit, sqlite3.SQLITE_LIMIT_LENGTH, 8000 if broken else 1_000_000_000)
    elif isinstance(s, RedisStore):
        await s.r.config_set("maxmemory-policy", "noeviction")
        await s.r.config_set("maxmemory", 1 if broken else 0)


def wait_over(h: ModelHandle) -> None:
    """As if the backoff's wait had passed (the clock is monotonic: move the deadlines)."""
    h.checkpoint_retry_at -= 1000
    h.next_time_checkpoint -= 1000


def scenario(tmp_path: Path, redis_url: str | None, model: str) -> Callable[[], Awaitable[None]]:
    async def main() -> None:
        settings = Settings(
            data_dir=str(tmp_path),
            redis_url=redis_url,
            checkpoint_every_updates=2,
            checkpoint_every_seconds=3600,
            checkpoint_retry_base_seconds=30,
            checkpoint_retry_max_seconds=100,
        )
        store = open_store(redis_url, tmp_path)
        await store.open()
        reg = Engine(store, settings)
        try:
            await reg.restore_all()
            cls = adapter_class("linear")
            h, _ = await reg.create(model, cls, cls.normalize_config(BODY, settings))
            payload, _ = h.adapter.parse_update(BATCH, settings)
            for _ in range(3):
                await reg.submit_update(h, payload)
                await asyncio.gather(*list(reg.tasks))
            assert h.checkpoint_position == 2  # checkpoints work while the store is fine
            assert (await describe(h))["checkpoint_backoff"] is None

            await break_store(reg, True)
            try:
                if isinstance(store, SQLiteStore):  # appends still work: count-triggered
                    await reg.submit_update(h, payload)
                else:  # appends fail too: the time-triggered one
                    h.next_time_checkpoint = 0.0
                    await reg.periodic()
                await asyncio.gather(*list(reg.tasks))
                assert h.checkpoint_failures == 1
                d = (await describe(h))["checkpoint_backoff"]
                assert d["failures"] == 1 and 25 < d["retry_in_seconds"] <= 30
                assert d["last_error"]
                assert sample("learnserve_checkpoint_failures_total", model) == 1
                assert sample("learnserve_checkpoint_backoff_seconds", model) == 30
                # Within the backoff: neither more updates nor ticks try again.
                if isinstance(store, SQLiteStore):
                    for _ in range(3):
                        await reg.submit_update(h, payload)
                h.next_time_checkpoint = 0.0
                for _ in range(3):
                    await reg.periodic()
                await asyncio.gather(*list(reg.tasks))
                assert not count_due(settings, h)
                assert h.checkpoint_failures == 1
                assert sample("learnserve_checkpoint_failures_total", model) == 1
                # Once it is over, the next tick tries again: 30 s, then 60, then 100 (cap).
                for n, delay in ((2, 60), (3, 100), (4, 100)):
                    wait_over(h)
                    await reg.periodic()
                    await asyncio.gather(*list(reg.tasks))
                    assert h.checkpoint_failures == n
                    assert sample("learnserve_checkpoint_backoff_seconds", model) == delay
                    assert delay - 5 < h.checkpoint_backoff()["retry_in_seconds"] <= delay  # type: ignore[index]
                assert sample("learnserve_checkpoint_failures_total", model) == 4
                assert h.checkpoint_position == 2
            finally:
                await break_store(reg, False)
            wait_over(h)
            await reg.periodic()
            await asyncio.gather(*list(reg.tasks))
            assert h.checkpoint_position == h.version and h.checkpoint_failures == 0
            assert (await describe(h))["checkpoint_backoff"] is None
            assert sample("learnserve_checkpoint_backoff_seconds", model) == 0
            cp = await store.get_checkpoint(model)
            assert cp is not None and cp.position == h.version
        finally:
            await reg.close()
            await store.close()

    return main


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_failing_checkpoint_backs_off(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("redis_url") if kind == "redis" else None
    asyncio.run(scenario(tmp_path, url, f"backoff-{kind}")())
