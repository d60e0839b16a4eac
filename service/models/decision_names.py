"""The names of a decision model's columns (:mod:`service.models.decision`), for
``GET /models/{name}/weights`` and ``POST /models/{name}/explain``.

An action's row (:mod:`service.models.decision_features`,
:mod:`service.models.decision_records`) is named, for both kinds of context, as

- ``id=<action id>``: the action's own bias;
- ``a:<name>``: an action feature (``a:topic=t1`` for a string value);
- ``c:<context feature>|id=<action id>``: a context feature crossed with the action id;
- ``c:<context feature>|a:<name>``: a context feature times an action feature;
- ``^constant`` (a hashed context only): the constant every row holds.

A hashed context's ``<context feature>`` is the name sent (``age``, ``job=clerk``); with
``"crossing": "names"`` the crosses' names are the strings hashed, with ``"hash"`` (the
default) their columns are crossed from the name's column as a records context's are. A records
context's is what the records encoder names the column (``age#3``, ``job=clerk``,
``query^red``, ``job=clerk*sex=Male``, ``^constant``: as ``/explain`` of a records model
lists them); its crosses are no hashed string (their column is
``((16777619·c) ^ h(<action part>)) & mask``), so each name is kept with that value.

**When they are recorded**: when a reward is learned (``apply``), the names of the chosen
action's row (the only row a reward changes weights of: a column with a learned weight
has its name). The log entry holds the event's context and actions as sent, so the map
is a pure function of the log as for the other kinds (every worker, every follower, a
replay make the same one; checkpoints carry it). ``rank`` does nothing more. Lazily: a
learned row whose every column has a name already builds none (building them costs
about two encodings of the context, ~0.3 ms for an Adult record; after warm-up almost
every row is skipped). So a new name is recorded when its row has some column without a
name: a name whose row is all named already (it collides with recorded names wherever it
lands) is not recorded, and ``collision`` shows the collisions among the names recorded.
Bound: the model's ``max_feature_names`` (the setting when the model was created, kept in
its config; 100k for a model made before), the first names first; once full, nothing is
built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import numpy as np

from learners.feature_keys import hashed_indices, murmurhash3_32
from learners.feature_names import FeatureNames
from learners.features import Batch, FeatureError, FeatureSpec
from learners.intercept import INTERCEPT_NAME
from service.errors import invalid
from service.models import decision_features as df
from service.models.decision_records import FNV_PRIME

if TYPE_CHECKING:
    from service.settings import Settings

_FULL = 0xFFFFFFFF
_NO_LIMIT = 1 << 30
EXPLAIN_MEMBERS = ("context", "actions")
# a names map -> (its length, the columns its names are at): derived, for the lazy test
_NAMED: WeakKeyDictionary[FeatureNames, tuple[int, set[int]]] = WeakKeyDictionary()


def row_names(
    spec: FeatureSpec, crossing: str, context: Any, action_id: str, features: Any
) -> tuple[list[str], list[int]]:
    """The names of one action's row and, for each, the 32-bit value its column is masked
    from (``value & (2**bits - 1)``); repeats possible (a context name listed twice).
    ``crossing``: the model's (:mod:`service.models.decision_crossing`)."""
    feats = df.named_values(features, "features")
    if spec.kind != "records" and crossing == "names":
        ctx = df.named_values(context if context is not None else {}, "context")
        row = df.action_rows(ctx, [{"id": action_id, "features": features}], _NO_LIMIT)[0]
        names = list(row)  # (and the constant's column: named by /weights' report)
        return names, hashed_indices(names, _FULL).tolist()
    own = [f"id={action_id}", *("a:" + n for n, _ in feats)]
    hs = [murmurhash3_32(n) for n in own]
    names, hashes = list(own), list(hs)
    seen: set[tuple[str, int]] = set()
    for cname, col in _context_columns(spec, context):
        if (cname, col) in seen:
            continue
        seen.add((cname, col))
        spread = FNV_PRIME * col
        names.extend(f"c:{cname}|{o}" for o in own)
        hashes.extend(((spread ^ h) & _FULL) for h in hs)
    return names, hashes


def _context_columns(spec: FeatureSpec, context: Any) -> list[tuple[str, int]]:
    """The context's (name, column) pairs, crossed by hash: a records context's as its
    encoder names them, a hashed context's names as sent at their hashes' columns."""
    context = context if context is not None else {}
    if spec.kind == "records":
        return [(cname, col) for cname, col, _ in spec.encoder.explain(context)]
    named = [n for n, _ in df.named_values(context, "context")]
    mask = spec.dim - 1
    return list(zip(named, (hashed_indices(named, _FULL) & mask).tolist(), strict=True))


def _named_columns(names: FeatureNames, spec: FeatureSpec) -> set[int]:
    """The columns some recorded name is at (derived from the map, rebuilt when the map
    was not grown here, e.g. read from a checkpoint); the constant's column included."""
    got = _NAMED.get(names)
    if got is None or got[0] != len(names):
        mask = spec.dim - 1
        hashes = names.to_arrays()["feature_names_hash"].astype(np.int64) & mask
        cols = set(hashes.tolist())
        if spec.intercept_column is not None:
            cols.add(spec.intercept_column)
        got = (len(names), cols)
        _NAMED[names] = got
    return got[1]


def record(
    model: Any, spec: FeatureSpec, crossing: str, events: list[dict[str, Any]], learned: Batch
) -> None:
    """Add the names of each event's chosen action's row (``learned``: those rows, in
    order) to the model's map (``apply``, after the events are learned). Lazily: a row
    whose every column has a name already is skipped, none built; nothing once full."""
    names: FeatureNames | None = getattr(model, "feature_names_", None)
    if names is None:
        return
    mask = spec.dim - 1
    for i, ev in enumerate(events):
        if names.full:
            return
        named = _named_columns(names, spec)
        cols = learned.indices[learned.indptr[i] : learned.indptr[i + 1]].tolist()
        if all(c in named for c in cols):
            continue
        a = int(ev["a"])
        try:
            found = row_names(spec, crossing, ev.get("ctx"), str(ev["ids"][a]), ev["feat"][a])
        except (FeatureError, ValueError, TypeError, KeyError, IndexError):
            continue  # (rank encoded it: not reached) names are never worth a refusal
        names.add_hashed(*found)
        named.update(h & mask for h in found[1])  # (all added: the map was not full)
        _NAMED[names] = (len(names), named)


def set_limit(model: Any, limit: int) -> None:
    """Bound the model's names map by the model's ``max_feature_names``."""
    names = getattr(model, "feature_names_", None)
    if names is not None:
        names.limit = min(int(limit), names.limit)


def columns(
    spec: FeatureSpec, crossing: str, context: Any, action_id: str, features: Any
) -> dict[int, list[str]]:
    """The names of one action's row by column (several: a collision)."""
    names, hashes = row_names(spec, crossing, context, action_id, features)
    mask = spec.dim - 1
    out: dict[int, list[str]] = {}
    if spec.intercept_column is not None:
        out[spec.intercept_column] = [INTERCEPT_NAME]
    for n, h in zip(names, hashes, strict=True):
        at = out.setdefault(h & mask, [])
        if n not in at:
            at.append(n)
    return out


def explain_rows(
    spec: FeatureSpec,
    crossing: str,
    model: Any,
    ids: list[str],
    context: Any,
    feats: list[Any],
    batch: Any,
) -> list[dict[str, Any]]:
    """Each action's columns (its encoded row), their names, the weights in the reward's
    units (``coef_``) and contributions; ``score`` is the model's (as ``rank`` scores)."""
    scores, _ = model.predict_details(batch)
    coef = model.coef_
    m = float(model.y_mean_)  # ŷ = m + coef_·x: the rewards' mean, 0 before any
    out = []
    for j, aid in enumerate(ids):
        lo, hi = int(batch.indptr[j]), int(batch.indptr[j + 1])
        cols = batch.indices[lo:hi].tolist()
        vals = batch.values[lo:hi].tolist()
        named = columns(spec, crossing, context, aid, feats[j])
        rows = []
        total = m
        for c, v in zip(cols, vals, strict=True):
            w = float(coef[c])
            found = named.get(c, [])
            rows.append({"index": c, "names": found, "collision": len(found) > 1,
                         "value": v, "weight": w, "contribution": v * w})  # fmt: skip
            total += v * w
        score = float(scores[j])
        # only SGD's clip to the range of rewards seen makes the score differ from the sum
        clipped = not np.isclose(total, score, rtol=1e-9, atol=1e-12)
        out.append({"id": aid, "score": score, "features": rows, "clipped": bool(clipped)})
    return out


def explain(adapter: Any, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """``POST /models/{name}/explain`` of a decision model: a rank body (``context``,
    ``actions``), every action's score taken apart (:func:`explain_rows`)."""
    for k in body:
        if k in ("x", "instances"):
            shape = '{"context": ..., "actions": [...]}'
            raise invalid(f"{k}: a decision model explains a rank body ({shape}): each "
                          "action's score for the context", k)  # fmt: skip
        if k not in EXPLAIN_MEMBERS:
            raise invalid(f"{k}: unknown field (a decision model's explain body has only "
                          f"{', '.join(EXPLAIN_MEMBERS)})", k)  # fmt: skip
    if "actions" not in body:
        raise invalid("actions: field required (the actions to score for the context)",
                      "actions")  # fmt: skip
    x = adapter.encode_rank(body, settings)
    model = adapter.model
    rows = explain_rows(
        adapter.spec, adapter.crossing, model, x.ids, x.context, x.features, x.batch
    )
    for j, r in enumerate(rows):
        numbers = [r["score"], *(f["contribution"] for f in r["features"])]
        if not np.isfinite(numbers).all():  # as /predict: never a JSON null for a number
            loc = f"actions[{j}]"
            raise invalid(f"{loc}: a contribution or score overflows (not finite)", loc)
    return {"reward_model": adapter.reward_model_name,
            "baseline": float(model.y_mean_), "actions": rows}  # fmt: skip
