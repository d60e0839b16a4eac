"""Confidence-Weighted learning, exact convex update (Crammer, Dredze, Pereira, NIPS 2008).

The weights are a Gaussian N(μ, Σ). With margin m = y μ·x, variance v = xᵀΣx and
φ = Φ⁻¹(η), an example is learned only when the loss max(0, φ√v − m) is positive:

    α  = max(0, (−mψ + √(m²φ⁴/4 + vφ²ξ)) / (vξ)),  ψ = 1 + φ²/2, ξ = 1 + φ²
    √u = ½(−αvφ + √(α²v²φ² + 4v))   (computed without cancellation)
    μ ← μ + αyΣx
    Σ ← Σ − βΣxxᵀΣ,  β = αφ / (√u + vαφ)      (covariance="full")

With ``covariance="diagonal"`` (default) the precision gets the diagonal update of
CW's diagonal experiments, Σ⁻¹ ← Σ⁻¹ + 2αφ diag(x²), i.e. σᵢ ← σᵢ / (1 + 2αφ σᵢ xᵢ²)
(as Jubatus and Hivemall do). We tried the increment that Sherman–Morrison gives for
the exact full update, αφ/√u: on a9a it drives variances to underflow within ~1,000
examples (v → 1e-172, α → 1e172) and the update is refused as non-finite, so it is
not used.

CW enforces its constraint exactly (there is no slack), so on noisy data it is much
less accurate than AROW/SCW: one pass over a9a gives 0.803 (diagonal). With the full
covariance and eta <= 0.6 the kernel matches a square-root-form and a Cholesky-form
reference exactly (0.76-0.80); for larger eta the exact update itself drives xᵀΣx
below float64 resolution within a few thousand examples (0.49 at eta = 0.9; in
100-digit arithmetic the algorithm is no better). See docs/cw-a9a.md. SCW-I/II are
its soft-margin repair.

Importance weights (``update(..., sample_weight=h)``, h > 0): α → min(h, 1)·α, with
√u and β (κ for the diagonal) computed from the scaled α, i.e. a point on the path of
exact CW solutions between "no update" (α = 0) and the full projection. CW has no
loss term to weight (its constraint Pr[y w·x ≥ 0] ≥ η is hard); after one full-
covariance step the constraint holds with equality, so k ≥ 1 repeats of an example
are one step and a weight k ≥ 1 equals them; h < 1 is a partial step. (With the
diagonal covariance a repeat still moves a little: 10% of max |μ| on a9a.) For
weights above 1 to matter, use AROW or SCW.

Hyperparameter: ``eta`` in (0.5, 1), default 0.9 (φ ≈ 1.2816).

>>> from learners.features import Batch
>>> import numpy as np
>>> clf = CW(dim=2, eta=0.9)
>>> X = Batch.from_dense(np.array([[1.0, 0.2], [-1.0, 0.1]]))
>>> _ = clf.update(X, ["+1", "-1"])
>>> clf.predict(X), clf.labels_
(['+1', '-1'], ['+1', '-1'])
"""

from __future__ import annotations

from typing import Any

from learners.linear import _kernels as K
from learners.linear._base import LinearClassifier, phi_of
from learners.linear._params import _eta


class CW(LinearClassifier):
    algorithm = "cw"
    _code = K.CW

    def __init__(self, dim: int, eta: float = 0.9, covariance: str = "diagonal") -> None:
        self.eta = _eta(eta)
        self._setup(dim, covariance, 0.0, phi_of(self.eta))

    @property
    def params(self) -> dict[str, Any]:
        return {"eta": self.eta, "covariance": self.covariance}
