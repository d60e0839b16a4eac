"""Passive-Aggressive classifiers PA, PA-I and PA-II (Crammer et al., JMLR 2006).

On each example the hinge loss ℓ = max(0, 1 − y w·x) is computed and, if positive,
w ← w + τ y x with

- PA:    τ = ℓ / ‖x‖²
- PA-I:  τ = min(C, ℓ / ‖x‖²)
- PA-II: τ = ℓ / (‖x‖² + 1/(2C))

Multiclass (three or more labels): w_y += τx, w_r −= τx against the best wrong
label r, with ‖x‖² replaced by 2‖x‖². PA keeps no covariance, so it takes no
``covariance`` parameter.

Importance weights (``update(..., sample_weight=h)``, h > 0):

- PA-I: C → hC, i.e. τ = min(hC, ℓ/‖x‖²): the slack term Cξ of the PA-I objective
  counts h times (Crammer et al. 2006, sec. 3). It is also the importance-aware
  update for the hinge loss of Karampatziakis & Langford (2011), which follows the
  gradient flow of h copies and stops where the hinge becomes flat: for a binary
  model an integer h = k moves the weights exactly as k repeats of the example
  (measured on a9a: equal to 1e-15, tests/learners/test_weights_quality.py).
- PA-II: C → hC, τ = ℓ / (‖x‖² + 1/(2hC)) (the squared slack Cξ² counts h times);
  k repeats shrink the loss geometrically instead, so the two differ slightly
  (1.2% of max |w| on a9a with k in {1, 2, 3}).
- PA: τ = min(h, 1)·ℓ/‖x‖². PA's constraint is hard, so there is nothing to scale:
  one step already reaches margin 1 and any repeat is passive, so a weight k ≥ 1 is
  exactly k repeats (one step); a weight h < 1 takes the fraction h of the step
  (scikit-learn's reading of sample_weight as a step multiplier), which never
  overshoots the margin. Use PA-I/PA-II to give weights above 1 an effect.

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
