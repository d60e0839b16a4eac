"""DSJSON decision logs: one JSON object per line, the format Vowpal Wabbit reads with
``--dsjson`` (``--cb_adf`` / ``--cb_explore_adf``) and Azure Personalizer and
learning-loop write. A line written here:

    {"_label_cost": -r, "_label_probability": p, "_label_Action": k+1, "_labelIndex": k,
     "o": [{"v": r, "EventId": id}], "Timestamp": "...Z", "Version": "1", "EventId": id,
     "a": [k+1, ...], "c": {<shared features>, "_multi": [{<action features>}, ...]},
     "p": [...], "VWState": {"m": version}}

- ``_multi`` lists the actions in their given order; k is the chosen action's 0-based
  index in it, ``_label_Action`` = k + 1 (1-based) and ``_labelIndex`` = k.
- ``a`` is the ranking as 1-based indices into ``_multi`` (the chosen action first)
  and ``p`` each ranked action's probability, in the order of ``a``.
- The cost is the negated reward (VW minimises cost); ``o`` repeats the reward as an
  outcome. A decision whose reward is unknown has no ``_label_*`` fields and no ``o``
  (VW then predicts on it but does not learn from it).
- ``_skipLearn: true`` marks a decision VW must not learn from (written only when set).
- Features (shared in ``c``, per action in ``_multi``) are VW's JSON features: a key
  with an object value is a namespace (VW uses the first letter of its name), a
  number is a feature's value, a string value s of key f is the feature ``f`` + ``s``,
  keys starting with ``_`` are not features. They are written as given.

>>> items = [{"item": {"id": "a"}}, {"item": {"id": "b"}}]
>>> rec = DecisionRecord("ev-1", {"user": {"age": 31}}, items, chosen=1, probabilities=[0.2, 0.8],
...                      reward=1.0, timestamp="2024-05-01T10:00:00.000Z")
>>> line = to_dsjson(rec)
>>> line[:100]
'{"_label_cost":-1.0,"_label_probability":0.8,"_label_Action":2,"_labelIndex":1,"o":[{"v":1.0,"EventI'
>>> from_dsjson(line) == rec
True
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "DSJSONError",
    "DecisionRecord",
    "from_dsjson",
    "read_dsjson",
    "to_dsjson",
    "write_dsjson",
]


class DSJSONError(ValueError):
    """A line that is not a decision this module can read; the message names the field."""


@dataclass
class DecisionRecord:
    """One decision: shared ``context`` features, per-action features, the chosen
    action (0-based index into ``actions``), every action's probability (in the order of
    ``actions``), the reward (None: not known yet), and its metadata. ``ranking`` is
    the order of ``a`` (0-based; default: chosen first, then by probability, then index)."""

    event_id: str
    context: dict[str, Any]
    actions: list[dict[str, Any]]
    chosen: int
    probabilities: list[float]
    reward: float | None = None
    timestamp: str = ""
    version: str | None = None
    ranking: list[int] = field(default_factory=list)
    skip_learn: bool = False

    def __post_init__(self) -> None:
        n = len(self.actions)
        if not isinstance(self.event_id, str) or not self.event_id:
            raise DSJSONError("EventId: must be a non-empty string")
        if not isinstance(self.context, dict) or "_multi" in self.context:
            raise DSJSONError("c: the shared features must be an object without _multi")
        if n == 0 or not all(isinstance(a, dict) for a in self.actions):
            raise DSJSONError("c._multi: must be a non-empty list of objects")
        if len(self.probabilities) != n:
            raise DSJSONError(f"p: {len(self.probabilities)} probabilities for {n} actions")
        self.probabilities = [float(p) for p in self.probabilities]
        if not all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in self.probabilities):
            raise DSJSONError("p: every probability must be in [0, 1]")
        if abs(math.fsum(self.probabilities) - 1.0) > 1e-6:
            raise DSJSONError(
                f"p: the probabilities sum to {math.fsum(self.probabilities)!r}, not 1"
            )
        if (
            isinstance(self.chosen, bool)
            or not isinstance(self.chosen, int)
            or not 0 <= self.chosen < n
        ):
            raise DSJSONError(
                f"_labelIndex: must be an action index in 0..{n - 1}, got {self.chosen!r}"
            )
        if self.probabilities[self.chosen] <= 0.0:
            raise DSJSONError("_label_probability: the chosen action's probability must be > 0")
        if self.reward is not None:
            self.reward = float(self.reward)
            if not math.isfinite(self.reward):
                raise DSJSONError("_label_cost: the reward must be finite")
        if not self.ranking:
            p = self.probabilities
            rest = sorted((i for i in range(n) if i != self.chosen), key=lambda i: (-p[i], i))
            self.ranking = [self.chosen, *rest]
        if sorted(self.ranking) != list(range(n)) or self.ranking[0] != self.chosen:
            raise DSJSONError("a: must list every action once, the chosen one first")
        if not self.timestamp:
            self.timestamp = format_timestamp(datetime.now(UTC))

    @property
    def probability(self) -> float:
        """The chosen action's probability."""
        return self.probabilities[self.chosen]


def format_timestamp(when: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``, as the decision logs write it."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def to_dsjson(rec: DecisionRecord) -> str:
    """The record as one DSJSON line (no newline), keys in the order VW's logs have them."""
    out: dict[str, Any] = {}
    if rec.reward is not None:
        out["_label_cost"] = -rec.reward if rec.reward != 0.0 else 0.0
        out["_label_probability"] = rec.probability
        out["_label_Action"] = rec.chosen + 1
        out["_labelIndex"] = rec.chosen
        out["o"] = [{"v": rec.reward, "EventId": rec.event_id}]
    out["Timestamp"] = rec.timestamp
    out["Version"] = "1"
    out["EventId"] = rec.event_id
    out["a"] = [i + 1 for i in rec.ranking]
    out["c"] = {**rec.context, "_multi": rec.actions}
    out["p"] = [rec.probabilities[i] for i in rec.ranking]
    if rec.version is not None:
        out["VWState"] = {"m": rec.version}
    if rec.skip_learn:
        out["_skipLearn"] = True
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise DSJSONError(f"{key}: missing")
    v = obj[key]
    if (isinstance(v, bool) and kind is not bool) or not isinstance(v, kind):
        raise DSJSONError(
            f"{key}: expected {getattr(kind, '__name__', kind)}, got {type(v).__name__}"
        )
    return v


def from_dsjson(line: str) -> DecisionRecord:
    """A decision from one DSJSON line; :class:`DSJSONError` naming the field otherwise.

    Reads the fields :func:`to_dsjson` writes; the chosen action is ``_labelIndex``
    (else ``_label_Action`` − 1, else ``a[0]`` − 1 for an unrewarded decision) and the
    reward is −``_label_cost`` (absent: None). Other keys (``pdrop``, ...) are ignored."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DSJSONError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise DSJSONError("a DSJSON line must be an object")
    c = dict(_need(obj, "c", dict))
    actions = c.pop("_multi", None)
    if not isinstance(actions, list):
        raise DSJSONError("c._multi: missing or not a list")
    a = _need(obj, "a", list)
    p = _need(obj, "p", list)
    n = len(actions)
    if len(a) != n or len(p) != n:
        raise DSJSONError(f"a, p: {len(a)} and {len(p)} entries for {n} actions")
    if not all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in a):
        raise DSJSONError(f"a: every entry must be an action number in 1..{n}")
    if len(set(a)) != n:
        raise DSJSONError("a: must list every action once, the chosen one first")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in p):
        raise DSJSONError("p: every entry must be a number")
    probs = [0.0] * n
    for i, x in zip(a, p, strict=True):
        probs[i - 1] = float(x)
    reward = None
    if "_label_cost" in obj:
        cost = _need(obj, "_label_cost", (int, float))
        reward = -float(cost) if cost != 0 else 0.0
    if "_labelIndex" in obj:
        chosen = _need(obj, "_labelIndex", int)
    elif "_label_Action" in obj:
        chosen = _need(obj, "_label_Action", int) - 1
    else:
        chosen = a[0] - 1
    state = obj.get("VWState")
    version = state.get("m") if isinstance(state, dict) else None
    rec = DecisionRecord(
        event_id=_need(obj, "EventId", str),
        context=c,
        actions=actions,
        chosen=chosen,
        probabilities=probs,
        reward=reward,
        timestamp=str(obj.get("Timestamp", "")),
        version=None if version is None else str(version),
        ranking=[i - 1 for i in a],
        skip_learn=obj.get("_skipLearn") is True,
    )
    if "_label_probability" in obj:
        lp = float(_need(obj, "_label_probability", (int, float)))
        if abs(lp - rec.probability) > 1e-6:
            raise DSJSONError(
                f"_label_probability: {lp!r} is not p of the chosen action ({rec.probability!r})"
            )
    return rec


def write_dsjson(path: str | Path, records: Iterable[DecisionRecord]) -> int:
    """Write records as DSJSON lines; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(to_dsjson(rec) + "\n")
            n += 1
    return n


def read_dsjson(path: str | Path) -> Iterator[DecisionRecord]:
    """The decisions of a DSJSON file, skipping blank lines; a bad line raises
    :class:`DSJSONError` with its line number."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield from_dsjson(line)
                except DSJSONError as exc:
                    raise DSJSONError(f"line {lineno}: {exc}") from None


def records_from(
    event_ids: Sequence[str],
    contexts: Sequence[dict[str, Any]],
    actions: Sequence[list[dict[str, Any]]],
    chosen: Sequence[int],
    probabilities: Sequence[Sequence[float]],
    rewards: Sequence[float | None],
) -> list[DecisionRecord]:
    """Records from parallel columns (a convenience for tests and exports)."""
    return [
        DecisionRecord(e, dict(c), list(a), k, list(p), r)
        for e, c, a, k, p, r in zip(
            event_ids, contexts, actions, chosen, probabilities, rewards, strict=True
        )
    ]
