"""Probabilities from the linear classifiers' margins: ``/predict``'s ``probability``, and
the progressive log loss and AUC that measure it.

A binary model scores ``labels_[0]`` with s = μ·x (``labels_[1]`` with −s). Before
it learns an example with label y (sign ±1), its margin is m = y·s and, for the
confidence-weighted family, its variance v = xᵀΣx. Each algorithm's *link* reads a
score z = m / scale, and F(z) as a probability of the true label:

- PA, PA-I, PA-II: the logistic F(z) = 1 / (1 + e^−z), z = m (scale 1). PA keeps no
  distribution over weights; the logistic of the hinge margin is the usual reading
  (a margin of 1, where the hinge loss reaches 0, is probability 0.73). Not fitted:
  PA's margins grow with ‖w‖, so this is a fixed link, not a calibration.
- CW, SCW-I, SCW-II: the Gaussian CDF F = Φ with z = m / √v, the probability under
  the weight distribution N(μ, Σ) that w·x has the sign of y (Crammer, Dredze,
  Pereira 2008, eq. 1: Pr_w[y w·x ≥ 0] = Φ(m/√v)); the service's ``confidence`` is
  the same figure for the predicted label (for AROW too, without its r).
- AROW: Φ with z = m / √(v + r). AROW's update is the Kalman (recursive least
  squares) update of a linear-Gaussian model y = w·x + ε, ε ~ N(0, r), towards the
  target margin (Crammer, Kulesza, Dredze 2009, sec. 3 and its RLS connection), so
  the predictive distribution of y·(w·x + ε) is N(m, v + r).

Those links are not calibrated (measured on a9a.t after one pass over a9a, expected
calibration error over 10 bins: CW 0.081, AROW 0.076, SCW-II 0.126): Φ(m/√v) is how
sure the weight distribution is of the sign of s, not how often that sign is right,
and AROW's noise model is that of a regression towards the margin 1. So the
probability the service serves is
:class:`learners.linear.probability_map.ProbabilityMap`'s: the logistic regression
P(labels_[0]) = σ(a·z + b) of the last ``CALIBRATION_EXAMPLES`` progressive scores z
of ``labels_[0]`` (each scored by the model just before it learned it: held-out
scores) with their labels, refit as the model learns (Platt scaling, fit online).
Progressive log loss and AUC score that served probability: the rows of an entry by
the map as it was before the entry (the one ``/predict`` answered with meanwhile).

Log loss is −log p with p clipped to [1e-15, 1 − 1e-15] (a single confident
mistake costs at most 34.5). ROC AUC ranks the examples by the probability of
``labels_[0]`` with ties at half credit, as ``sklearn.metrics.roc_auc_score``.

>>> import numpy as np
>>> round(float(log_loss_sum(np.array([0.0, 2.0]), False)), 6)  # logistic: ln 2 + ln(1 + e^-2)
0.820075
>>> float(roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([False, False, True, True])))
0.75
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "CALIBRATION_EXAMPLES",
    "LINK",
    "PROBABILITY",
    "calibrated_z",
    "expected_calibration_error",
    "link_is_probit",
    "log_loss_sum",
    "margin_z",
    "roc_auc",
]

EPS = 1e-15
LINK = {"pa": "logistic", "pa1": "logistic", "pa2": "logistic",
        "cw": "probit", "arow": "probit", "scw1": "probit", "scw2": "probit"}  # fmt: skip


# The most recent progressive scores the probability map is fit on (about the default
# metrics window: old scores describe older states of the model).
CALIBRATION_EXAMPLES = 1000
# The link's score z of each algorithm (of the true label, before learning it).
_Z = {
    **dict.fromkeys(("pa", "pa1", "pa2"), "z = m = y·(w·x) (the margin)"),
    **dict.fromkeys(("cw", "scw1", "scw2"), "z = m / sqrt(v), m = y·(mu·x), v = x'Sigma x"),
    "arow": "z = m / sqrt(v + r), m = y·(mu·x), v = x'Sigma x",
}
# How each algorithm's pre-update margin becomes the probability of the true label
# (``GET /models/{name}``: ``online_metrics.probability``).
PROBABILITY = {
    algorithm: f"1 / (1 + exp(-a·z)), {z}; a >= 0: the logistic regression (no intercept) "
    f"of the last {CALIBRATION_EXAMPLES} progressive scores (GET /models/{{name}}: "
    "calibration)"
    for algorithm, z in _Z.items()
}


def link_is_probit(algorithm: str) -> bool:
    return LINK[algorithm] == "probit"


def margin_z(algorithm: str, params: dict[str, Any], m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """z of the true label per example (P(true label) = F(z)); v = 0 (x = 0) gives z = 0."""
    if not link_is_probit(algorithm):
        return m.astype(np.float64, copy=True)
    var = v + float(params["r"]) if algorithm == "arow" else v
    with np.errstate(divide="ignore", invalid="ignore"):
        z = m / np.sqrt(var)
    return np.where(var > 0.0, z, 0.0)


@njit(cache=True)
def calibrated_z(mv: np.ndarray, y: np.ndarray, probit: bool, r: float):  # pragma: no cover
    """``margin_z`` of the rows an update recorded, signed for ``labels_[0]``, in one pass.

    ``mv`` (n x 2, or n x 3 with the kernels' "predicted right" column, not read here):
    each row's pre-update (m, v), NaN where not recorded (rows learned while the model
    was multiclass); ``y``: the rows' label codes (0 is ``labels_[0]``);
    ``r``: AROW's r (added to v), else 0.0 with ``probit`` (CW, SCW) or ignored (PA).
    Returns (z of ``labels_[0]``, label is ``labels_[0]``) of the recorded rows. The
    same IEEE operations as ``margin_z`` and ``np.where(pos, z, -z)`` (a division and
    a square root, each correctly rounded), so the values are the same bit for bit;
    one compiled loop instead of seven numpy calls (~30 us of a 100-row update)."""
    n = mv.shape[0]
    count = 0
    for i in range(n):
        if not np.isnan(mv[i, 0]):
            count += 1
    z = np.empty(count)
    pos = np.empty(count, dtype=np.bool_)
    t = 0
    for i in range(n):
        m = mv[i, 0]
        if np.isnan(m):
            continue
        if probit:
            var = mv[i, 1] + r
            zt = m / math.sqrt(var) if var > 0.0 else 0.0
        else:
            zt = m
        p = y[i] == 0
        z[t] = zt if p else -zt
        pos[t] = p
        t += 1
    return z, pos


@njit(cache=True)
def log_loss_sum(z: np.ndarray, probit: bool) -> float:  # pragma: no cover - numba
    """Σ −log clip(F(z_i)), F = Φ (``probit``) or the logistic."""
    total = 0.0
    for i in range(z.shape[0]):
        if probit:
            p = 0.5 * math.erfc(-z[i] / math.sqrt(2.0))
        else:
            p = (
                1.0 / (1.0 + math.exp(-z[i]))
                if z[i] >= 0.0
                else math.exp(z[i]) / (1.0 + math.exp(z[i]))
            )
        total -= math.log(min(max(p, EPS), 1.0 - EPS))
    return total


@njit(cache=True)
def roc_auc(score: np.ndarray, positive: np.ndarray) -> float:  # pragma: no cover - numba
    """Area under the ROC curve (Mann-Whitney U with mid-ranks); NaN when one class
    is absent."""
    n = score.shape[0]
    order = np.argsort(score, kind="mergesort")
    n_pos = 0
    rank_sum = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and score[order[j + 1]] == score[order[i]]:
            j += 1
        mid = 0.5 * (i + j) + 1.0  # the average 1-based rank of the tied run
        for k in range(i, j + 1):
            if positive[order[k]]:
                n_pos += 1
                rank_sum += mid
        i = j + 1
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def expected_calibration_error(p: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """ECE: over ``bins`` equal-width bins of the probability ``p`` of the predicted
    label, Σ n_bin/n · |mean p − accuracy| (``correct``: 1.0 where the prediction was
    right). The figure ``/predict``'s ``probability`` is measured by.

    >>> p, right = np.array([0.95, 0.95, 0.55]), np.array([1.0, 0.0, 1.0])
    >>> round(expected_calibration_error(p, right), 4)  # 2/3 * |.95 - .5| + 1/3 * |.55 - 1|
    0.45
    """
    at = np.minimum((p * bins).astype(np.int64), bins - 1)
    return float(sum(
        (at == b).mean() * abs(p[at == b].mean() - correct[at == b].mean())
        for b in range(bins) if (at == b).any()
    ))  # fmt: skip
