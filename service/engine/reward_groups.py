"""Group commit of rewards: unkeyed rewards to one decision model that wait for the
store together become one log entry, one labelled append and one apply, as
:mod:`service.engine.group_commit` does for ``/update``.

Each request's reward entry is checked and dry-run on its own before it queues; a
group's entry is the group entry of its requests' own entries in arrival order, and
its labels are all of theirs, marked in the same atomic step as the append
(``Store.append_labelled``): every event is still learned at most once, whichever
worker takes it. A request whose events overlap one already in the group waits for
the next group (the store marks an event once per append). When the store refuses the
group (``FeedbackConflict``: one of its events was rewarded or expired meanwhile),
each request is appended on its own, so the conflict is the one request's, which
reads its events again (``service.engine.decisions``). Rewards with an
``Idempotency-Key`` keep their own entries (the key is recorded with the append).
``LEARNSERVE_GROUP_COMMIT=false`` turns grouping off.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from service.engine import update_outcomes, update_submission
from service.engine.model_handle import ModelHandle
from service.engine.registry import Registry
from service.models.payload import encode_group
from service.store.base import FeedbackConflict

Labels = list[tuple[str, str, str]]


@dataclass
class _Request:
    payload: bytes
    labels: Labels
    answered: asyncio.Future[int]


@dataclass
class _Queue:
    waiting: list[_Request] = field(default_factory=list)
    running: bool = False


async def submit(registry: Registry, h: ModelHandle, payload: bytes, labels: Labels) -> int:
    """Learn the reward entry ``payload`` marking ``labels``; its log position once
    durable and applied here. ``FeedbackConflict`` as ``append_labelled`` raises it."""
    if not registry.settings.group_commit:
        position, _ = await update_submission.submit_labelled(registry, h, payload, labels)
        return position
    queue: _Queue = h.reward_group if h.reward_group is not None else _Queue()
    h.reward_group = queue
    request = _Request(payload, labels, asyncio.get_running_loop().create_future())
    queue.waiting.append(request)
    if not queue.running:
        queue.running = True
        # Its own task: a client that goes away must not take the others' commit with it.
        registry.spawn(_commit(registry, h, queue))
    return await request.answered


async def _commit(registry: Registry, h: ModelHandle, queue: _Queue) -> None:
    settings = registry.settings
    try:
        while queue.waiting:
            group: list[_Request] = []
            events: set[str] = set()
            size = 0
            for r in queue.waiting:
                ids = {label[0] for label in r.labels}
                if group and (
                    len(group) >= settings.group_commit_max_requests
                    or size + len(r.payload) > settings.max_body_bytes
                    or not events.isdisjoint(ids)
                ):
                    break
                group.append(r)
                events |= ids
                size += len(r.payload)
            del queue.waiting[: len(group)]
            await _one_entry(registry, h, group)
    finally:
        queue.running = False
        for r in queue.waiting:  # cancelled (shutting down): none is left waiting
            if not r.answered.done():
                r.answered.cancel()
        queue.waiting.clear()


async def _one_entry(registry: Registry, h: ModelHandle, group: list[_Request]) -> None:
    alone = len(group) == 1
    try:
        if alone:
            r = group[0]
            position, _ = await update_submission.submit_labelled(registry, h, r.payload, r.labels)
        else:
            labels = [label for r in group for label in r.labels]
            entries = [r.payload for r in group]
            position, _ = await update_submission.submit_labelled(
                registry, h, encode_group(entries), labels, entries=entries
            )
    except FeedbackConflict as e:
        if alone:
            _fail(group, e)
        else:  # nothing was appended: each on its own, the conflict its one request's
            for r in group:
                await _one_entry(registry, h, [r])
        return
    except Exception as e:  # not accepted, or not applied here: each request says so
        _fail(group, e)
        return
    except BaseException:
        for r in group:
            if not r.answered.done():
                r.answered.cancel()
        raise
    outcomes = [(None, None)] if alone else h.group_results.get(position) or []
    for i, r in enumerate(group):
        error = outcomes[i][1] if i < len(outcomes) else None
        if r.answered.done():
            continue
        if error is not None:
            r.answered.set_exception(update_outcomes.failure_error(error))
        else:
            r.answered.set_result(position)


def _fail(group: list[_Request], e: BaseException) -> None:
    for r in group:
        if not r.answered.done():
            r.answered.set_exception(e)
