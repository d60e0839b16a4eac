"""``GET /models/{name}/weights``: the largest positive and negative weights of an
online model, with the confidence of each, by feature.

Per label (a classifier scores label ``L`` with ``w_L·x``; a ranker has one ``w``)::

    {"label": "+1",
     "positive": [{"index": 17, "weight": 0.93, "variance": 0.012, "names": ["age"]}, ...],
     "negative": [...]}

``positive`` holds the ``top`` largest weights above 0, largest first; ``negative``
the ``top`` smallest below 0, most negative first (ties: lower index first).
``variance`` is the weight's variance Σ_ii (the diagonal of the covariance, also
for ``covariance: "full"``): the confidence-weighted learners' (CW, AROW, SCW)
uncertainty about the weight, which shrinks as the feature is seen; ``null`` for
PA and RankSVM, which keep no covariance. ``names`` (hashed and records features
only; a records model's are the raw features' names, ``age#3``, ``job=clerk``; not yet
for one with standardize or idf, see ``feature_names.named``) are the names recorded at
that index (:mod:`service.models.feature_names`): several names
are a hash collision (``"collision": true``); none recorded gives ``[]``.

A binary classifier scores its second label with −w of its first: both are listed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from learners.feature_names import FeatureNames
from learners.features import FeatureSpec
from learners.intercept import INTERCEPT_NAME
from service.errors import invalid
from service.models.feature_names import named

MAX_TOP = 1000


def _tops(w: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the ``k`` largest weights > 0 (descending) and ``k`` smallest < 0."""
    out = []
    for sign in (1.0, -1.0):
        # the candidates first: a hashed model's weights are mostly 0, and a partial
        # sort over a million equal values is slow (0.4 s measured at 2**20)
        cand = np.flatnonzero(w > 0 if sign > 0 else w < 0)
        s = sign * w[cand]
        if cand.shape[0] > k:  # all those at least the k-th largest (ties at the edge)
            keep = s >= np.partition(s, -k)[-k]
            cand, s = cand[keep], s[keep]
        out.append(cand[np.lexsort((cand, -s))][:k])
    return out[0], out[1]


def _entries(
    w: np.ndarray, var: np.ndarray | None, idx: np.ndarray, names: dict[int, list[str]] | None
) -> list[dict[str, Any]]:
    rows = []
    for i in idx.tolist():
        e: dict[str, Any] = {
            "index": i,
            "weight": float(w[i]),
            "variance": None if var is None else float(var[i]),
        }
        if names is not None:
            found = names.get(i, [])
            e["names"] = found
            e["collision"] = len(found) > 1
        rows.append(e)
    return rows


def report(
    by_label: list[tuple[Any, np.ndarray, np.ndarray | None]],
    spec: FeatureSpec,
    feature_names: FeatureNames | None,
    top: int,
) -> list[dict[str, Any]]:
    """The ``classes`` of the answer from ``(label, w, var)`` triples."""
    picked = [(lab, w, var, *_tops(w, top)) for lab, w, var in by_label]
    names = None
    if named(spec):
        parts = [np.concatenate([p, n]) for *_, p, n in picked]
        wanted = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        bits = int(spec.bits or 0)
        names = feature_names.names_at(wanted, bits) if feature_names is not None else {}
        column = spec.intercept_column
        if column is not None:  # the constant is no name a client sent: never recorded
            names[column] = [INTERCEPT_NAME, *names.get(column, [])]
    return [
        {
            "label": lab,
            "positive": _entries(w, var, pos, names),
            "negative": _entries(w, var, neg, names),
        }
        for lab, w, var, pos, neg in picked
    ]


def linear_weights(model: Any, spec: FeatureSpec, top: int, label: str | None) -> dict[str, Any]:
    labels = list(model.labels_)
    if label is not None:
        labels = [lab for lab in labels if str(lab) == label]
        if not labels:
            known = ", ".join(repr(str(lab)) for lab in model.labels_[:20]) or "none yet"
            raise invalid(
                f"label: {label!r} is not a label of the model (labels: {known})", "label"
            )
    by_label = [(lab, *model.label_weights(lab)) for lab in labels]
    return {"classes": report(by_label, spec, model.feature_names_, top)}


def ranker_weights(model: Any, spec: FeatureSpec, top: int, label: str | None) -> dict[str, Any]:
    if label is not None:
        raise invalid(
            "label: a ranker has no labels (it scores items with one weight vector)", "label"
        )
    w = np.asarray(model.coef_)
    return {"classes": report([(None, w, None)], spec, model.feature_names_, top)}
