"""Warm start of a decision model from a DSJSON decision log (``POST
/models/{name}/decisions``): another system's logged decisions and rewards, learned as
if they had been ranked and rewarded here.

Each line (:func:`learners.decisions.dsjson.from_dsjson`) with a reward becomes one
event of a reward entry, exactly as ``/reward`` writes one: the actions' rows encoded
from the line's context and actions (an action's id is its ``_id``, else its 1-based
position; keys starting with ``_`` are metadata, not features; values must be numbers
or strings), the logged probabilities, the chosen action and its reward. So the model
learns them (weighted as its ``weighting`` says) and its off-policy estimates take them
in, in log order on every replica. Lines without a reward are skipped (counted); a
line that cannot be read or encoded is a 422 naming ``lines[i]``, and nothing is
learned. With an ``Idempotency-Key`` the request is learned at most once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from learners.decisions.dsjson import DSJSONError, from_dsjson
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.engine.requests import check_idempotency_key
from service.errors import invalid, too_large
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.models.decision_offline import dsjson_event
from service.observability import metrics as M
from service.settings import Settings


def _events(
    adapter: DecisionAdapter, settings: Settings, raw: bytes
) -> tuple[list[Any], list[float], int]:
    """The events to learn, their rewards, and how many lines had no reward."""
    lines = [x for x in raw.decode("utf-8", errors="replace").splitlines() if x.strip()]
    if not lines:
        raise invalid("lines: the body holds no DSJSON line", "lines")
    if len(lines) > settings.max_batch_examples:
        raise too_large(f"lines: {len(lines)} lines exceed the limit of "
                        f"{settings.max_batch_examples}", "lines")  # fmt: skip
    events: list[Any] = []
    rewards: list[float] = []
    skipped = 0
    for i, line in enumerate(lines):
        loc = f"lines[{i}]"
        try:
            rec = from_dsjson(line)
        except (DSJSONError, ValueError) as e:
            raise invalid(f"{loc}: {e}", loc) from None
        if rec.reward is None:
            skipped += 1
            continue
        event, reward = dsjson_event(adapter, settings, rec, loc)
        events.append(event)
        rewards.append(reward)
    return events, rewards, skipped


async def learn_dsjson(
    engine: Engine, settings: Settings, h: ModelHandle, raw: bytes, key: str | None
) -> dict[str, Any]:
    """Learn the rewarded decisions of a DSJSON body; the answer once applied."""
    adapter = h.adapter
    assert isinstance(adapter, DecisionAdapter)
    if key is not None:
        check_idempotency_key(key)
    events, rewards, skipped = _events(adapter, settings, raw)
    if not events:
        return {"model": h.name, "applied": 0, "skipped": skipped, "version": h.version}
    entry = df.reward_entry(events, rewards)
    adapter.check_update(entry)
    if key is None:
        version = await engine.submit_update(h, entry)
        n = len(events)
    else:
        digest = hashlib.sha256(raw).hexdigest()
        version, n, _ = await engine.submit_update_once(h, entry, key, digest, len(events))
    M.REWARDS.labels(h.name).inc(n)
    return {"model": h.name, "applied": n, "skipped": skipped, "version": version}
