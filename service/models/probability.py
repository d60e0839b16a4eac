"""``probability`` in a binary linear model's predictions: the calibrated probability of
the predicted label (:class:`learners.linear.probability_map.ProbabilityMap`).

The adapter keeps one map per model. Every applied log entry teaches it the entry's
progressive scores (``learn``: the same entries in the same order on every replica,
so every worker serves the same probabilities), and the entry's ``UpdateResult``
then carries the logits the map gave those rows before (``z``, ``probit`` False): the
progressive log loss and AUC score the probability that was being served. The map
travels in the learner's artifact, as ``meta["calibration"]``: in checkpoints (a
restored worker goes on with the same bits) and exports (an import keeps it; an
artifact without one, e.g. from ``learners``, starts a fresh map).

A multiclass model has no calibrated per-label probability (its scores are one
margin per label, not fit to outcomes): its predictions carry none, nor do those of
a model that knows one label. The ``confidence`` beside it is not a probability of
being right (see ``service.api.schemas.Prediction``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from learners.base import UpdateResult
from learners.linear.probability_map import ProbabilityMap, served_probabilities

__all__ = ["META_KEY", "add_probabilities", "describe", "learn", "read_map"]

META_KEY = "calibration"


def read_map(model: Any, meta: dict[str, Any]) -> ProbabilityMap:
    """The map an artifact's ``meta`` carries, else a fresh one (``ValueError`` naming
    ``meta.calibration`` when it is malformed)."""
    data = meta.get(META_KEY)
    if data is None:
        return ProbabilityMap(model.algorithm)
    try:
        return ProbabilityMap.from_json(model.algorithm, data)
    except ValueError as e:
        raise ValueError(f"meta.{META_KEY}: {e}") from None


def learn(pmap: ProbabilityMap, result: UpdateResult) -> UpdateResult:
    """Teach ``pmap`` the progressive scores of an applied entry; the result with their
    served logits in place of the link's scores."""
    z, positive = result.z, result.positive
    if z is None or positive is None or z.shape[0] == 0:
        return result
    return dataclasses.replace(result, z=pmap.learn(z, positive), probit=False)


def add_probabilities(
    model: Any, pmap: ProbabilityMap, batch: Any, predictions: list[dict[str, Any]]
) -> None:
    """Set ``probability`` (of the predicted label) in each prediction of a binary model."""
    labels = model.labels_
    if len(labels) != 2 or not predictions:
        return
    first = labels[0]
    s0 = np.fromiter((p["scores"][first] for p in predictions), np.float64, len(predictions))
    p_first, p_second = served_probabilities(model, batch, s0, pmap.a, pmap.b)
    for p, a, b in zip(predictions, p_first.tolist(), p_second.tolist(), strict=True):
        label = p["label"]
        p["probability"] = a if type(label) is type(first) and label == first else b


def describe(model: Any, pmap: ProbabilityMap) -> dict[str, Any] | None:
    """``GET /models/{name}``'s ``calibration`` of a binary model (None otherwise)."""
    if len(model.labels_) != 2:
        return None
    return {
        "map": "P(labels[0]) = 1 / (1 + exp(-a*z)), z = the link's score "
        "(online_metrics.probability); a >= 0, no intercept (b is 0)",
        "a": pmap.a,
        "b": pmap.b,
        "fit_on": pmap.count,
        "examples": pmap.examples,
    }
