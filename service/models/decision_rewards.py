"""What a decision model's reward entry teaches its reward model
(:mod:`service.models.decision`): the chosen rows of the entry's events, their rewards,
the weights and targets its ``weighting`` gives them. Functions of the adapter, read
by its dry run (``check_update``) and by ``apply`` alike."""

from __future__ import annotations

from typing import Any

from learners.features import Batch
from service.models.payload import decode_payload

# ``adapter``: a service.models.decision.DecisionAdapter (not imported: it imports this)
Events = list[dict[str, Any]]


def learned_rows(
    adapter: Any, payload: bytes
) -> tuple[Batch, list[float], list[float], tuple[Batch, Events]]:
    """The chosen rows, their rewards and weights (1/p with ``"ips"``, else 1); the
    entry's batch (as the adapter reads it: a challenger's own rows) and events."""
    batch, meta = decode_payload(payload, adapter.spec.dim)
    events = meta.get("ev")
    if type(events) is not list or len(events) != len(meta["y"]):
        raise ValueError("not a decision reward entry")
    rows, start = [], 0
    for ev in events:
        k = len(ev["ids"])
        if not 0 <= int(ev["a"]) < k or not 0.0 < float(ev["p"][ev["a"]]) <= 1.0:
            raise ValueError("a decision with a bad chosen action or probability")
        rows.append(start + int(ev["a"]))
        start += k
    if start != batch.n_rows:
        raise ValueError(f"a reward entry of {batch.n_rows} rows for {start} actions")
    batch = adapter.own_rows(batch, events)
    y = [float(r) for r in meta["y"]]
    ips = adapter.settings_of["weighting"] == "ips"
    w = [1.0 / float(ev["p"][ev["a"]]) if ips else 1.0 for ev in events]
    return batch.take(rows), y, w, (batch, events)


def targets(adapter: Any, x: Batch, y: list[float], events: Events) -> list[float]:
    """What the reward model learns the chosen rows ``x`` towards: the rewards ``y``, or
    with ``"weighting": "dr"`` the doubly robust estimate of each chosen action's reward,
    ŝ + (r − ŝ)/p (VW's ``dr``; ŝ the reward model's score of the row as the model is
    before this entry, so the whole entry is checked in one dry run; every other
    action's estimate is its own score, which square loss learns nothing from)."""
    if adapter.settings_of["weighting"] != "dr":
        return y
    s = adapter.model.predict_details(x)[0].tolist()
    ps = [float(ev["p"][ev["a"]]) for ev in events]
    return [si + (r - si) / p for si, r, p in zip(s, y, ps, strict=True)]


def first_nonfinite_row(models: list[Any], x: Batch, t: list[float], w: list[float]) -> int | None:
    """The first row any of ``models`` (every reward model that learns it) could not
    learn with finite weights, else None (a dry run: nothing changes)."""
    rows = [m.first_nonfinite_row(x, t, w, m.check(x, t, w)) for m in models]
    found = [r for r in rows if r is not None]
    return min(found) if found else None
