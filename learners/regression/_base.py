"""``LinearRegressor``, the base of every online regressor (PA, PA-I, PA-II, AROW, SGD): the
model of :mod:`learners.regression._model`, built from a state or an artifact and
written as one (kind ``"regression"``).

>>> import numpy as np
>>> from learners.features import Batch
>>> from learners.regression import make_regressor
>>> reg = make_regressor("arow", 2, {"covariance": "full"})
>>> _ = reg.update(Batch.from_dense(np.eye(2)), [1.0, 3.0])
>>> clone = LinearRegressor.from_bytes(reg.to_bytes())
>>> (clone.algorithm, clone.params, clone.state_digest() == reg.state_digest())
('arow', {'r': 1.0, 'covariance': 'full'}, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from learners import artifact
from learners.base import digest_arrays
from learners.feature_names import artifact_extras
from learners.regression import _artifact
from learners.regression._model import RegressionState, RegressorModel

ALGORITHMS: tuple[str, ...] = ("pa", "pa1", "pa2", "arow", "sgd")
KIND = _artifact.KIND


class LinearRegressor(RegressorModel):
    """Base of PA, PA1, PA2, AROW and SGD regression; use a subclass or ``make_regressor``."""

    @classmethod
    def from_state(
        cls, algorithm: str, dim: int, params: dict[str, Any], state: RegressionState
    ) -> LinearRegressor:
        """A model with the given hyperparameters and learned state (arrays are copied);
        ``ValueError`` naming what does not fit."""
        from learners.regression import make_regressor

        reg = make_regressor(algorithm, dim, params)
        reg._check_state(state)
        reg._restore(state)
        return reg

    def state_digest(self) -> str:
        st = self.state()
        arrays = [st.mu] + ([] if st.sigma is None else [st.sigma]) + [st.y_stats, st.noise]
        meta = [self.algorithm, self.dim, self.params, self.n_seen_, self.n_updates_]
        return digest_arrays(*meta, *arrays)

    def to_bytes(
        self, meta: dict[str, Any] | None = None, arrays: dict[str, np.ndarray] | None = None
    ) -> bytes:
        """The model as an artifact (kind ``"regression"``): hyperparameters, counts,
        ``mu`` (and ``sigma``), ``y_stats``, ``noise``, plus ``features_`` and
        ``feature_names_`` when set. ``meta`` adds JSON fields to the artifact's meta,
        ``arrays`` more arrays (a caller's own, under names of its own)."""
        params, own, meta_ = _artifact.parts(self, self.state(), meta)
        return artifact.dumps(KIND, params, {**own, **(arrays or {})}, meta_)

    def snapshot(
        self, meta: dict[str, Any] | None = None, arrays: dict[str, np.ndarray] | None = None
    ) -> Callable[[], memoryview]:
        """Copy the learned state now and return a function that serialises the copy
        (in a worker thread, while updates go on); it holds the bytes ``to_bytes()``
        would have given at the moment of the snapshot (up to the creation time).
        ``arrays``: as for ``to_bytes``, copies the caller made now."""
        extras = artifact_extras(self.features_, self.feature_names_)
        st = self.state()

        def dump() -> memoryview:
            params, own, meta_ = _artifact.parts(self, st, meta, extras)
            return artifact.dumps_buffer(KIND, params, {**own, **(arrays or {})}, meta_)

        return dump

    @classmethod
    def from_bytes(
        cls, blob: bytes | bytearray | memoryview, *, max_bytes: int | None = None
    ) -> LinearRegressor:
        """Read a model written by :meth:`to_bytes` (any algorithm), validated."""
        art = artifact.loads(blob, expected_kind=KIND, max_bytes=max_bytes)
        return cls.from_artifact(art)

    @classmethod
    def from_artifact(cls, art: artifact.Artifact) -> LinearRegressor:
        """The model an artifact of kind ``"regression"`` holds, validated (shapes,
        finite values, counts >= 0, σ > 0 on a diagonal, known algorithm and
        hyperparameters); an ``ArtifactError`` naming the problem otherwise."""
        return _artifact.read(cls, art)
