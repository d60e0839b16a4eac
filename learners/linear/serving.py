"""Dense rows scored as a service answers them, in one compiled call.

A one-instance ``/predict`` of a CW-family model is mostly call overhead: the CSR
build (``dense_to_csr``), the batch check, ``details_diag`` (scores, the two best
labels, the pair variance) and, for a binary model, the probability map
(``_probabilities_diag``) are four dispatches and a dozen small numpy calls around a
few hundred flops. :func:`dense_answers` runs those same kernels, in the same order on
the same arrays, inside one ``njit`` function, and builds the answers directly, so
its answers are those of ``predict_details`` followed by the probability map, bit for
bit (``tests/service/test_dense_predict_fast_path.py`` compares them).

>>> import numpy as np
>>> from learners.features import FeatureSpec
>>> from learners.linear import make_classifier
>>> clf = make_classifier("arow", dim=2)
>>> _ = clf.update(FeatureSpec.dense(2).encode([[1.0, 0.0], [0.0, 1.0]]), ["a", "b"])
>>> [a["label"] for a in dense_answers(clf, np.array([[2.0, 0.0]]), 1.0, 0.0)]
['a']
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from learners.csr_kernels import dense_to_csr
from learners.linear._kernels import details_diag
from learners.linear._normal import normal_cdf
from learners.linear.calibration import link_is_probit
from learners.linear.probability_map import _probabilities, _probabilities_diag

__all__ = ["dense_answers"]


@njit(cache=True)
def _dense_details(X, w, n_labels, probit, r, a, b):  # pragma: no cover - numba
    ip, ix, vs = dense_to_csr(X)
    s, best, margin, var = details_diag(ip, ix, vs, w, n_labels)
    if n_labels != 2:
        return s, best, margin, var, np.empty(0), np.empty(0)
    s0 = s[:, 0].copy()
    if probit:
        first, second = _probabilities_diag(ip, ix, vs, w, s0, r, a, b)
    else:
        first, second = _probabilities(s0, s0, 0, 0.0, a, b)
    return s, best, margin, var, first, second


def dense_answers(clf: Any, X: np.ndarray, a: float, b: float) -> list[dict[str, Any]] | None:
    """The answers (``label``, ``score``, ``scores``, ``confidence``, and ``probability``
    for a binary model, with the map ``σ(a·z + b)``) for the rows of ``X``, a finite
    float64 ``(n, dim)`` matrix; ``None`` where this path does not apply (no
    covariance, a full covariance, fewer than two labels, another width), for the
    general path to answer (or refuse)."""
    labels = clf.labels_
    n_labels = len(labels)
    if (
        not clf._has_cov
        or clf.covariance == "full"
        or n_labels < 2
        or X.ndim != 2
        or X.shape[1] != clf.dim
        or X.dtype != np.float64
    ):
        return None
    algorithm = clf.algorithm
    probit = link_is_probit(algorithm)
    r = float(clf.params["r"]) if algorithm == "arow" else 0.0
    s, best, margin, var, first, second = _dense_details(
        np.ascontiguousarray(X), clf._w, n_labels, probit, r, a, b
    )
    sqrt, cdf = math.sqrt, normal_cdf
    rows = zip(s.tolist(), best.tolist(), margin.tolist(), var.tolist(), strict=True)
    out = [
        {
            "label": labels[k],
            "score": row[k],
            "scores": dict(zip(labels, row, strict=True)),
            "confidence": cdf(m / sqrt(v)) if v > 0.0 else 0.5,
        }
        for row, k, m, v in rows
    ]
    if n_labels == 2:
        for answer, k, p0, p1 in zip(
            out, best.tolist(), first.tolist(), second.tolist(), strict=True
        ):
            answer["probability"] = p0 if k == 0 else p1
    return out
