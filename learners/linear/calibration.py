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
  the same figure for the predicted label.
- AROW: Φ with z = m / √(v + r). AROW's update is the Kalman (recursive least
  squares) update of a linear-Gaussian model y = w·x + ε, ε ~ N(0, r), towards the
  target margin (Crammer, Kulesza, Dredze 2009, sec. 3 and its RLS connection), so
  the predictive distribution of y·(w·x + ε) is N(m, v + r).

Those links are not calibrated (measured on a9a.t after one pass over a9a, expected
calibration error over 10 bins: CW 0.081, AROW 0.076, SCW-II 0.126): Φ(m/√v) is how
sure the weight distribution is of the sign of s, not how often that sign is right,
and AROW's noise model is that of a regression towards the margin 1. So the
probability the service serves is :class:`ProbabilityMap`'s: the logistic regression
P(labels_[0]) = σ(a·z + b) of the last ``CALIBRATION_EXAMPLES`` progressive scores z
of ``labels_[0]`` (each scored by the model just before it learned it: held-out
scores) with their labels, refit after each log entry (Platt scaling, fit online).
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

import base64
import math
from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "CALIBRATION_EXAMPLES",
    "LINK",
    "PROBABILITY",
    "ProbabilityMap",
    "calibrated_z",
    "fit_logistic",
    "link_is_probit",
    "log_loss_sum",
    "margin_z",
    "predict_z",
    "roc_auc",
    "served_probabilities",
    "sigmoid",
]

EPS = 1e-15
LINK = {"pa": "logistic", "pa1": "logistic", "pa2": "logistic",
        "cw": "probit", "arow": "probit", "scw1": "probit", "scw2": "probit"}  # fmt: skip


# The most recent progressive scores the probability map is fit on (about the default
# metrics window: old scores describe older states of the model).
CALIBRATION_EXAMPLES = 1000
# The map's Gaussian prior, worth about one example: the link's own slope
# (``prior_slope``) and no intercept, so a model that has learned little serves its link.
PRIOR_PRECISION = 1.0
# Bounds a fit always keeps: its objective at its minimum is at most that at (0, 0),
# n·ln 2 + a0²/2, so |a − a0| and |b| stay below √(2·1000·ln 2 + 1.702²) = 37.3.
MAX_COEFFICIENT = 100.0
# Scores are kept (for the fit) within ±MAX_Z: beyond it every map gives 0 or 1 anyway.
MAX_Z = 1e4

# The link's score z of each algorithm (of the true label, before learning it).
_Z = {
    **dict.fromkeys(("pa", "pa1", "pa2"), "z = m = y·(w·x) (the margin)"),
    **dict.fromkeys(("cw", "scw1", "scw2"), "z = m / sqrt(v), m = y·(mu·x), v = x'Sigma x"),
    "arow": "z = m / sqrt(v + r), m = y·(mu·x), v = x'Sigma x",
}
# How each algorithm's pre-update margin becomes the probability of the true label
# (``GET /models/{name}``: ``online_metrics.probability``).
PROBABILITY = {
    algorithm: f"1 / (1 + exp(-(a·z + b))), {z}; (a, b): the logistic regression of the "
    f"last {CALIBRATION_EXAMPLES} progressive scores (GET /models/{{name}}: calibration)"
    for algorithm, z in _Z.items()
}


def link_is_probit(algorithm: str) -> bool:
    return LINK[algorithm] == "probit"


def prior_slope(algorithm: str) -> float:
    """The map's slope before it has seen anything: the link's own (σ(1.702·z) is
    within 0.0095 of Φ(z); the logistic link is σ(z))."""
    return 1.702 if link_is_probit(algorithm) else 1.0


def sigmoid(t: np.ndarray) -> np.ndarray:
    """σ(t) = 1 / (1 + e^−t) without overflow."""
    e = np.exp(-np.abs(t))
    return np.where(t >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e))


def predict_z(clf: Any, batch: Any, s0: np.ndarray) -> np.ndarray:
    """The link's z of ``labels_[0]`` for each row of ``batch`` (``s0``: its scores μ·x),
    as ``margin_z`` gives it at learning time (the same operations)."""
    algorithm = clf.algorithm
    if not link_is_probit(algorithm):
        return np.array(s0, dtype=np.float64)
    v = _variances(clf, batch)
    return margin_z(algorithm, clf.params, np.asarray(s0, dtype=np.float64), v)


def served_probabilities(
    clf: Any, batch: Any, s0: np.ndarray, a: float, b: float
) -> tuple[np.ndarray, np.ndarray]:
    """(P(``labels_[0]``), P(``labels_[1]``)) = (σ(t), σ(−t)), t = a·z + b, per row of a
    batch ``predict_details`` just scored (so validated), in one kernel call: the
    formulas of ``predict_z`` and ``ProbabilityMap.logits``."""
    algorithm = clf.algorithm
    s0 = np.asarray(s0, dtype=np.float64)
    if not link_is_probit(algorithm):
        return _probabilities(s0, s0, 0, 0.0, a, b)
    r = float(clf.params["r"]) if algorithm == "arow" else 0.0
    if clf.covariance == "full":
        return _probabilities(s0, _variances(clf, batch), 1, r, a, b)
    ip, ix, vs = _csr(batch)
    return _probabilities_diag(ip, ix, vs, clf._w, s0, r, a, b)  # the usual case: one call


def _csr(batch: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.ascontiguousarray(batch.indptr, dtype=np.int64),
        np.ascontiguousarray(batch.indices, dtype=np.int64),
        np.ascontiguousarray(batch.values, dtype=np.float64),
    )


def _variances(clf: Any, batch: Any) -> np.ndarray:
    """xᵀΣx of each row (the binary model's one Σ)."""
    from learners.linear import _kernels as K
    from learners.linear import _kernels_full as KF

    ip, ix, vs = _csr(batch)
    n = ip.shape[0] - 1
    variance = KF.pair_variance_full if clf.covariance == "full" else K.pair_variance_diag
    out: np.ndarray = variance(
        ip, ix, vs, clf._cov, np.zeros(n, np.int64), np.full(n, -1, np.int64)
    )
    return out


@njit(cache=True)
def _probabilities(s0, v, probit, r, a, b):  # pragma: no cover - numba
    n = s0.shape[0]
    first = np.empty(n)
    second = np.empty(n)
    for i in range(n):
        _probability(s0[i], v[i], probit, r, a, b, first, second, i)
    return first, second


@njit(cache=True)
def _probabilities_diag(indptr, indices, values, w, s0, r, a, b):  # pragma: no cover - numba
    """``_probabilities`` with each row's xᵀΣx from a diagonal state ``w`` (R, d, 2)."""
    n = s0.shape[0]
    first = np.empty(n)
    second = np.empty(n)
    for i in range(n):
        v = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v += w[0, indices[p], 1] * (values[p] * values[p])
        _probability(s0[i], v, True, r, a, b, first, second, i)
    return first, second


@njit(cache=True)
def _probability(s, v, probit, r, a, b, first, second, i):  # pragma: no cover - numba
    z = s
    if probit:
        var = v + r
        z = s / math.sqrt(var) if var > 0.0 else 0.0
    t = a * z + b
    e = math.exp(-abs(t))
    big, small = 1.0 / (1.0 + e), e / (1.0 + e)
    if t >= 0.0:
        first[i], second[i] = big, small
    else:
        first[i], second[i] = small, big


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

    ``mv`` (n x 2): each row's pre-update (m, v), NaN where not recorded (rows learned
    while the model was multiclass); ``y``: the rows' label codes (0 is ``labels_[0]``);
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


@njit(cache=True)
def _pass(z, y, a, b, a0, prior):  # pragma: no cover - numba
    """The objective of ``fit_logistic`` at (a, b), its gradient and its Hessian."""
    f = 0.5 * prior * ((a - a0) ** 2 + b * b)
    ga, gb = prior * (a - a0), prior * b
    haa, hab, hbb = prior, 0.0, prior
    for i in range(z.shape[0]):
        zi = z[i]
        t = a * zi + b
        e = math.exp(-abs(t))
        p = 1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e)
        g = p
        f += max(t, 0.0) + math.log1p(e)  # log(1 + e^t)
        if y[i]:
            f -= t
            g -= 1.0
        w = p * (1.0 - p)
        ga += g * zi
        gb += g
        haa += w * zi * zi
        hab += w * zi
        hbb += w
    return f, ga, gb, haa, hab, hbb


@njit(cache=True)
def fit_logistic(z, y, a, b, a0, prior):  # pragma: no cover - numba
    """(a, b) minimising Σ log(1 + e^t) − y·t + prior/2·((a − a0)² + b²), t = a·z + b:
    Newton's method from the given (a, b), halving a step that would not lower the
    objective, until the step or the decrease it promises is below the rounding of
    the sums. The same entries from the same start give the same bits."""
    f, ga, gb, haa, hab, hbb = _pass(z, y, a, b, a0, prior)
    if not math.isfinite(f):  # a start far off for these scores: from the prior instead
        a, b = a0, 0.0
        f, ga, gb, haa, hab, hbb = _pass(z, y, a, b, a0, prior)
    for _ in range(50):
        det = haa * hbb - hab * hab
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        # converged: the step, or the decrease it promises (the Newton decrement), is
        # below what the sums' rounding leaves meaningful
        if abs(da) + abs(db) <= 1e-10 * (1.0 + abs(a) + abs(b)):
            break
        if ga * da + gb * db <= 1e-14 * (1.0 + abs(f)):
            break
        step = 1.0
        for _ in range(30):
            na, nb = a - step * da, b - step * db
            nf, nga, ngb, nhaa, nhab, nhbb = _pass(z, y, na, nb, a0, prior)
            if nf < f:
                break
            step *= 0.5
        if not nf < f:  # no step lowers it (the rounding floor): (a, b) is the minimum
            break
        a, b, f, ga, gb, haa, hab, hbb = na, nb, nf, nga, ngb, nhaa, nhab, nhbb
    return a, b


class ProbabilityMap:
    """P(``labels_[0]``) = σ(a·z + b): Platt scaling of a binary model's link score z,
    refit on the last ``size`` progressive scores as the model learns.

    ``learn(z, positive)`` takes an update's ``UpdateResult.z`` and ``positive`` (z of
    ``labels_[0]`` before each row was learned, and whether the row's label was
    ``labels_[0]``) and returns their logits a·z + b under the map as it was before
    (what was served for them). It refits once at least ``size // 100`` scores (1 at
    first) came in since the last fit, from the last (a, b) (one or two Newton steps).
    ``to_json`` keeps (a, b), the count since the fit and the scores (oldest first,
    base64 float64 and uint8): a restored map goes on with the same bits.

    >>> m = ProbabilityMap("pa", size=4)
    >>> m.learn(np.array([2.0, -1.0, 3.0]), np.array([True, False, True])).tolist()
    [2.0, -1.0, 3.0]
    >>> r = ProbabilityMap.from_json("pa", m.to_json(), 4)
    >>> round(m.a, 3), m.examples, (r.a, r.b) == (m.a, m.b)
    (1.372, 3, True)
    """

    def __init__(self, algorithm: str, size: int = CALIBRATION_EXAMPLES) -> None:
        self.a0 = prior_slope(algorithm)
        self.size = size
        # the kept scores are z[start : start + count], oldest first (twice the room:
        # moved to the front when full, so they are always one contiguous slice)
        self.z = np.zeros(2 * size)
        self.y = np.zeros(2 * size, dtype=np.bool_)
        self.start = 0
        self.count = 0
        self.pending = 0  # scores since the last fit
        self.examples = 0  # learned over the map's life
        self.a, self.b = self.a0, 0.0

    def logits(self, z: np.ndarray) -> np.ndarray:
        """a·z + b of ``labels_[0]``, per row."""
        return self.a * np.asarray(z, dtype=np.float64) + self.b

    def learn(self, z: np.ndarray, positive: np.ndarray) -> np.ndarray:
        served = self.logits(z)
        zs = np.asarray(z, dtype=np.float64)
        ys = np.asarray(positive, dtype=np.bool_)
        keep = np.isfinite(zs)  # a link's z is finite; never let one poison the fit
        if not keep.all():
            zs, ys = zs[keep], ys[keep]
        zs = np.clip(zs, -MAX_Z, MAX_Z)
        n, size = zs.shape[0], self.size
        if not n:
            return served
        self.examples += n
        self.pending += n
        if n > size:
            zs, ys, n = zs[-size:], ys[-size:], size
        end = self.start + self.count
        if end + n > 2 * size:  # move the scores still kept to the front
            keep_n = min(self.count, size - n)
            self.z[:keep_n] = self.z[end - keep_n : end]
            self.y[:keep_n] = self.y[end - keep_n : end]
            self.start, self.count, end = 0, keep_n, keep_n
        self.z[end : end + n], self.y[end : end + n] = zs, ys
        self.count += n
        if self.count > size:
            self.start += self.count - size
            self.count = size
        if self.pending >= max(1, self.count // 100):
            self._fit()
        return served

    def _fit(self) -> None:
        kept = slice(self.start, self.start + self.count)
        a, b = fit_logistic(self.z[kept], self.y[kept], self.a, self.b, self.a0, PRIOR_PRECISION)
        self.a, self.b, self.pending = float(a), float(b), 0

    def to_json(self) -> dict[str, Any]:
        kept = slice(self.start, self.start + self.count)
        return {
            "a": self.a,
            "b": self.b,
            "examples": self.examples,
            "pending": self.pending,
            "z": base64.b64encode(self.z[kept].astype("<f8").tobytes()).decode(),
            "y": base64.b64encode(self.y[kept].astype(np.uint8).tobytes()).decode(),
        }

    @classmethod
    def from_json(
        cls, algorithm: str, data: Any, size: int = CALIBRATION_EXAMPLES
    ) -> ProbabilityMap:
        """Read ``to_json``'s form; ``ValueError`` naming what is wrong."""
        keys = {"a", "b", "examples", "pending", "z", "y"}
        if not isinstance(data, dict) or set(data) != keys:
            raise ValueError(f"must be an object with {', '.join(sorted(keys))}")
        for key in ("a", "b"):
            v = data[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"{key}: must be a finite number, got {v!r}")
            if abs(v) > MAX_COEFFICIENT:  # no fit reaches it (see MAX_COEFFICIENT)
                raise ValueError(f"{key}: must be within ±{MAX_COEFFICIENT:g}, got {v!r}")
        examples, pending = data["examples"], data["pending"]
        for key, v in (("examples", examples), ("pending", pending)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= max(examples, 0):
                raise ValueError(f"{key}: must be an integer in [0, examples], got {v!r}")
        try:
            z = np.frombuffer(base64.b64decode(data["z"], validate=True), dtype="<f8")
            y = np.frombuffer(base64.b64decode(data["y"], validate=True), dtype=np.uint8)
        except (TypeError, ValueError):
            raise ValueError("z and y: must be base64 of float64 and uint8 values") from None
        if z.shape != y.shape or z.shape[0] > min(size, examples):
            raise ValueError(f"z and y: must hold as many values, at most {size} and examples")
        if not (np.abs(z) <= MAX_Z).all() or (y > 1).any():
            raise ValueError(f"z: must be within ±{MAX_Z:g}; y: 0 or 1")
        out = cls(algorithm, size)
        n = z.shape[0]
        out.z[:n], out.y[:n], out.count = z, y.astype(np.bool_), n
        out.examples, out.pending = examples, pending
        out.a, out.b = float(data["a"]), float(data["b"])
        return out
