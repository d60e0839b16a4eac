"""Normalised adaptive SGD regression: the squared loss with per-coordinate AdaGrad rates
(Duchi, Hazan & Singer, JMLR 2011) on coordinates normalised by each feature's largest
|value| seen (Ross, Mineiro & Langford, UAI 2013) and importance-invariant steps
(Karampatziakis & Langford, UAI 2011): the learner Vowpal Wabbit runs by default.

It needs no knowledge of the features' scales (a pixel in [0, 255] or a flag in
{0, 1} learn alike) nor of their number (the global rate is η·H/N, with N/H the mean
‖x̃‖² of the rows seen), and it is stable on dense, correlated inputs where AROW's
diagonal Kalman step nearly interpolates each example: on MNIST as a 10-action bandit
it is the reward model that learns (``bench/decisions.py``). The kernel and the
per-row order of things are in :mod:`learners.regression._sgd_kernels`: the model keeps
the target's running mean m and spread s as every regressor does
(:mod:`learners.regression._model`), its weights predict y − m in y's units, and the
AdaGrad sums are kept in units of s, so the steps do not depend on y's scale.

Hyperparameter: ``eta`` > 0 (default 1.0), the learning rate; with the normalisations
above it is unit-free.

Importance weights (``update(..., sample_weight=h)``, h > 0): the step is the closed
form of h infinitely small steps (never past the target), the AdaGrad sums and the
normaliser count the row h times, and so do the target statistics. It keeps no
variance: Thompson sampling and UCB need AROW.

>>> import numpy as np
>>> from learners.features import Batch
>>> reg = SGD(dim=2)
>>> X = Batch.from_dense(np.array([[1.0, 1.0], [1.0, 0.0]] * 200))  # an intercept, a flag
>>> res = reg.update(X, [500.0, 100.0] * 200)
>>> np.round(reg.predict(X.take([0, 1]))).tolist()
[500.0, 100.0]
"""

from __future__ import annotations

from typing import Any

from learners.linear._params import _positive
from learners.regression import _kernels as K
from learners.regression._base import LinearRegressor


class SGD(LinearRegressor):
    """Normalised adaptive SGD on the squared loss, importance-invariant steps."""

    algorithm = "sgd"
    _code = K.SGD
    _has_cov = False
    _aux_cols = 2  # per coordinate: the AdaGrad sum G and the scale n, beside w
    _y_units = True  # the weights predict y − m in y's units (see _sgd_kernels)

    def __init__(self, dim: int, eta: float = 1.0) -> None:
        self.eta = _positive("eta", eta)
        self._setup(dim, "none", C=self.eta)

    @property
    def params(self) -> dict[str, Any]:
        return {"eta": self.eta}
