"""What a decision model's reward entry teaches its reward model
(:mod:`service.models.decision`): the chosen rows of the entry's events, their rewards,
the weights and targets its ``weighting`` gives them, and each event's off-policy
terms. Functions of the adapter, read by its dry run (``check_update``) and by
``apply`` alike."""

from __future__ import annotations

from typing import Any

from learners.decisions.estimators import dr_parts
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


def evaluate(adapter: Any, ev: dict[str, Any], reward: float, rows: Batch) -> Any:
    """An event's off-policy terms from the reward model serving as it is (before it
    learns the event): each target policy's probabilities and the model's scores,
    which it returns."""
    raw, _ = adapter.model.predict_details(rows)
    scores = [float(s) for s in raw.tolist()]
    p = [float(v) for v in ev["p"]]
    a = int(ev["a"])
    eligible = [j for j, v in enumerate(p) if v > 0.0]
    best = max(eligible, key=lambda j: (scores[j], -j))
    greedy = [1.0 if j == best else 0.0 for j in range(len(p))]
    first = [1.0 if j == eligible[0] else 0.0 for j in range(len(p))]
    uniform = [1.0 / len(eligible) if v > 0.0 else 0.0 for v in p]
    adapter.agreement[0] += 1
    adapter.agreement[1] += int(best == a)
    targets = {"served": p, "learned": greedy, "first": first, "uniform": uniform,
               **adapter.own_targets(p, raw, rows)}  # fmt: skip
    for name, e in adapter.evaluations.items():
        e.update(p[a], reward, *dr_parts(targets[name], scores, a))
    return raw
