"""RedisStore writes a checkpoint as 1 MB chunks, then switches to them in one script:
no single command carries the whole state (which held Redis for tens of ms per
16 MB), and the chunks of replaced, refused or abandoned writes do not pile up."""

from __future__ import annotations

import asyncio

import numpy as np

from service.store.redis import RedisStore, _keys

CFG = {"kind": "arow"}
MB = 1 << 20


def run(redis_url: str, fn) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        s = RedisStore(redis_url)
        await s.open()
        try:
            await fn(s)
        finally:
            await s.close()

    asyncio.run(main())


def blob(seed: int, size: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def test_chunks_round_trip_and_only_the_current_ones_remain(redis_url: str) -> None:
    async def t(s: RedisStore) -> None:
        await s.create_model("m", CFG)
        k = _keys("m")
        for pos, size in ((3, 3 * MB + 5), (4, MB), (5, 0), (9, 2 * MB)):
            data = blob(pos, size)
            await s.put_checkpoint("m", pos, memoryview(data))
            c = await s.get_checkpoint("m")
            assert c is not None and (c.position, c.blob) == (pos, data)
            fields = await s.r.hkeys(k["ckptdata"])
            assert len(fields) == -(-size // MB), fields  # just this checkpoint's chunks
        # refused writes (older position, another generation) leave nothing behind
        await s.put_checkpoint("m", 2, blob(2, 2 * MB))
        await s.put_checkpoint("m", 12, blob(12, 2 * MB), generation="not-this-one")
        assert len(await s.r.hkeys(k["ckptdata"])) == 2
        c = await s.get_checkpoint("m")
        assert c is not None and c.position == 9
        assert await s.delete_model("m")
        assert await s.r.exists(k["ckptdata"]) == 0

    run(redis_url, t)


def test_a_dead_writers_chunks_are_swept_by_the_next_switch(redis_url: str) -> None:
    async def t(s: RedisStore) -> None:
        await s.create_model("m", CFG)
        k = _keys("m")
        # a worker wrote chunks for position 4 and died before switching to them
        await s.r.hset(k["ckptdata"], mapping={"4.deadbeef:0": b"x", "4.deadbeef:1": b"y"})
        await s.put_checkpoint("m", 6, blob(6, MB + 1))
        fields = sorted(f.decode() for f in await s.r.hkeys(k["ckptdata"]))
        assert len(fields) == 2 and all(f.startswith("6.") for f in fields), fields

    run(redis_url, t)


def test_a_checkpoint_written_whole_by_an_earlier_version_is_read_then_replaced(
    redis_url: str,
) -> None:
    async def t(s: RedisStore) -> None:
        await s.create_model("m", CFG)
        k = _keys("m")
        await s.r.hset(k["ckpt"], mapping={"position": 3, "blob": b"old", "created_at": 1.0})
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (3, b"old")
        await s.put_checkpoint("m", 5, b"new state")
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (5, b"new state")
        assert await s.r.hget(k["ckpt"], "blob") is None

    run(redis_url, t)


def test_readers_during_switches_get_whole_checkpoints(redis_url: str) -> None:
    async def t(s: RedisStore) -> None:
        await s.create_model("m", CFG)
        datas = {p: blob(p, 2 * MB + p) for p in range(1, 9)}

        async def writer() -> None:
            for p, d in datas.items():
                await s.put_checkpoint("m", p, d)

        async def reader() -> list[tuple[int, bool]]:
            seen = []
            for _ in range(30):
                c = await s.get_checkpoint("m")
                if c is not None:
                    seen.append((c.position, c.blob == datas[c.position]))
                await asyncio.sleep(0)
            return seen

        _, seen = await asyncio.gather(writer(), reader())
        assert seen and all(ok for _, ok in seen), seen  # never a torn or mixed blob

    run(redis_url, t)
