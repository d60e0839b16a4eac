"""Importance weights of online examples: validation shared by every online learner.

An importance weight h > 0 says "this example counts h times". Each learner
defines what that does to its step, following its literature (see the learner
modules): the linear classifiers scale their aggressiveness (PA-I/PA-II/SCW C → hC,
AROW r → r/h) or, for the hard-constraint PA and CW, take the fraction min(h, 1) of
their step; RankSVM scales the Pegasos step of a query's pairs by the query's h.
``None`` (or all ones) is the unweighted learner, bit for bit.

>>> check_sample_weight(None, 3).size
0
>>> check_sample_weight([1, 2.5], 2).tolist()
[1.0, 2.5]
>>> check_sample_weight([1.0, 0.0], 2)
Traceback (most recent call last):
...
ValueError: sample_weight[1]: must be a finite number > 0, got 0.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["NO_WEIGHTS", "check_sample_weight"]

NO_WEIGHTS = np.empty(0, dtype=np.float64)  # the kernels read an empty array as "all 1.0"
NO_WEIGHTS.flags.writeable = False


def check_sample_weight(sample_weight: Any, n: int, where: str = "sample_weight") -> np.ndarray:
    """``sample_weight`` as a contiguous float64 array of ``n`` finite values > 0, or
    ``NO_WEIGHTS`` for ``None``. Raises ``ValueError`` naming ``where[i]``."""
    if sample_weight is None:
        return NO_WEIGHTS
    if isinstance(sample_weight, np.ndarray) and sample_weight.dtype.kind in "fiu":
        w = np.ascontiguousarray(sample_weight, dtype=np.float64)
    else:
        vals: list[float] = []
        for i, h in enumerate(sample_weight):
            if isinstance(h, bool) or not isinstance(h, int | float | np.integer | np.floating):
                raise ValueError(f"{where}[{i}]: must be a finite number > 0, got {h!r}")
            try:
                vals.append(float(h))
            except OverflowError:  # an int beyond float64
                vals.append(math.inf)
        w = np.array(vals, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"{where}: expected {n} weights (one per example), got shape {w.shape}")
    bad = ~(np.isfinite(w) & (w > 0.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{where}[{i}]: must be a finite number > 0, got {float(w[i])!r}")
    return w
