"""Passive-Aggressive classifiers PA, PA-I and PA-II (Crammer et al., JMLR 2006).

On each example the hinge loss ℓ = max(0, 1 − y w·x) is computed and, if positive,
w ← w + τ y x with

- PA:    τ = ℓ / ‖x‖²
- PA-I:  τ = min(C, ℓ / ‖x‖²)
- PA-II: τ = ℓ / (‖x‖² + 1/(2C))

Multiclass (three or more labels): w_y += τx, w_r −= τx against the best wrong
label r, with ‖x‖² replaced by 2‖x‖². PA keeps no covariance, so it takes no
``covariance`` parameter.

>>> from learners.features import Batch
>>> import numpy as np
>>> clf = PA1(dim=2, C=0.5)
>>> X = Batch.from_dense(np.array([[1.0, 0.0], [0.0, 1.0]]))
>>> clf.update(X, ["spam", "ham"]).applied
2
>>> clf.predict(X)
['spam', 'ham']
"""

from __future__ import annotations

from typing import Any

from learners.linear import _kernels as K
from learners.linear._base import LinearClassifier
from learners.linear._params import _positive


class PA(LinearClassifier):
    """PA: the largest step that reaches margin 1 (no parameter)."""

    algorithm = "pa"
    _code = K.PA
    _has_cov = False

    def __init__(self, dim: int) -> None:
        self._setup(dim, "none", 0.0, 0.0)

    @property
    def params(self) -> dict[str, Any]:
        return {}


class PA1(LinearClassifier):
    """PA-I: the step is capped at the aggressiveness ``C`` (> 0, default 1.0)."""

    algorithm = "pa1"
    _code = K.PA1
    _has_cov = False

    def __init__(self, dim: int, C: float = 1.0) -> None:
        self.C = _positive("C", C)
        self._setup(dim, "none", self.C, 0.0)

    @property
    def params(self) -> dict[str, Any]:
        return {"C": self.C}


class PA2(PA1):
    """PA-II: squared-slack variant, τ = ℓ / (‖x‖² + 1/(2C)) (``C`` > 0, default 1.0)."""

    algorithm = "pa2"
    _code = K.PA2
