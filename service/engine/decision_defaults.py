"""The default reward of a decision model (``default_reward``, ``reward_wait_seconds``):
an event that got no reward within the wait is learned once with the default.

With a default configured, an event's decision is kept ``reward_wait_seconds`` plus a
grace (``max(60 s, wait)``) (``DecisionAdapter.record_seconds``), so an event is due
exactly when its record's expiry is within the grace (``Store.due_feedback``). Every
second, for each decision model it owns, the worker holding the model's
``default_reward`` lease (``Store.try_lease``, as checkpoints take theirs) reads the
due events and appends one log entry learning them with the default (``"d": 1`` in
each decision), the events marked in the same atomic step
(``Store.append_labelled``), like a reward request. So every replica learns the
default in log order, at most once; a real reward that races it either wins (the
sweep's append finds the event labelled and appends nothing) or comes late: it gets a
409 ``default_reward_applied`` and is counted (``learnserve_late_rewards_total``),
never learned. A sweep later than the grace loses the event's default (documented).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson

from service.engine import update_submission
from service.errors import ServiceError
from service.models import decision_features as df
from service.models.decision import DecisionAdapter, default_grace
from service.observability import metrics as M
from service.store.base import FeedbackConflict, record_digest

if TYPE_CHECKING:
    from service.engine.model_handle import ModelHandle
    from service.engine.registry import Registry

log = logging.getLogger("learnserve.decisions")

LEASE = "default_reward"
_LEASE_SECONDS = 10.0
_BATCH = 256  # events per entry


def due_models(registry: Registry) -> list[ModelHandle]:
    """The decision models with a default reward this worker owns (a follower has none)."""
    return [
        h
        for h in registry.models.values()
        if isinstance(h.adapter, DecisionAdapter)
        and h.adapter.settings_of.get("default_reward") is not None
        and h.owned
        and h.leader is None
    ]


async def sweep(registry: Registry, h: ModelHandle) -> int:
    """Learn the default reward of ``h``'s due events (when this worker holds the lease);
    how many were learned."""
    adapter = h.adapter
    assert isinstance(adapter, DecisionAdapter)
    d = adapter.settings_of
    store = registry.store
    if not await store.try_lease(h.name, LEASE, registry.member_id, _LEASE_SECONDS):
        return 0
    ids = await store.due_feedback(h.name, default_grace(float(d["reward_wait_seconds"])), _BATCH)
    if not ids:
        return 0
    found = await store.get_feedback(h.name, ids)
    default = float(d["default_reward"])
    events, marks = [], []
    for eid, fb in zip(ids, found, strict=True):
        if fb is None or fb.record is None or fb.mark is not None:
            continue  # rewarded or expired meanwhile
        try:
            batch, ev = df.decode_event(fb.record, adapter.spec.dim)
        except ValueError:
            log.warning("model %r: event %r has an unreadable decision; skipped", h.name, eid)
            continue
        ans = df.answer_of(ev, ev["s"], ev["rank"])
        events.append((batch, {k: v for k, v in ev.items() if k not in ("s", "rank")} | {"d": 1}))
        mark = {"r": default, "d": 1, "ans": ans}
        marks.append((eid, record_digest(fb.record), orjson.dumps(mark).decode()))
    if not events:
        return 0
    entry = df.reward_entry(events, [default] * len(events))
    try:
        adapter.check_update(entry)
    except ServiceError as e:
        log.warning("model %r: the default reward of %d events is refused: %s",
                    h.name, len(events), e.message)  # fmt: skip
        return 0
    try:
        await update_submission.submit_labelled(registry, h, entry, marks, None)
    except FeedbackConflict:
        return 0  # a real reward came meanwhile: the next sweep reads again
    M.DEFAULT_REWARDS.labels(h.name).inc(len(events))
    return len(events)


class DefaultRewards:
    """Runs :func:`sweep` for each model about once a second, one at a time per model."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.running: set[str] = set()
        self.next_at: dict[str, float] = {}

    def tick(self) -> None:
        now = time.monotonic()
        for h in due_models(self.registry):
            if h.name in self.running or now < self.next_at.get(h.name, 0.0):
                continue
            self.running.add(h.name)
            self.next_at[h.name] = now + 1.0
            self.registry.spawn(self._one(h))

    async def _one(self, h: ModelHandle) -> None:
        try:
            await sweep(self.registry, h)
        except Exception as e:  # the store, a deleted model: the next tick tries again
            log.warning("model %r: default-reward sweep failed: %s", h.name, e)
        finally:
            self.running.discard(h.name)
