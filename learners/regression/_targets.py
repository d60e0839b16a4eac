"""Validation of regression targets: finite real numbers, one per example.

>>> check_targets([1, 2.5, -3], 3).tolist()
[1.0, 2.5, -3.0]
>>> check_targets([1.0, float("nan")], 2)
Traceback (most recent call last):
...
learners.csr_batch.FeatureError: labels[1]: target must be a finite number, got nan
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from learners.features import FeatureError

__all__ = ["check_targets"]


def _problem(i: int, value: Any) -> FeatureError:
    return FeatureError(f"labels[{i}]", f"target must be a finite number, got {value!r}")


def check_targets(targets: Sequence[Any] | np.ndarray, n: int) -> np.ndarray:
    """``targets`` as a contiguous float64 array of ``n`` finite values. Integers and
    floats (Python or numpy) are accepted; a bool, a string, None, NaN or an infinity
    raises ``FeatureError`` (a ``ValueError``) naming ``labels[i]``; a wrong count a
    ``ValueError`` naming ``labels``."""
    if isinstance(targets, np.ndarray) and targets.dtype.kind in "fiu":
        y = np.ascontiguousarray(targets, dtype=np.float64)
    else:
        if isinstance(targets, str | bytes) or not hasattr(targets, "__len__"):
            raise ValueError(f"labels: expected a sequence of {n} numbers")
        vals: list[float] = []
        for i, t in enumerate(targets):
            if isinstance(t, bool | np.bool_) or not isinstance(
                t, int | float | np.integer | np.floating
            ):
                raise _problem(i, t)
            try:
                vals.append(float(t))
            except OverflowError:  # an int beyond float64
                raise _problem(i, t) from None
        y = np.array(vals, dtype=np.float64)
    if y.shape != (n,):
        raise ValueError(f"labels: expected {n} targets (one per example), got shape {y.shape}")
    bad = ~np.isfinite(y)
    if bad.any():
        i = int(np.argmax(bad))
        raise _problem(i, float(y[i]))
    return y
