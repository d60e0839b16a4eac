"""A decision model whose context is a raw record (``"features": {"kind": "records",
"bits": n, "fields": {...}}``): the context encoded by the records encoder
(:class:`learners.records.RecordEncoder`, the ``records`` kind's fields, transforms and
422s), the actions' features named values as for ``"kind": "hashed"``
(:mod:`service.models.decision_features`).

An action's row, in ``2**bits`` columns with ``mask = 2**bits - 1`` and
``h(name) = murmurhash3_32(name)`` (32-bit, seed 0, UTF-8;
:func:`learners.feature_keys.murmurhash3_32`), is

- column ``h("id=<action id>") & mask``, value 1: the action's own bias;
- column ``h("a:<name>") & mask``, the value: each action feature (a string ``v`` of
  ``k`` is ``a:k=v``, 1.0);
- for each column ``c`` of the encoded context (value ``x``; the record's columns, each
  once, as the records kind encodes it, ``^constant`` included when ``intercept``):
  column ``((16777619 * c) ^ h("id=<action id>")) & mask``, value ``x`` (the context by
  the action id), and for each action feature ``(name, v)`` column
  ``((16777619 * c) ^ h("a:<name>")) & mask``, value ``x * v`` (context x action
  features). 16777619 is the FNV prime VW crosses namespaces with.

Values landing in one column are summed. No names are built for the crossed features
when ranking: the context's columns come from the encoder's kernel, the action's hashes
once per name. ``/weights`` and ``/explain`` name them ``c:<context feature>|id=<id>``
and ``c:<context feature>|a:<name>`` (:mod:`service.models.decision_names`, which
records them when a reward is learned).

Only stateless encodings are allowed: rows are computed when a ``rank`` decides and are
learned later, so they may not depend on the records seen meanwhile. ``standardize``
(a running mean and variance) and ``idf`` (running document counts) are refused, naming
the field; ``none``, ``log1p``, ``bins``, categorical and text without idf are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from learners.feature_keys import murmurhash3_32
from learners.features import Batch, FeatureError, FeatureSpec
from service.errors import invalid, too_large
from service.models import decision_features as df
from service.models.json_fields import type_name

if TYPE_CHECKING:
    from service.settings import Settings

FNV_PRIME = 16777619
_WHERE = "examples[0].x"  # where the encoder's errors point, for a record of one


def context_features(features: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """A records context's config, checked (the records kind's 422s, naming
    ``features...``) and refused when an encoding learns from the data."""
    from learners.records.config import NumericField, TextField
    from service.models.online_config import records_spec

    spec = records_spec(features, settings)
    for f in spec.encoder.config.fields:
        loc = f"features.fields.{f.name}"
        if isinstance(f, NumericField) and f.transform == "standardize":
            raise invalid(f"{loc}.transform: standardize learns a running mean and variance; "
                          "a decision model's context takes only stateless transforms (none, "
                          "log1p, bins)", f"{loc}.transform")  # fmt: skip
        if isinstance(f, TextField) and f.idf:
            raise invalid(f"{loc}.idf: idf learns document counts; a decision model's context "
                          "takes only stateless text weightings", f"{loc}.idf")  # fmt: skip
    if spec.stateful:  # whatever else may learn: never served
        raise invalid("features: a decision model's context must encode without statistics",
                      "features")  # fmt: skip
    out: dict[str, Any] = spec.to_config()
    return out


def encode_context(spec: FeatureSpec, context: Any) -> tuple[np.ndarray, np.ndarray]:
    """The context record's columns and values (a 422 naming ``context.<field>``)."""
    if context is None:
        context = {}
    if type(context) is not dict:
        raise invalid(f"context: must be an object (a record), got {type_name(context)}",
                      "context")  # fmt: skip
    try:
        b = spec.encoder.encode([context])
    except FeatureError as e:
        loc = e.location
        loc = "context" + loc[len(_WHERE) :] if loc.startswith(_WHERE) else "context"
        raise invalid(f"{loc}: {e.problem}", loc) from None
    return b.indices.astype(np.int64), b.values.astype(np.float64)


def crossed_rows(
    spec: FeatureSpec,
    ctx: tuple[np.ndarray, np.ndarray],
    actions: list[dict[str, Any]],
    max_features: int,
) -> Batch:
    """Every action's row (the module's doc) for the encoded context ``ctx``."""
    mask = spec.dim - 1
    cols, vals = ctx
    spread = FNV_PRIME * cols
    indptr, indices, values = [0], [], []
    for i, a in enumerate(actions):
        feats = df.named_values(a.get("features"), f"actions[{i}].features")
        n = 1 + len(feats) + cols.size * (1 + len(feats))
        if n > max_features:
            loc = f"actions[{i}].features"
            raise too_large(
                f"{loc}: with the context's {cols.size} features this action makes {n} "
                f"features (its own, the context's by the action id, and context x action), "
                f"more than max_features_per_example ({max_features})",
                loc,
            )
        h_id = murmurhash3_32(f"id={a['id']}")
        hs = [murmurhash3_32("a:" + name) for name, _ in feats]
        fv = np.array([v for _, v in feats], dtype=np.float64)
        col = [np.array([h_id, *hs], dtype=np.int64) & mask, (spread ^ h_id) & mask]
        val = [np.concatenate([[1.0], fv]), vals]
        for h, v in zip(hs, fv.tolist(), strict=True):
            col.append((spread ^ h) & mask)
            val.append(vals * v)
        uniq, inv = np.unique(np.concatenate(col), return_inverse=True)
        indices.append(uniq)
        values.append(np.bincount(inv, weights=np.concatenate(val), minlength=uniq.size))
        indptr.append(indptr[-1] + uniq.size)
    return Batch(
        np.array(indptr, dtype=np.int64),
        np.concatenate(indices).astype(np.int64),
        np.concatenate(values).astype(np.float64),
        spec.dim,
    )


def rank_rows(
    spec: FeatureSpec, context: Any, actions: list[dict[str, Any]], limit: int, crossing: str
) -> Batch:
    """The rows a rank encodes for ``context`` and ``actions``, by the model's kind and,
    for a hashed context, its ``crossing`` (:mod:`service.models.decision_crossing`)."""
    from service.models.decision_crossing import crossed_batch, hashed_context

    if spec.kind == "records":
        return crossed_rows(spec, encode_context(spec, context), actions, limit)
    if crossing == "hash":
        return crossed_batch(spec.dim, hashed_context(context), actions, limit, spec.intercept)
    named = df.named_values(context if context is not None else {}, "context")
    return df.encode_rows(spec, df.action_rows(named, actions, limit), limit)


def event_rows(spec: FeatureSpec, ev: dict[str, Any], limit: int, crossing: str) -> Batch:
    """A logged event's rows (its context and actions as sent) encoded with ``spec`` and
    ``crossing``: what ``rank`` encodes for them so."""
    acts = [{"id": a, "features": f} for a, f in zip(ev["ids"], ev["feat"], strict=True)]
    return rank_rows(spec, ev.get("ctx") or {}, acts, limit, crossing)
