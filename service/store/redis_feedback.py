"""Delayed labels on Redis: ``Store.put_feedback`` / ``get_feedback`` /
``append_labelled`` of :class:`service.store.redis.RedisStore` (and so of
``RedisClusterStore``: every key is under the model's ``{name}`` hash tag) call these.

Keys (beside the model's others, removed with them by ``delete_model``)::

    ls:{NAME}:fb      hash  id -> "<generation>\\n<record>" until the id is labelled
    ls:{NAME}:fbexp   zset  id, scored by its expiry (ms, Redis TIME)
    ls:{NAME}:fblab   hash  id -> "<generation> <position> <mark>" once labelled

Expiry is the zset's score, checked by every script (a label moves its id's score to
``keep_seconds`` from the label when that is later: the mark outlives the prediction);
expired ids are dropped by the next ``put_feedback`` (a few more than it adds), and the
three keys expire with the last id to expire, so a model that stops predicting with
ids leaves nothing behind.
"""

from __future__ import annotations

from typing import Any, Protocol

from service.store import redis_feedback_scripts as scripts
from service.store.base import (
    Feedback,
    FeedbackConflict,
    KeyGuard,
    KeyReplayed,
    ModelNotFound,
    check_feedback_labels,
    check_feedback_records,
    check_payload,
    check_ttl,
    payload_digest,
)
from service.store.redis_idempotency import replayed_key
from service.store.redis_keys import _keys, _text
from service.store.redis_wakes import WakeStreams, wake_key


class RedisStore(Protocol):
    """What these functions use of the Redis store (``RedisStore`` and its cluster
    twin): its scripts, its append gate and its wake streams."""

    wake_in_script: bool
    wakes: WakeStreams

    @property
    def r(self) -> Any: ...

    async def _eval_acked(self, src: str, keys: list[str], args: list[Any]) -> Any: ...

    def _ack_commands(self) -> list[tuple[Any, ...]]: ...

    async def _script(self, src: str, keys: list[str], args: list[Any]) -> Any: ...

    async def _ready_to_append(self) -> None: ...


_REASONS = {-2: "missing", -3: "labelled", -4: "changed"}


def feedback_keys(k: dict[str, str]) -> list[str]:
    return [k["fb"], k["fbexp"], k["fblab"]]


async def put_feedback(
    store: RedisStore,
    name: str,
    records: list[tuple[str, bytes]],
    ttl_seconds: float,
    replace: bool = True,
) -> int | None:
    check_ttl(ttl_seconds)
    check_feedback_records(records)
    if not records:
        return None
    k = _keys(name)
    args: list[Any] = [max(1, int(ttl_seconds * 1000)) * (1 if replace else -1)]
    for i, rec in records:
        args += [i, bytes(rec)]
    keys = [k["config"], k["gen"], *feedback_keys(k)]
    res = int(await store._eval_acked(scripts.PUT_FEEDBACK, keys, args))
    if res == -1:
        raise ModelNotFound(name)
    return None if res == 0 else res - 1


async def fence(store: RedisStore, name: str) -> None:
    """A write on the model's slot (set and deleted: nothing stays), acknowledged as an
    append is: replicas that have it have every write to the model before it."""
    if store._ack_commands():
        await store._eval_acked(scripts.FENCE, [f"ls:{{{name}}}:fence"], [])


async def get_feedback(store: RedisStore, name: str, ids: list[str]) -> list[Feedback | None]:
    if not ids:
        return []
    k = _keys(name)
    flat = await store._script(scripts.GET_FEEDBACK, [k["gen"], *feedback_keys(k)], list(ids))
    out: list[Feedback | None] = []
    for j in range(len(ids)):
        rec, mark = bytes(flat[2 * j]), _text(flat[2 * j + 1])
        if mark:
            pos, _, text = mark.partition(" ")
            out.append(Feedback(None, text, int(pos)))
        else:
            out.append(Feedback(rec) if rec else None)
    return out


async def due_feedback(
    store: RedisStore, name: str, within_seconds: float, limit: int
) -> list[str]:
    k = _keys(name)
    args = [max(0, int(within_seconds * 1000)), max(0, int(limit))]
    ids = await store._script(scripts.DUE_FEEDBACK, [k["gen"], *feedback_keys(k)], args)
    return [_text(i) for i in ids]


async def append_labelled(
    store: RedisStore,
    name: str,
    payload: bytes,
    labels: list[tuple[str, str, str]],
    once: KeyGuard | None = None,
    keep_seconds: float = 0.0,
) -> tuple[int, str]:
    """One script on its own round trip (not group-committed), as ``append_once``."""
    check_payload(payload)
    check_feedback_labels(labels)
    await store._ready_to_append()
    k = _keys(name)
    keys = [k["config"], k["seq"], k["log"], k["head"], k["gen"], *feedback_keys(k)]
    keys += [k["idem"], k["idemexp"], k["idempos"], k["idemout"]]
    args: list[Any] = [bytes(payload), payload_digest(payload), len(labels)]
    for i, digest, mark in labels:
        args += [i, digest, mark]
    if once is None:
        args += ["", "", 0, 0]
    else:
        args += [once.key, once.payload_hash, int(once.n), max(1, int(once.ttl_seconds * 1000))]
    args.append(max(0, int(keep_seconds * 1000)))
    if store.wake_in_script:
        keys.append(wake_key(name))
        args.append(name)
    res = await store._eval_acked(scripts.APPEND_LABELLED, keys, args)
    code = int(res[0])
    if code == -1:
        raise ModelNotFound(name)
    if code == 0 and once is not None:
        raise KeyReplayed(*replayed_key(res[1], name, once.key, once.payload_hash))
    if code in _REASONS:
        raise FeedbackConflict(int(res[1]) - 1, _REASONS[code])
    position = int(res[1])
    if not store.wake_in_script:
        store.wakes.publish(store.r, {name: position})
    return position, _text(res[2])
