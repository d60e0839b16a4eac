"""Group commit: small updates to one model that wait for the store together become one
log entry, one append and one apply.

While a model's append is in flight, the plain updates that arrive for it queue here;
when it returns, they all go into the next entry (``service.models.payload``'s group
entry: each request's own entry, in arrival order). So a lone request waits for nothing
more than before, and under many concurrent clients one store round trip, one chain
hash and one replica read serve many requests. Each request is validated, encoded and
dry-run on its own before it queues (a bad request is refused alone and never enters a
group), answered only once the group entry is durable and applied here, and gets its own
answer: its ``applied`` count, its own ``correct``, and the group's ``version`` (shared
by every request of the group). A request of a group that cannot be applied (rare: the
dry run catches non-finite weights) fails alone; the others learn, on every replica alike.

Requests with an ``Idempotency-Key`` or with delayed labels keep their own entries (their
keys and marks are written atomically with the append). ``LEARNSERVE_GROUP_COMMIT=false``
turns grouping off (e.g. during a rolling upgrade from a version that cannot read group
entries).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from service.engine import update_outcomes, update_submission
from service.engine.model_handle import ModelHandle
from service.engine.registry import Registry
from service.models.payload import encode_group


@dataclass
class _Queue:
    waiting: list[tuple[bytes, asyncio.Future[tuple[int, int | None]]]] = field(
        default_factory=list
    )
    running: bool = False


async def submit(registry: Registry, h: ModelHandle, payload: bytes) -> tuple[int, int | None]:
    """Learn ``payload`` (a validated, dry-run entry); ``(version, correct)`` once its
    entry is durable and applied here (``correct``: its examples predicted right before
    they were learned, None when not known)."""
    if not registry.settings.group_commit:
        position = await update_submission.submit_update(registry, h, payload)
        return position, h.correct_at.get(position)
    queue: _Queue = h.group if h.group is not None else _Queue()
    h.group = queue
    answered = asyncio.get_running_loop().create_future()
    queue.waiting.append((payload, answered))
    if not queue.running:
        queue.running = True
        # Its own task: a client that goes away must not take the others' commit with it.
        registry.spawn(_commit(registry, h, queue))
    return await answered


async def _commit(registry: Registry, h: ModelHandle, queue: _Queue) -> None:
    settings = registry.settings
    try:
        while queue.waiting:
            group: list[tuple[bytes, asyncio.Future[tuple[int, int | None]]]] = []
            size = 0
            for payload, answered in queue.waiting:
                if group and (
                    len(group) >= settings.group_commit_max_requests
                    or size + len(payload) > settings.max_body_bytes
                ):
                    break
                group.append((payload, answered))
                size += len(payload)
            del queue.waiting[: len(group)]
            await _one_entry(registry, h, group)
    finally:
        queue.running = False
        for _, answered in queue.waiting:  # cancelled (shutting down): none is left waiting
            if not answered.done():
                answered.cancel()
        queue.waiting.clear()


async def _one_entry(
    registry: Registry,
    h: ModelHandle,
    group: list[tuple[bytes, asyncio.Future[tuple[int, int | None]]]],
) -> None:
    entries = [payload for payload, _ in group]
    alone = len(entries) == 1
    try:
        if alone:
            position = await update_submission.submit_update(registry, h, entries[0])
        else:
            position = await update_submission.submit_update(
                registry, h, encode_group(entries), entries
            )
    except Exception as e:  # not accepted, or not applied here: each request says so
        for _, answered in group:
            if not answered.done():
                answered.set_exception(e)
        return
    except BaseException:
        for _, answered in group:
            if not answered.done():
                answered.cancel()
        raise
    if alone:
        outcomes: list[tuple[int | None, str | None]] = [(h.correct_at.get(position), None)]
    else:
        outcomes = h.group_results.get(position) or [(None, None)] * len(group)
    for i, (_, answered) in enumerate(group):
        correct, error = outcomes[i] if i < len(outcomes) else (None, None)
        if answered.done():
            continue
        if error is not None:
            answered.set_exception(update_outcomes.failure_error(error))
        else:
            answered.set_result((position, correct))
