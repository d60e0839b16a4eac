"""The wire side of a decision model (:mod:`service.models.decision`): a ``rank`` body's
context and actions checked and turned into the reward model's rows, and the record kept
for an event until its reward arrives.

An action's row, hashed like any named features (``features.kind = "hashed"``), is

- ``id=<action id>`` (1.0): the action's own bias;
- ``a:<name>``: each action feature;
- ``c:<name>|id=<action id>``: each context feature crossed with the action's id (the
  reward model is then, for the context, one linear model per action);
- ``c:<name>|a:<name>``: each context feature times each action feature (shared over
  actions: what is learned for one action carries to another with those features).

A string value ``v`` of feature ``k`` is the indicator ``k=v`` (1.0), as the hashed
features of ``/update`` read it; numbers must be finite (booleans are refused).

The **record** of an event is a log-entry payload (:mod:`service.models.payload`) of the
rows of every action, with the decision in its JSON part under ``"ev"``: the event id,
the action ids, every probability, the chosen action's index, the model version that
decided, the time, and the context and actions as sent (so the decision log can be
written as DSJSON from the reward's log entry alone).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import numpy as np

from learners.decisions.explore import Decision
from learners.features import Batch, FeatureError, FeatureSpec
from service.errors import invalid, too_large
from service.models.json_fields import check_id, type_name
from service.models.payload import MAGIC, PayloadError, decode_payload, encode_payload

ACTION_KEYS = ("id", "features")
MODES = ("learning", "apprentice")


def event_id_of(body: dict[str, Any]) -> str:
    """The body's ``event_id``, or a new random one (32 hex digits)."""
    if body.get("event_id") is None:
        return uuid.uuid4().hex
    return check_id(body["event_id"], "event_id")


def named_values(obj: Any, loc: str) -> list[tuple[str, float]]:
    """``{"name": number | string}`` as (name, value) pairs: a string value ``v`` of
    ``k`` is ``("k=v", 1.0)``."""
    if obj is None:
        return []
    if type(obj) is not dict:
        raise invalid(f"{loc}: must be an object of name: value pairs, got {type_name(obj)}", loc)
    out = []
    for k, v in obj.items():
        if type(v) is str:
            out.append((f"{k}={v}", 1.0))
        elif type(v) in (int, float):
            try:
                f = float(v)
            except OverflowError:
                f = math.inf
            if not math.isfinite(f):
                raise invalid(f"{loc}.{k}: must be a finite number, got {v!r}", f"{loc}.{k}")
            out.append((str(k), f + 0.0))
        else:
            raise invalid(
                f"{loc}.{k}: must be a finite number or a string, got {type_name(v)}", f"{loc}.{k}"
            )
    return out


def check_actions(body: dict[str, Any], max_actions: int) -> list[dict[str, Any]]:
    actions = body.get("actions")
    if type(actions) is not list:
        raise invalid(f"actions: must be a list of actions, got {type_name(actions)}", "actions")
    if not actions:
        raise invalid("actions: must hold at least one action", "actions")
    if len(actions) > max_actions:
        raise too_large(
            f"actions: {len(actions)} actions exceed this model's max_actions ({max_actions})",
            "actions",
        )
    seen: dict[str, int] = {}
    for i, a in enumerate(actions):
        loc = f"actions[{i}]"
        if type(a) is not dict:
            raise invalid(f"{loc}: must be an object with id and features", loc)
        for k in a:
            if k not in ACTION_KEYS:
                raise invalid(f"{loc}.{k}: unknown field (an action has id and features)",
                              f"{loc}.{k}")  # fmt: skip
        aid = check_id(a.get("id"), f"{loc}.id")
        if aid in seen:
            raise invalid(f"{loc}.id: the same id as actions[{seen[aid]}].id", f"{loc}.id")
        seen[aid] = i
    return actions


def excluded_rows(body: dict[str, Any], ids: list[str]) -> list[int]:
    excluded = body.get("excluded")
    if excluded is None:
        return []
    if type(excluded) is not list:
        raise invalid(f"excluded: must be a list of action ids, got {type_name(excluded)}",
                      "excluded")  # fmt: skip
    where = {a: i for i, a in enumerate(ids)}
    rows = []
    for j, x in enumerate(excluded):
        loc = f"excluded[{j}]"
        if type(x) is not str or x not in where:
            raise invalid(f"{loc}: {x!r} is not the id of one of the actions", loc)
        rows.append(where[x])
    if len(set(rows)) >= len(ids):
        raise invalid("excluded: leaves no action to choose", "excluded")
    return sorted(set(rows))


def action_rows(
    context: list[tuple[str, float]],
    actions: list[dict[str, Any]],
    max_features: int,
) -> list[dict[str, float]]:
    """Each action's named features (the module's doc); where two names meet (a string
    value ``"k=v"`` and a feature named ``k=v``), the later one is kept."""
    rows = []
    for i, a in enumerate(actions):
        aid = a["id"]
        feats = named_values(a.get("features"), f"actions[{i}].features")
        n = 1 + len(feats) + len(context) * (1 + len(feats))
        if n > max_features:
            loc = f"actions[{i}].features"
            raise too_large(
                f"{loc}: with the context's {len(context)} features this action makes {n} "
                f"features (its own, the context's by the action id, and context x action), "
                f"more than max_features_per_example ({max_features})",
                loc,
            )
        row: dict[str, float] = {f"id={aid}": 1.0}
        row.update({"a:" + name: v for name, v in feats})
        tail = f"|id={aid}"
        row.update({"c:" + cname + tail: cv for cname, cv in context})
        for cname, cv in context:
            head = "c:" + cname + "|a:"
            row.update({head + name: cv * v for name, v in feats})
        rows.append(row)
    return rows


def encode_rows(spec: FeatureSpec, rows: list[dict[str, float]], max_features: int) -> Batch:
    try:
        return spec.encode(rows, where="actions", field="features", max_features=max_features)
    except FeatureError as e:
        raise invalid(str(e), e.location) from None


# ---------------------------------------------------------------------- records
def encode_event(batch: Batch, event: dict[str, Any]) -> bytes:
    """The record kept for an event: every action's row, and the decision."""
    return encode_payload(batch, [], ev=event)


def decode_event(blob: bytes, dim: int) -> tuple[Batch, dict[str, Any]]:
    batch, meta = decode_payload(blob, dim)
    ev = meta.get("ev")
    if type(ev) is not dict or batch.n_rows != len(ev.get("ids", ())):
        raise PayloadError("not a decision record")
    return batch, ev


def reward_entry(events: list[tuple[Batch, dict[str, Any]]], rewards: list[float]) -> bytes:
    """The log entry learning ``events`` with ``rewards``, in order: their rows one after
    the other, and each decision with its reward (``ev[i]["r"]``)."""
    evs = [{**ev, "r": r} for (_, ev), r in zip(events, rewards, strict=True)]
    return encode_payload(concat_rows([b for b, _ in events]), rewards, ev=evs)


def concat_rows(parts: list[Batch]) -> Batch:
    """Row batches (of one ``dim``) one after the other."""
    counts = np.array([0] + [b.nnz for b in parts], dtype=np.int64)
    offsets = np.cumsum(counts)
    indptr = np.concatenate([[0]] + [b.indptr[1:] + offsets[k] for k, b in enumerate(parts)])
    return Batch(
        indptr.astype(np.int64),
        np.concatenate([b.indices for b in parts]).astype(np.int64),
        np.concatenate([b.values for b in parts]).astype(np.float64),
        parts[0].dim,
    )


def event_rows(spec: FeatureSpec, ev: dict[str, Any], limit: int) -> Batch:
    """A logged event's rows (``ids``, ``ctx``, ``feat``: the context and actions as
    sent) encoded with ``spec``: what ``rank`` encodes for them with that spec."""
    context = named_values(ev.get("ctx") or {}, "context")
    acts = [{"id": a, "features": f} for a, f in zip(ev["ids"], ev["feat"], strict=True)]
    return encode_rows(spec, action_rows(context, acts, limit), limit)


def answer_of(event: dict[str, Any], scores: list[float], ranking: list[int]) -> dict[str, Any]:
    """The rank answer of a decision (its record's ``ev``)."""
    ids, p = event["ids"], event["p"]
    return {
        "event_id": event["id"],
        "action": ids[event["a"]],
        "probability": p[event["a"]],
        "ranking": [{"id": ids[j], "probability": p[j], "score": scores[j]} for j in ranking],
        "version": event["v"],
    }


def first_eligible(scores: np.ndarray, excluded: list[int]) -> Decision:
    """Apprentice mode's decision: the first eligible action, with probability 1."""
    out = set(excluded)
    first = next(j for j in range(scores.size) if j not in out)
    p = np.zeros(scores.size)
    p[first] = 1.0
    rest = sorted((j for j in range(scores.size) if j != first), key=lambda j: (-scores[j], j))
    return Decision(first, 1.0, p, [first, *rest])


def mode_entry(mode: str, dim: int) -> bytes:
    """The log entry switching a decision model to ``mode``."""
    empty = Batch(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), dim)
    return encode_payload(empty, [], mode=mode)


def mode_of(payload: bytes, dim: int) -> str | None:
    if payload[:4] != MAGIC:
        return None
    _, meta = decode_payload(payload, dim)
    mode = meta.get("mode")
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {MODES}")
    return None if mode is None else str(mode)
