"""Count-triggered checkpoints, and ``checkpoint_min_interval_seconds`` spacing them out
(the periodic tick takes the held-back one once the interval has passed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from service.engine.facade import Engine
from service.models.kinds import adapter_class
from service.settings import Settings
from service.store import open_store

BODY = {"algorithm": "arow", "features": {"kind": "dense", "dim": 3}}
BATCH = {"examples": [{"x": [1, 2, 3], "y": "p"}, {"x": [-1, 0, 2], "y": "n"}]}


async def run(tmp_path: Path, min_interval: float, updates: int) -> tuple[Engine, list[int]]:
    settings = Settings(
        data_dir=str(tmp_path),
        checkpoint_every_updates=2,
        checkpoint_every_seconds=3600,
        checkpoint_min_interval_seconds=min_interval,
    )
    store = open_store(None, tmp_path)
    await store.open()
    reg = Engine(store, settings)
    await reg.restore_all()
    cls = adapter_class("linear")
    h, _ = await reg.create("m", cls, cls.normalize_config(BODY, settings))
    payload, _ = h.adapter.parse_update(BATCH, settings)
    positions = []
    for _ in range(updates):
        await reg.submit_update(h, payload)
        await asyncio.gather(*list(reg.tasks))  # let a spawned checkpoint finish
        positions.append(h.checkpoint_position)
    return reg, positions


def test_every_n_updates_without_a_minimum_interval(tmp_path: Path) -> None:
    async def main() -> None:
        reg, positions = await run(tmp_path, 0.0, 6)
        try:
            assert positions == [0, 2, 2, 4, 4, 6]
        finally:
            await reg.close()
            await reg.store.close()

    asyncio.run(main())


def test_minimum_interval_holds_back_then_the_tick_takes_it(tmp_path: Path) -> None:
    async def main() -> None:
        reg, positions = await run(tmp_path, 3600.0, 6)
        try:
            # the first is taken at once; the next ones wait for the interval
            assert positions == [0, 2, 2, 2, 2, 2]
            h = reg.get("m")
            await reg.periodic()  # within the interval: still held back
            await asyncio.gather(*list(reg.tasks))
            assert h.checkpoint_position == 2
            h.checkpoint_done -= 3600.0  # as if the interval had passed
            await reg.periodic()  # the tick writes the held-back one
            await asyncio.gather(*list(reg.tasks))
            assert h.checkpoint_position == 6
        finally:
            await reg.close()
            await reg.store.close()

    asyncio.run(main())
