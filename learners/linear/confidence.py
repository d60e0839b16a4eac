"""Re-open the confidence of a confidence-weighted classifier: Σ back towards its prior.

CW, AROW and SCW keep weights as a Gaussian N(μ, Σ); every update shrinks Σ, so the
longer a model learns the smaller its steps (it is sure of its weights). After the
world changed (a drift detection), that certainty is wrong. Re-opening moves Σ a
fraction ``amount`` of the way back to the prior it started from, keeping μ: the model
keeps what it knows as its best guess but is ready to move again.

    Σ ← Σ + amount · (Σ₀ − Σ)        (amount = 1: exactly Σ₀; 0: unchanged)

Σ₀ is the covariance of a model that learned the same labels and no example: I for a
binary model (one row); for a multiclass model ``I/2`` for the rows of the first two
labels (the exact binary→multiclass embedding halves the binary Σ, see
:mod:`learners.linear._state`) and I for each later label. Every coordinate is moved:
a coordinate no example touched holds Σ₀ exactly, and Σ₀ − Σ = 0 leaves it so, bit for
bit, so moving all of them is the same as moving only the touched ones, without
keeping track of which those are. The full covariance moves off the diagonal towards
0 the same way (entry by entry, so Σ stays exactly symmetric; a convex combination of
positive-definite matrices stays positive definite).

Cost: one pass over Σ, O(R·d) diagonal, O(R·d²) full (less than one full-covariance
update of d examples). Deterministic: elementwise IEEE arithmetic, the same on every
machine. PA, PA-I and PA-II keep no Σ: nothing to re-open.

>>> import numpy as np
>>> sig = np.array([[1.0, 0.25, 0.5]])  # one binary row: the first coordinate untouched
>>> reopen_diagonal(sig, 1, 0.5); sig.tolist()
[[1.0, 0.625, 0.75]]
>>> reopen_diagonal(sig, 1, 1.0); sig.tolist()
[[1.0, 1.0, 1.0]]
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["check_amount", "prior_scale", "reopen_diagonal", "reopen_full"]


def check_amount(amount: float) -> float:
    """``amount`` as a float in [0, 1]; ``ValueError`` naming it otherwise."""
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise ValueError(f"amount: must be a number in [0, 1], got {amount!r}")
    a = float(amount)
    if not (math.isfinite(a) and 0.0 <= a <= 1.0):
        raise ValueError(f"amount: must be in [0, 1], got {amount!r}")
    return a


def prior_scale(rows: int, n_labels: int) -> np.ndarray:
    """Σ₀ of each row as a multiple of I: 1 while binary; 1/2, 1/2, 1, 1, ... multiclass."""
    out = np.ones(rows)
    if n_labels > 2:
        out[:2] = 0.5
    return out


@njit(cache=True)
def _reopen_diag(sig, prior, amount):  # pragma: no cover - numba
    R, d = sig.shape
    for k in range(R):
        p = prior[k]
        for j in range(d):
            s = sig[k, j]
            # amount 1 is Σ₀ exactly (s + (p - s) can be off by one rounding)
            sig[k, j] = p if amount == 1.0 else s + amount * (p - s)


@njit(cache=True)
def _reopen_full(S, prior, amount):  # pragma: no cover - numba
    R, d, _ = S.shape
    for k in range(R):
        for a in range(d):
            for b in range(d):
                p = prior[k] if a == b else 0.0
                s = S[k, a, b]
                S[k, a, b] = p if amount == 1.0 else s + amount * (p - s)


def reopen_diagonal(sig: np.ndarray, n_labels: int, amount: float) -> None:
    """Move the diagonal Σ (R, d) (any strided view, e.g. ``w[:, :, 1]``) in place."""
    _reopen_diag(sig, prior_scale(sig.shape[0], n_labels), check_amount(amount))


def reopen_full(S: np.ndarray, n_labels: int, amount: float) -> None:
    """Move the full Σ (R, d, d) in place."""
    _reopen_full(S, prior_scale(S.shape[0], n_labels), check_amount(amount))
