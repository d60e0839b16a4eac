"""Decision logs read offline: a DSJSON record as a decision model's event (for the warm
start, ``POST /models/{name}/decisions``), and a decision model's config evaluated on a
DSJSON file without a service (``learnserve evaluate-policy FILE --model CONFIG``).

The evaluation is a challenger's (:mod:`service.models.decision_follower`) of the
file's logging policy: each rewarded line in file order, its off-policy terms first
(the config's exploration policy as ``challenger``, its greedy policy as ``learned``,
and the ``served`` (logging), ``first`` and ``uniform`` baselines; IPS, SNIPS and DR
with 95 % intervals), then its reward model learns the chosen action's row (weighted as
the config says, with the logged probability). What a challenger following a leader
that logged these decisions would report.

>>> from service.settings import Settings
>>> from learners.decisions.dsjson import DecisionRecord
>>> recs = [DecisionRecord(f"e{i}", {"u": i % 2}, [{"_id": "a"}, {"_id": "b"}],
...                        i % 2, [0.5, 0.5], 1.0 if i % 2 else 0.0) for i in range(40)]
>>> body = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 10}}
>>> out = evaluate_config(body, iter(recs), Settings(data_dir="/tmp/unused"))
>>> out["rows"], round(out["policies"]["served"]["ips"]["estimate"], 3)
(40, 0.5)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from learners.decisions.dsjson import DecisionRecord
from service.errors import ServiceError, invalid
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.models.decision_follower import DecisionKind
from service.settings import Settings

CHUNK = 256  # events a reward entry holds (the estimates do not depend on it)


def _plain(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if not str(k).startswith("_")}


def dsjson_event(
    adapter: DecisionAdapter, settings: Settings, rec: DecisionRecord, loc: str
) -> tuple[Any, float]:
    """A rewarded record as ``(event, reward)`` of a reward entry: the actions' rows
    encoded from its context and actions (an action's id is its ``_id``, else its
    1-based position; keys starting with ``_`` are metadata), the logged probabilities,
    the chosen action; a 422 naming ``loc`` when it cannot be encoded."""
    ids = [str(a.get("_id", j + 1)) for j, a in enumerate(rec.actions)]
    feats = [_plain(a) for a in rec.actions]
    acts = [{"id": a, "features": f} for a, f in zip(ids, feats, strict=True)]
    body = {"context": _plain(rec.context), "actions": acts}
    try:
        x = adapter.encode_rank(body, settings)
        reward = adapter.check_reward(rec.reward, f"{loc}._label_cost")
    except ServiceError as e:
        raise invalid(f"{loc}: {e.message}", loc) from None
    ev = {"id": rec.event_id, "ids": ids, "p": rec.probabilities, "a": rec.chosen,
          "v": rec.version or "imported", "ts": rec.timestamp, "ctx": x.context,
          "feat": x.features}  # fmt: skip
    return (x.batch, ev), reward


def evaluate_config(
    body: dict[str, Any], records: Iterable[DecisionRecord], settings: Settings
) -> dict[str, Any]:
    """The off-policy estimates of the decision model ``body`` (a ``PUT`` body) on the
    rewarded ``records``, as its challenger would report them (the module's doc)."""
    config = DecisionAdapter.normalize_config(body, settings)
    config["follows"] = {"model": "(file)", "from_version": 0, "features": config["features"]}
    model = DecisionKind.create(config)
    events: list[Any] = []
    rewards: list[float] = []
    rows = unrewarded = 0

    def learn() -> None:
        if events:
            model.apply(df.reward_entry(events, rewards))
            events.clear()
            rewards.clear()

    for i, rec in enumerate(records):
        if rec.reward is None:
            unrewarded += 1
            continue
        ev, reward = dsjson_event(model, settings, rec, f"lines[{i}]")
        events.append(ev)
        rewards.append(reward)
        rows += 1
        if len(events) >= CHUNK:
            learn()
    learn()
    d = config["decision"]
    return {
        "rows": rows,
        "unrewarded": unrewarded,
        "reward_model": (
            {"algorithm": d["reward_algorithm"], **model.candidates.describe()}
            if model.candidates is not None
            else {"algorithm": config["algorithm"], "params": config["params"]}
        ),
        "exploration": {"policy": d["policy"], "params": d["policy_params"]},
        "policies": {t: e.summary() for t, e in model.evaluations.items()},
    }
