"""Passive-Aggressive regression PA, PA-I and PA-II (Crammer et al., JMLR 2006, sec. 6).

On each example the ε-insensitive loss ℓ = max(0, |w·x − t| − ε) of the standardised
target t (:mod:`learners.regression._model`) is computed and, if positive,
w ← w + sign(t − w·x)·τ·x with

- PA:    τ = ℓ / ‖x‖²
- PA-I:  τ = min(C, ℓ / ‖x‖²)
- PA-II: τ = ℓ / (‖x‖² + 1/(2C))

Hyperparameters: ``epsilon`` >= 0 (default 0.1), the half-width of the band where an
error costs nothing, in standard deviations of y (the target is standardised, so it
needs no knowledge of y's scale); ``C`` > 0 (default 1.0, PA-I and PA-II), the
aggressiveness.

Importance weights (``update(..., sample_weight=h)``, h > 0), as for the classifiers:

- PA-I and PA-II: C → hC (the slack term of the objective counts h times);
- PA: τ → min(h, 1)·τ (the constraint is hard: one step already reaches the band, so
  a weight above 1 has nothing to scale; below 1 the fraction h of the step is taken).

The target statistics count an example h times in every algorithm.

>>> import numpy as np
>>> from learners.features import Batch
>>> reg = PA1(dim=2, epsilon=0.0, C=1.0)
>>> X = Batch.from_dense(np.array([[1.0, 1.0], [1.0, 0.0]] * 100))  # an intercept, a flag
>>> res = reg.update(X, [500.0, 100.0] * 100)
>>> np.round(reg.predict(X.take([0, 1]))).tolist()
[499.0, 100.0]
"""

from __future__ import annotations

import math
from typing import Any

from learners.linear._params import _positive
from learners.regression import _kernels as K
from learners.regression._base import LinearRegressor


def _epsilon(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"params.epsilon: must be a number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"params.epsilon: must be >= 0, got {value!r}")
    return v


class PA(LinearRegressor):
    """PA: the smallest step that brings the error into the ε band."""

    algorithm = "pa"
    _code = K.PA
    _has_cov = False

    def __init__(self, dim: int, epsilon: float = 0.1) -> None:
        self.epsilon = _epsilon(epsilon)
        self._setup(dim, "none", epsilon=self.epsilon)

    @property
    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}


class PA1(LinearRegressor):
    """PA-I: the step is capped at the aggressiveness ``C``."""

    algorithm = "pa1"
    _code = K.PA1
    _has_cov = False

    def __init__(self, dim: int, epsilon: float = 0.1, C: float = 1.0) -> None:
        self.epsilon = _epsilon(epsilon)
        self.C = _positive("C", C)
        self._setup(dim, "none", epsilon=self.epsilon, C=self.C)

    @property
    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "C": self.C}


class PA2(PA1):
    """PA-II: squared slack, τ = ℓ / (‖x‖² + 1/(2C))."""

    algorithm = "pa2"
    _code = K.PA2
