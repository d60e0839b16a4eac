"""The standard normal CDF Φ and its inverse Φ⁻¹ in pure Python (no scipy).

Φ⁻¹ uses Acklam's rational approximation (relative error < 1.15e-9) refined by
one Halley step on ``math.erfc``, which brings it to full double precision for
the probabilities the confidence-weighted learners use (η in (0.5, 1)).

>>> round(normal_ppf(0.975), 6)
1.959964
>>> round(normal_cdf(normal_ppf(0.9)), 12)
0.9
"""

from __future__ import annotations

import math

__all__ = ["normal_cdf", "normal_ppf"]

_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_B = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
)
_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_P_LOW = 0.02425


def normal_cdf(x: float) -> float:
    """Φ(x) = P(Z <= x) for a standard normal Z."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def normal_ppf(p: float) -> float:
    """Φ⁻¹(p) for 0 < p < 1 (raises ``ValueError`` outside)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p!r}")
    if p > 0.5:
        # 1 - p is exact here (Sterbenz), and the lower half avoids the
        # cancellation of Φ(x) - p near 1 in the refinement step.
        return -normal_ppf(1.0 - p)
    if p < _P_LOW:
        x = _tail(math.sqrt(-2.0 * math.log(p)))
    else:
        q = p - 0.5
        r = q * q
        num = ((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]
        den = ((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0
        x = num * q / den
    # One Halley step: Acklam's 1e-9 relative error becomes ~1e-15.
    e = normal_cdf(x) - p
    u = e * math.sqrt(2.0 * math.pi) * math.exp(x * x / 2.0)
    return x - u / (1.0 + x * u / 2.0)


def _tail(q: float) -> float:
    num = ((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]
    den = (((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0
    return num / den
