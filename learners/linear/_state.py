"""What an online linear classifier has learned, held in the layout its kernels read.

A model is binary while it has seen at most two labels: one mean vector μ (and
covariance Σ), ``labels_[0]`` (the first seen) on the positive side, so
``score(labels_[0]) = μ·x`` and ``score(labels_[1]) = −μ·x``. When a third label
arrives the model becomes multiclass by an exact embedding: μ₀ = μ/2, μ₁ = −μ/2,
Σ₀ = Σ₁ = Σ/2 (the pair's margin (μ₀ − μ₁)·x and variance xᵀ(Σ₀ + Σ₁)x are
unchanged, and halving is exact in floating point), and every new label starts
at μ = 0, Σ = I.

:class:`LinearModel` holds that state (labels, counts, μ and Σ) and does to it what is
neither learning nor scoring: build it, copy it out, check and restore a copy, grow it
by a label, re-open Σ, and check that a batch fits it. :mod:`learners.linear._learning` and
:mod:`learners.linear._scoring` build on it; :mod:`learners.linear._base` joins them
into ``LinearClassifier``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from learners.base import Label, check_label
from learners.feature_names import FeatureNames
from learners.features import Batch, FeatureError, FeatureSpec
from learners.linear import _kernels as K
from learners.linear._labels import IntTable, int_table
from learners.linear._params import _check_dim, _covariance
from learners.linear.confidence import check_amount, reopen_diagonal, reopen_full


@dataclass
class LinearState:
    """Everything a linear classifier has learned (plain arrays and scalars)."""

    labels: list[Label]
    mu: np.ndarray  # (R, d): R == 1 while binary, else one row per label
    sigma: np.ndarray | None  # (R, d) diagonal, (R, d, d) full, None for PA
    n_seen: int = 0
    n_updates: int = 0


class LinearModel:
    """The learned state of a linear classifier and the operations on it that neither
    learn nor score; the common base of ``LinearLearner`` and ``LinearScorer``."""

    algorithm: ClassVar[str] = ""
    _code: ClassVar[int] = -1
    _has_cov: ClassVar[bool] = True

    # set by subclasses' __init__ through _setup
    dim: int
    covariance: str
    _c: float
    _phi: float

    def _setup(self, dim: int, covariance: str, c: float, phi: float) -> None:
        self.dim = _check_dim(dim)
        self.covariance = _covariance(covariance, self.dim) if self._has_cov else "none"
        self._c = c
        self._phi = phi
        # What the examples were (kept in artifacts, never part of the learned state):
        # the spec that encodes them, and for hashed features the names seen.
        self.features_: FeatureSpec | None = None
        self.feature_names_: FeatureNames | None = None
        self._reset()

    def _reset(self) -> None:
        self.labels_: list[Label] = []
        self._index: dict[Label, int] = {}
        self._table: IntTable | None = None
        if self.covariance == "full":
            self._mu = np.zeros((1, self.dim))
            self._S = self._identity_full(1)
        else:
            # (μ, σ) side by side: the sparse kernel touches one cache line per coordinate
            self._w = self._identity_diag(1)
        self.n_seen_ = 0
        self.n_updates_ = 0
        self._fresh = True  # state as built: a rollback can rebuild it instead of copying

    @property
    def params(self) -> dict[str, Any]:
        """The hyperparameters (JSON-able); ``make_classifier(algo, dim, params)`` rebuilds."""
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}(dim={self.dim}, {args})"

    # ------------------------------------------------------------------ state

    def _identity_diag(self, rows: int) -> np.ndarray:
        w = np.zeros((rows, self.dim, 2 if self._has_cov else 1))
        if self._has_cov:
            w[:, :, 1] = 1.0
        return w

    def _identity_full(self, rows: int) -> np.ndarray:
        out = np.zeros((rows, self.dim, self.dim))
        idx = np.arange(self.dim)
        out[:, idx, idx] = 1.0
        return out

    @property
    def _mean(self) -> np.ndarray:
        """μ as (R, d) (a view)."""
        return self._mu if self.covariance == "full" else self._w[:, :, 0]

    @property
    def _cov(self) -> np.ndarray | None:
        """Σ as (R, d) diagonal or (R, d, d) full (a view); None for PA."""
        if self.covariance == "full":
            return self._S
        return self._w[:, :, 1] if self._has_cov else None

    def state(self) -> LinearState:
        """A copy of the learned state."""
        cov = self._cov
        return LinearState(
            list(self.labels_),
            np.array(self._mean, dtype=np.float64, order="C"),  # one copy, contiguous
            None if cov is None else np.array(cov, dtype=np.float64, order="C"),
            self.n_seen_,
            self.n_updates_,
        )

    def _check_state(self, st: LinearState) -> None:
        labels = [check_label(lab, f"labels[{i}]") for i, lab in enumerate(st.labels)]
        if len(set(labels)) != len(labels):
            raise ValueError("state.labels: duplicate labels")
        rows = 1 if len(labels) <= 2 else len(labels)
        if np.shape(st.mu) != (rows, self.dim):
            raise ValueError(f"state.mu: shape {np.shape(st.mu)}, expected {(rows, self.dim)}")
        cov = self._cov
        want = None if cov is None else (rows, *cov.shape[1:])
        got = None if st.sigma is None else np.shape(st.sigma)
        if got != want:
            raise ValueError(f"state.sigma: shape {got}, expected {want}")

    def _restore(self, st: LinearState) -> None:
        self.labels_ = list(st.labels)
        self._index = {lab: i for i, lab in enumerate(self.labels_)}
        self._table = None
        if self.covariance == "full":
            self._mu = np.ascontiguousarray(st.mu, dtype=np.float64)
            self._S = np.ascontiguousarray(st.sigma, dtype=np.float64)
        elif self._has_cov:
            self._w = np.ascontiguousarray(np.stack([st.mu, st.sigma], axis=-1), dtype=np.float64)  # type: ignore[list-item]
        else:
            self._w = np.ascontiguousarray(st.mu[:, :, None], dtype=np.float64)
        self.n_seen_ = st.n_seen
        self.n_updates_ = st.n_updates
        self._fresh = False

    def _add_label(self, label: Label) -> None:
        self._index[label] = len(self.labels_)
        self.labels_.append(label)
        self._table = None
        k = len(self.labels_)
        if k <= 2:
            return
        full = self.covariance == "full"
        if k == 3:  # binary -> multiclass, exact embedding (halving is exact)
            if full:
                self._mu = np.stack([self._mu[0] / 2.0, -self._mu[0] / 2.0, np.zeros(self.dim)])
                half = self._S / 2.0
                self._S = np.concatenate([half, half, self._identity_full(1)])
            else:
                w = np.concatenate([self._w / 2.0, self._w / 2.0, self._identity_diag(1)])
                w[1, :, 0] *= -1.0  # μ₁ = −μ/2; both covariances are Σ/2
                self._w = w
            return
        if full:
            self._mu = np.concatenate([self._mu, np.zeros((1, self.dim))])
            self._S = np.concatenate([self._S, self._identity_full(1)])
        else:
            self._w = np.concatenate([self._w, self._identity_diag(1)])

    def _int_table(self) -> IntTable:
        # rebuilt only after the labels change (_add_label / _restore reset it)
        if self._table is None:
            self._table = int_table(self._index)
        return self._table

    def reopen_confidence(self, amount: float) -> None:
        """Move Σ a fraction ``amount`` in [0, 1] of the way back to its prior (1: the
        prior), keeping μ (:mod:`learners.linear.confidence`); PA keeps no Σ: a no-op.
        For after a drift: the steps grow again as if the model were less sure."""
        if self.covariance == "full":
            reopen_full(self._S, len(self.labels_), amount)
        elif self._has_cov:
            reopen_diagonal(self._w[:, :, 1], len(self.labels_), amount)
        else:
            check_amount(amount)

    # ------------------------------------------------------------------ validation

    def _check_batch(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return checked_csr(batch, self.dim)


def checked_csr(batch: Batch, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR arrays of ``batch`` (int64, int64, float64, contiguous) once it is known to
    be a well-formed batch of ``dim`` columns with finite values; ``TypeError``,
    ``ValueError`` or ``FeatureError`` naming the problem (``batch[i]``, ``batch.dim``)
    otherwise. Shared by every linear learner (classifiers and regressors)."""
    if not isinstance(batch, Batch):
        raise TypeError(f"batch: expected a learners.features.Batch, got {type(batch).__name__}")
    if batch.dim != dim:
        raise ValueError(f"batch.dim: {batch.dim} does not match the model dimension {dim}")
    ip = np.ascontiguousarray(batch.indptr, dtype=np.int64)
    ix = np.ascontiguousarray(batch.indices, dtype=np.int64)
    vs = np.ascontiguousarray(batch.values, dtype=np.float64)
    if ip.ndim != 1 or ix.ndim != 1 or vs.ndim != 1 or ip.shape[0] == 0:
        raise ValueError("batch: malformed CSR arrays (indptr/indices/values must be 1-d)")
    row, code = K.validate_batch(ip, ix, vs, dim)
    if row >= 0:
        if code == K.BAD_INDPTR:
            raise ValueError("batch.indptr: not a valid CSR row pointer for these indices")
        problem = {
            K.BAD_INDEX: f"a feature index is outside [0, {dim})",
            K.UNSORTED: "feature indices are not sorted and unique",
            K.NONFINITE: "a feature value is not finite (NaN or infinite)",
        }[code]
        raise FeatureError(f"batch[{row}]", problem)
    return ip, ix, vs
