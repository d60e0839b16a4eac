"""Online linear regression: PA, PA-I, PA-II (ε-insensitive) and AROW (RLS / Kalman).

The target is standardised online (the model keeps y's running mean and spread), so
no hyperparameter depends on y's units; AROW also gives a predictive variance.
An intercept is a constant feature (``FeatureSpec(..., intercept=True)``).

>>> from learners.features import FeatureSpec
>>> spec = FeatureSpec.dense(1, intercept=True)
>>> reg = make_regressor("arow", spec.dim, {"r": 1.0, "covariance": "full"})
>>> X, y = spec.encode([[i % 5] for i in range(200)]), [3.0 * (i % 5) + 10 for i in range(200)]
>>> res = reg.update(X, y)  # y = 3x + 10
>>> (res.applied, round(float(reg.predict(spec.encode([[2.0]]))[0]), 1))
(200, 16.2)
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from learners.linear._learning import NonFiniteWeightsError
from learners.regression._base import ALGORITHMS, LinearRegressor
from learners.regression._model import CheckedTargets, RegressionState
from learners.regression.arow import AROW
from learners.regression.pa import PA, PA1, PA2

__all__ = [
    "ALGORITHMS",
    "AROW",
    "PA",
    "PA1",
    "PA2",
    "CheckedTargets",
    "LinearRegressor",
    "NonFiniteWeightsError",
    "RegressionState",
    "make_regressor",
]

CLASSES: dict[str, type[LinearRegressor]] = {"pa": PA, "pa1": PA1, "pa2": PA2, "arow": AROW}


def make_regressor(
    algorithm: str, dim: int, params: Mapping[str, Any] | None = None
) -> LinearRegressor:
    """Build a regressor by name; unknown or invalid hyperparameters raise ``ValueError``
    naming ``params.<name>``."""
    try:
        cls = CLASSES[algorithm]
    except (KeyError, TypeError):
        raise ValueError(
            f"algorithm: must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}"
        ) from None
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(f"params: must be an object, got {type(params).__name__}")
    params = dict(params or {})
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "dim")]
    for name in params:
        if name not in allowed:
            raise ValueError(
                f"params.{name}: unknown hyperparameter for {algorithm} "
                f"(expected: {', '.join(allowed)})"
            )
    factory: Any = cls  # subclasses define their own __init__ signatures
    return factory(dim, **params)
