"""AROW regression: the recursive-least-squares / Kalman update (Vaits & Crammer, ALT 2011).

With p = μ·x and v = xᵀΣx for the standardised target t
(:mod:`learners.regression._model`):

    μ ← μ + (t − p)·Σx / (v + r)
    Σ ← Σ − ΣxxᵀΣ / (v + r)              (covariance="full")
    σᵢ ← σᵢ − σᵢ²xᵢ² / (v + r)           (covariance="diagonal", the default)

This is the posterior of w under the prior w ~ N(0, c·I) and the observation
t = w·x + noise of variance c·r, so the prediction has a variance:
c·(xᵀΣx + r) for t, s²·c·(xᵀΣx + r) in y's units (``predict_details``,
``interval``), where the scale c is the running mean of the pre-update e²/(v + r),
e = t − p (its expected value under the model).

Hyperparameters: ``r`` > 0 (default 1.0; the noise-to-prior ratio: larger r = smaller,
slower steps) and ``covariance`` ("diagonal", any dimension, O(nnz) a row; or "full",
d×d, dim <= 4096, O(d²) a row, exact for correlated features; the diagonal is exact
when each example has one non-zero feature).

Importance weights (``update(..., sample_weight=h)``, h > 0): r → r/h, the
observation's noise variance divided by h (for the full covariance, an integer weight
k is k repeats of the example, up to rounding); the noise scale c learns e²/(v + r/h)
with weight h, and the target statistics count the example h times.

>>> import numpy as np
>>> from learners.features import Batch
>>> reg = AROW(dim=2, r=1.0, covariance="full")
>>> X = Batch.from_dense(np.array([[1.0, 1.0], [1.0, 0.0]] * 100))  # an intercept, a flag
>>> res = reg.update(X, [500.0, 100.0] * 100)
>>> np.round(reg.predict(X.take([0, 1]))).tolist()
[492.0, 106.0]
>>> lo, hi = reg.interval(X.take([0]), level=0.9)
>>> bool(lo[0] < 500.0 < hi[0])
True
"""

from __future__ import annotations

from typing import Any

from learners.linear._params import _positive
from learners.regression import _kernels as K
from learners.regression._base import LinearRegressor


class AROW(LinearRegressor):
    algorithm = "arow"
    _code = K.AROW

    def __init__(self, dim: int, r: float = 1.0, covariance: str = "diagonal") -> None:
        self.r = _positive("r", r)
        self._setup(dim, covariance, r=self.r)

    @property
    def params(self) -> dict[str, Any]:
        return {"r": self.r, "covariance": self.covariance}
