"""Online linear regression: PA, PA-I, PA-II (ε-insensitive), AROW (RLS / Kalman) and
normalised adaptive SGD (the squared loss, importance-invariant steps).

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

from collections.abc import Mapping
from typing import Any

from learners.linear._learning import NonFiniteWeightsError
from learners.linear._params import build_by_name
from learners.regression._base import ALGORITHMS, LinearRegressor
from learners.regression._model import CheckedTargets, RegressionState
from learners.regression.arow import AROW
from learners.regression.pa import PA, PA1, PA2
from learners.regression.sgd import SGD

__all__ = [
    "ALGORITHMS",
    "AROW",
    "PA",
    "PA1",
    "PA2",
    "SGD",
    "CheckedTargets",
    "LinearRegressor",
    "NonFiniteWeightsError",
    "RegressionState",
    "make_regressor",
    "warmup",
]

CLASSES: dict[str, type[LinearRegressor]] = {
    "pa": PA, "pa1": PA1, "pa2": PA2, "arow": AROW, "sgd": SGD,
}  # fmt: skip


def make_regressor(
    algorithm: str, dim: int, params: Mapping[str, Any] | None = None
) -> LinearRegressor:
    """Build a regressor by name; unknown or invalid hyperparameters raise ``ValueError``
    naming ``params.<name>``."""
    made: LinearRegressor = build_by_name(CLASSES, algorithm, dim, params)
    return made


def warmup() -> None:
    """Compile (or load from numba's disk cache) every kernel the regressors run: the
    update with its undo log and with a state copy, with and without weights, the dry
    run, both covariances and the predictions (for the service's kernel warm-up)."""
    import numpy as np

    from learners.features import Batch

    sparse = Batch(np.array([0, 1, 3, 3]), np.array([0, 1, 3]), np.array([1.0, 2.0, -1.0]), 4)
    dense = Batch.from_dense(np.array([[1.0, 0.5, -1.0, 2.0], [0.0, 1.0, 1.0, 1.0]]))
    for algorithm, params in [(a, {}) for a in ALGORITHMS] + [("arow", {"covariance": "full"})]:
        reg = make_regressor(algorithm, 4, params)
        for batch in (sparse, dense):  # nnz < dim: the undo log; nnz >= dim: a state copy
            y = np.arange(batch.n_rows, dtype=np.float64)
            for weights in (None, np.full(batch.n_rows, 0.5)):
                reg.first_nonfinite_row(batch, y, weights)
                reg.update(batch, y, weights)
            reg.predict_details(batch)
