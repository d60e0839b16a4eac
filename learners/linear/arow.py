"""AROW, Adaptive Regularization of Weight vectors (Crammer, Kulesza, Dredze, NIPS 2009).

With margin m = y μ·x and variance v = xᵀΣx, an example is learned when m < 1:

    β = 1 / (v + r),   α = (1 − m) β
    μ ← μ + αyΣx
    Σ ← Σ − βΣxxᵀΣ                    (covariance="full")
    σᵢ ← σᵢ − β σᵢ² xᵢ²               (covariance="diagonal", the default)

Importance weights (``update(..., sample_weight=h)``, h > 0): r → r/h. AROW's
objective weighs an example's squared hinge loss and its confidence term by
1/(2r) each; counting the example h times is weighing both by h/(2r). AROW is then
the Kalman / recursive-least-squares update of the observation y·(w·x) = 1 with
noise variance r/h: for a binary model with the full covariance, an integer weight
k equals k repeats exactly (k observations with noise r are one with noise r/k;
measured on a9a: 2e-12 of max |μ|). With the diagonal covariance the per-coordinate
shrink is not the exact precision update, and k repeats differ (13% of max |μ|
on a9a, 99.8% of test predictions equal).

Hyperparameter: ``r`` > 0 (regularisation; larger r = smaller, slower steps),
default 1.0. On a9a (one pass, diagonal) r from 0.1 to 10 all give 0.849 ± 0.0005,
so the usual value is kept; on MNIST r=10 is better (0.913 against 0.901).

>>> from learners.features import Batch
>>> import numpy as np
>>> clf = AROW(dim=3, r=1.0)
>>> X = Batch.from_dense(np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]))
>>> clf.update(X, [0, 1, 2]).applied
3
>>> clf.predict(X)
[0, 1, 2]
"""

from __future__ import annotations

from typing import Any

from learners.linear import _kernels as K
from learners.linear._base import LinearClassifier
from learners.linear._params import _positive


class AROW(LinearClassifier):
    algorithm = "arow"
    _code = K.AROW

    def __init__(self, dim: int, r: float = 1.0, covariance: str = "diagonal") -> None:
        self.r = _positive("r", r)
        self._setup(dim, covariance, self.r, 0.0)

    @property
    def params(self) -> dict[str, Any]:
        return {"r": self.r, "covariance": self.covariance}
