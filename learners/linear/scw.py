"""Soft Confidence-Weighted learning SCW-I and SCW-II (Wang, Zhao, Hoi, ICML 2012).

With margin m = y μ·x, variance v = xᵀΣx and φ = Φ⁻¹(η), an example is learned
only when the loss max(0, φ√v − m) is positive:

    SCW-I:  α = min(C, max(0, (−mψ + √(m²φ⁴/4 + vφ²ξ)) / (vξ))),  ψ = 1 + φ²/2, ξ = 1 + φ²
    SCW-II: α = max(0, (−(2mn + φ²mv) + γ) / (2(n² + nvφ²))),
            n = v + 1/(2C),  γ = φ√(φ²m²v² + 4nv(n + vφ²))
    √u = ½(−αvφ + √(α²v²φ² + 4v))   (computed without cancellation)
    β  = αφ / (√u + vαφ)
    μ ← μ + αyΣx
    Σ ← Σ − βΣxxᵀΣ               (covariance="full")
    σᵢ ← σᵢ − β σᵢ² xᵢ²          (covariance="diagonal", the default)

Importance weights (``update(..., sample_weight=h)``, h > 0): C → hC, the weight of
the slack term of SCW-I (C·ℓ) and SCW-II (C·ℓ²) in their objectives (Wang, Zhao, Hoi
2012, eq. 5 and 7), as for PA-I/PA-II: SCW-I α = min(hC, ...), SCW-II n = v + 1/(2hC).
k repeats take k smaller steps instead (on a9a 0.8% / 3% of max |μ| apart, 99.9% of
test predictions equal).

Hyperparameters: ``C`` > 0 and ``eta`` in (0.5, 1). Defaults C=0.01, eta=0.75 were
chosen on a9a and MNIST (one pass, diagonal): SCW-I test accuracy 0.849 / 0.916
there, against 0.835 / 0.898 with C=1, eta=0.9; SCW-II 0.847 / 0.902 against
0.825 / 0.893 (see tests/learners/test_quality_linear.py).

>>> from learners.features import Batch
>>> import numpy as np
>>> clf = SCW1(dim=2, C=1.0, eta=0.9)
>>> X = Batch.from_dense(np.array([[1.0, 0.5], [-1.0, -0.5]]))
>>> res = clf.update(X, ["yes", "no"])
>>> res.applied, clf.predict(X)
(2, ['yes', 'no'])
"""

from __future__ import annotations

from typing import Any

from learners.linear import _kernels as K
from learners.linear._base import LinearClassifier, phi_of
from learners.linear._params import _eta, _positive


class SCW1(LinearClassifier):
    """SCW-I: the step α is capped at ``C``."""

    algorithm = "scw1"
    _code = K.SCW1

    def __init__(
        self, dim: int, C: float = 0.01, eta: float = 0.75, covariance: str = "diagonal"
    ) -> None:
        self.C = _positive("C", C)
        self.eta = _eta(eta)
        self._setup(dim, covariance, self.C, phi_of(self.eta))

    @property
    def params(self) -> dict[str, Any]:
        return {"C": self.C, "eta": self.eta, "covariance": self.covariance}


class SCW2(SCW1):
    """SCW-II: squared-slack variant (the step shrinks smoothly with 1/(2C))."""

    algorithm = "scw2"
    _code = K.SCW2
