"""The probability a binary linear model serves: Platt scaling of its link's score, fit
online on its progressive scores (see :mod:`learners.linear.calibration` for the links
and why they need it).

:class:`ProbabilityMap` keeps the last ``CALIBRATION_EXAMPLES`` progressive scores z of
``labels_[0]`` with their labels and the logistic regression P(``labels_[0]``) =
σ(a·z) fit on them (with a weak Gaussian prior towards the link itself; no intercept
and a ≥ 0, so the answered label's probability is never below 1/2: ``fit_logistic``);
:func:`served_probabilities` applies it to the rows a model scores. (``b``, kept in the
state's form, is always 0.)

>>> m = ProbabilityMap("pa", size=4)
>>> m.learn(np.array([2.0, -1.0, 3.0]), np.array([True, False, True])).tolist()
[2.0, -1.0, 3.0]
>>> r = ProbabilityMap.from_json("pa", m.to_json(), 4)
>>> round(m.a, 3), m.examples, (r.a, r.b) == (m.a, m.b)
(1.372, 3, True)
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
from numba import njit

from learners.linear.calibration import CALIBRATION_EXAMPLES, link_is_probit, margin_z

__all__ = [
    "MAX_COEFFICIENT",
    "MAX_Z",
    "PRIOR_PRECISION",
    "ProbabilityMap",
    "fit_logistic",
    "predict_z",
    "prior_slope",
    "served_probabilities",
    "sigmoid",
]

# The map's Gaussian prior, worth about one example: the link's own slope
# (``prior_slope``) and no intercept, so a model that has learned little serves its link.
PRIOR_PRECISION = 1.0
# Bounds a fit always keeps: its objective at its minimum is at most that at (0, 0),
# n·ln 2 + a0²/2, so |a − a0| and |b| stay below √(2·1000·ln 2 + 1.702²) = 37.3.
MAX_COEFFICIENT = 100.0
# Scores are kept (for the fit) within ±MAX_Z: beyond it every map gives 0 or 1 anyway.
MAX_Z = 1e4


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
    """(a, 0) with a ≥ 0 minimising Σ log(1 + e^t) − y·t + prior/2·(a − a0)², t = a·z:
    Newton's method from the given a, halving a step that would not lower the
    objective, until the step or the decrease it promises is below the rounding of the
    sums; then a clipped at 0. The map has no intercept (``b`` stays 0) and a slope that
    is never negative, so its threshold is the model's decision boundary: the label a
    model answers (its margin's sign) always has a probability of at least 1/2 (issue
    31 item 1: with an intercept, 283 of Adult's 16,281 test rows were answered ``>50K``
    at 0.44). The same entries from the same start give the same bits."""
    b = 0.0
    f, ga, _, haa, _, _ = _pass(z, y, a, b, a0, prior)
    if not math.isfinite(f):  # a start far off for these scores: from the prior instead
        a = a0
        f, ga, _, haa, _, _ = _pass(z, y, a, b, a0, prior)
    for _ in range(50):
        da = ga / haa
        # converged: the step, or the decrease it promises (the Newton decrement), is
        # below what the sums' rounding leaves meaningful
        if abs(da) <= 1e-10 * (1.0 + abs(a)):
            break
        if ga * da <= 1e-14 * (1.0 + abs(f)):
            break
        step = 1.0
        for _ in range(30):
            na = a - step * da
            nf, nga, _, nhaa, _, _ = _pass(z, y, na, b, a0, prior)
            if nf < f:
                break
            step *= 0.5
        if not nf < f:  # no step lowers it (the rounding floor): a is the minimum
            break
        a, f, ga, haa = na, nf, nga, nhaa
    return max(a, 0.0), 0.0


@njit(cache=True)
def _keep_scores(zbuf, ybuf, start, count, size, z, y, max_z):  # pragma: no cover - numba
    """Append the finite scores of ``z`` (clipped to ±``max_z``) and their labels to the
    kept ``zbuf[start : start + count]`` (at most ``size``, oldest dropped; the buffers
    hold ``2 * size``, the kept ones moved to the front when the end is reached).
    Returns (finite scores in ``z``, start, count): all of them count as learned, even
    those beyond the window's room."""
    m = 0
    for i in range(z.shape[0]):
        m += math.isfinite(z[i])  # a link's z is finite; never let one poison the fit
    if m == 0:
        return 0, start, count
    n = min(m, size)  # only the last ``size`` of the finite ones can stay
    end = start + count
    if end + n > 2 * size:  # move the scores still kept to the front
        keep_n = min(count, size - n)
        for k in range(keep_n):
            zbuf[k] = zbuf[end - keep_n + k]
            ybuf[k] = ybuf[end - keep_n + k]
        start, count, end = 0, keep_n, keep_n
    skip = m - n
    for i in range(z.shape[0]):
        zi = z[i]
        if not math.isfinite(zi):
            continue
        if skip > 0:
            skip -= 1
            continue
        zbuf[end] = min(max(zi, -max_z), max_z)
        ybuf[end] = y[i]
        end += 1
    count += n
    if count > size:
        start += count - size
        count = size
    return m, start, count


class ProbabilityMap:
    """P(``labels_[0]``) = σ(a·z + b): Platt scaling of a binary model's link score z,
    refit on the last ``size`` progressive scores as the model learns.

    ``learn(z, positive)`` takes an update's ``UpdateResult.z`` and ``positive`` (z of
    ``labels_[0]`` before each row was learned, and whether the row's label was
    ``labels_[0]``) and returns their logits a·z + b under the map as it was before
    (what was served for them). It refits once at least ``size // 100`` scores (1 at
    first) came in since the last fit, from the last (a, b) (one or two Newton steps).
    ``to_json`` keeps (a, b), the count since the fit and the scores (oldest first,
    base64 float64 and uint8): a restored map goes on with the same bits."""

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
        zs = np.ascontiguousarray(z, dtype=np.float64)
        ys = np.ascontiguousarray(positive, dtype=np.bool_)
        # one kernel call: a one-example update's bookkeeping was ~10 us of numpy calls
        n, self.start, self.count = _keep_scores(
            self.z, self.y, self.start, self.count, self.size, zs, ys, MAX_Z
        )
        if not n:
            return served
        self.examples += n
        self.pending += n
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
        # (a map kept before the intercept was dropped serves as if fit without it until
        # its next fit: never a probability under 1/2 for the answered label)
        out.a, out.b = max(float(data["a"]), 0.0), 0.0
        return out
