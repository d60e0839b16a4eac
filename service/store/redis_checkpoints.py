"""The Redis store's checkpoints (written in chunks) and leases.

The keys ``ckpt``, ``ckptdata`` and ``lease:<purpose>`` of the model (layout: see
:mod:`service.store.redis`). A checkpoint's chunks are written first, one command
each, under a token of the write; then one script (CKPT) switches ``ckpt`` to them
and drops the replaced ones.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import time
from typing import Any

from service.store import redis_scripts as scripts
from service.store.base import Checkpoint, LogDiverged, StoreUnavailable
from service.store.redis_connection import RedisConnection
from service.store.redis_keys import _check_size, _keys

_CKPT_CHUNK = 1 << 20  # bytes per checkpoint chunk: one HSET each, so no single command
# holds Redis for more than ~1 ms (a 16 MB value in one command held it for tens of ms)


def _chunks(data: memoryview) -> list[memoryview]:
    return [data[o : o + _CKPT_CHUNK] for o in range(0, data.nbytes, _CKPT_CHUNK)]


class RedisCheckpoints(RedisConnection):
    # ------------------------------------------------------------------ leases
    async def try_lease(self, name: str, purpose: str, holder: str, ttl_seconds: float) -> bool:
        k = _keys(name)
        lease = k.get(f"lease:{purpose}")
        if lease is None:
            raise ValueError(f"unknown lease purpose {purpose!r}")
        ttl = max(1, int(ttl_seconds * 1000))
        return await self._script(scripts.LEASE, [k["config"], lease], [holder, ttl]) == 1

    # ------------------------------------------------------------------ checkpoints
    async def put_checkpoint(
        self,
        name: str,
        position: int,
        blob: bytes | memoryview,
        generation: str | None = None,
        head: str | None = None,
    ) -> None:
        # A flat byte view, never a bytes() copy: this runs on the event loop, and a
        # 16 MB copy there is a 16 MB stall. redis-py writes a memoryview argument to
        # the socket as it is (its own chunk of the command, not joined).
        data = memoryview(blob).cast("B")
        _check_size("checkpoint", data)
        k = _keys(name)
        # Chunks first, one command each (other clients' commands run in between), under
        # a token of this write; then one script switches the checkpoint to them.
        token = f"{int(position)}.{secrets.token_hex(6)}"
        chunks = _chunks(data)
        try:
            await self._put_chunks(k["ckptdata"], token, chunks)
            args: list[Any] = [
                int(position),
                token,
                len(chunks),
                repr(time.time()),
                generation or "",
                head or "",
            ]
            keys = [k["config"], k["ckpt"], k["gen"], k["ckptdata"], k["seq"], k["log"], k["head"]]
            switched = await self._script(scripts.CKPT, keys, args)
        except BaseException:
            await self._drop_chunks(k["ckptdata"], token, len(chunks))
            raise
        if switched != 1:  # older, deleted, re-created: nothing refers to the chunks
            await self._drop_chunks(k["ckptdata"], token, len(chunks))
        if switched == -4:
            raise LogDiverged(
                f"model {name!r}: the log does not hold head {head} at position {position}"
            )

    async def _drop_chunks(self, key: str, token: str, n: int) -> None:
        if n:
            with contextlib.suppress(Exception):  # best effort: the next switch sweeps them
                await self.r.hdel(key, *(f"{token}:{i}" for i in range(n)))

    async def get_checkpoint(self, name: str) -> Checkpoint | None:
        k = _keys(name)
        # A read fails only if a switch lands between its two commands; checkpoints of
        # one model are seconds apart, so a handful of tries is plenty.
        for _ in range(50):
            h: Any = await self._call(lambda: self.r.hgetall(k["ckpt"]))
            if not h:
                return None
            if b"blob" in h:  # written whole, by an earlier learnserve
                return Checkpoint(int(h[b"position"]), bytes(h[b"blob"]), float(h[b"created_at"]))
            token, n = h[b"token"].decode(), int(h[b"chunks"])
            fields = [f"{token}:{i}" for i in range(n)]
            parts: Any = []
            if n:
                parts = await self._call(functools.partial(self.r.hmget, k["ckptdata"], fields))
            if all(p is not None for p in parts):
                blob = b"".join(parts)
                return Checkpoint(int(h[b"position"]), blob, float(h[b"created_at"]))
            # a newer checkpoint was switched in between the two reads: read again
        raise StoreUnavailable(f"redis {self._where()}: checkpoint of {name!r} kept changing")

    async def _put_chunks(self, key: str, token: str, chunks: list[memoryview]) -> None:
        """One HSET per chunk, field ``<token>:<i>``: other clients' commands run in between."""
        for i, chunk in enumerate(chunks):
            await self._call(functools.partial(self.r.hset, key, f"{token}:{i}", chunk))
