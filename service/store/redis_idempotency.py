"""The Redis store's idempotency keys: ``append_once`` and the outcomes of keyed entries.

The keys ``idem``, ``idemexp``, ``idempos`` and ``idemout`` of the model (layout: see
:mod:`service.store.redis`); each script checks the key's expiry and generation.
"""

from __future__ import annotations

from typing import Any

from service.store import redis_scripts as scripts
from service.store.base import (
    IdempotencyKeyReused,
    ModelNotFound,
    check_payload,
    check_ttl,
    payload_digest,
)
from service.store.redis_keys import _keys, _text
from service.store.redis_log import RedisLog
from service.store.redis_wakes import wake_key


def parse_key_record(rec: Any) -> tuple[int, int, str]:
    """``(position, n, payload_hash)`` of an idem record "<pos> <n> <hash> <gen>"."""
    pos, n, payload_hash = _text(rec).split(" ", 3)[:3]
    return int(pos), int(n), payload_hash


def replayed_key(rec: Any, name: str, key: str, payload_hash: str) -> tuple[int, int]:
    """The recorded ``(position, n)`` of a key sent again, if with the same payload."""
    pos, n, recorded_hash = parse_key_record(rec)
    if recorded_hash != payload_hash:
        raise IdempotencyKeyReused(
            f"idempotency key {key!r} was used for model {name!r} with another payload"
        )
    return pos, n


class RedisIdempotency(RedisLog):
    async def append_once(
        self, name: str, payload: bytes, key: str, payload_hash: str, n: int, ttl_seconds: float
    ) -> tuple[int, int, bool]:
        """One script (check the key, append, record the key), on its own round trip:
        keyed appends are not group-committed, so ``append`` stays as it was."""
        check_payload(payload)
        check_ttl(ttl_seconds)
        if " " in payload_hash or not payload_hash:
            raise ValueError("payload_hash must be a non-empty string without spaces")
        await self._ready_to_append()
        k = _keys(name)
        keys = [k["config"], k["seq"], k["log"], k["idem"], k["idemexp"], k["gen"]]
        keys += [k["idempos"], k["idemout"], k["head"]]
        args: list[Any] = [
            bytes(payload),
            key,
            payload_hash,
            int(n),
            max(1, int(ttl_seconds * 1000)),
            payload_digest(payload),
        ]
        if self.wake_in_script:
            keys.append(wake_key(name))
            args += [name, self.wakes.token]

        res = await self._eval_acked(scripts.APPEND_ONCE, keys, args)
        if int(res[0]) == -1:
            raise ModelNotFound(name)
        if int(res[0]) == 1:
            if not self.wake_in_script:
                self.wakes.publish(self.r, {name: int(res[1])})
            return int(res[1]), int(n), False
        pos, rn = replayed_key(res[1], name, key, payload_hash)
        return pos, rn, True

    async def record_outcome(
        self, name: str, position: int, outcome: str, generation: str | None = None
    ) -> bool:
        k = _keys(name)
        keys = [k["config"], k["gen"], k["idem"], k["idemexp"], k["idempos"], k["idemout"]]
        args: list[Any] = [int(position), outcome]
        if generation is not None:
            args.append(generation)
        return bool(await self._script(scripts.RECORD_OUTCOME, keys, args) == 1)

    async def key_recorded(self, name: str, key: str) -> bool:
        return await self.key_entry(name, key) is not None

    async def key_entry(self, name: str, key: str) -> tuple[int, int, str] | None:
        k = _keys(name)
        keys = [k["idem"], k["idemexp"], k["gen"]]
        rec = await self._script(scripts.KEY_RECORD, keys, [key])
        return None if not rec else parse_key_record(rec)

    async def get_outcome(self, name: str, key: str) -> str | None:
        k = _keys(name)
        keys = [k["idem"], k["idemexp"], k["gen"], k["idemout"]]
        out = await self._script(scripts.GET_OUTCOME, keys, [key])
        return None if out is None else out.decode() if isinstance(out, bytes) else str(out)
