"""The online regressors' model (PA, PA-I, PA-II, AROW, SGD): the learned state, how it
learns a batch (all or nothing) and what it predicts; :mod:`learners.regression._base`
adds persistence to make ``LinearRegressor``.

The target is learned standardised: the state keeps the weighted count, mean and sum
of squared deviations of y in log order (Welford), and the weights predict
t = (y − m)/s, so a model needs no knowledge of y's scale and its hyperparameters are
unit-free (see :mod:`learners.regression._kernels` for the per-row order of things).

>>> import numpy as np
>>> from learners.regression import make_regressor
>>> reg = make_regressor("pa1", 1)
>>> res = reg.update(Batch.from_dense(np.ones((4, 1))), [10.0, 20.0, 30.0, 40.0])
>>> np.round(res.predicted, 1).tolist(), reg.y_mean_, round(reg.y_std_, 3)  # pre-update
([0.0, 10.0, 19.5, 29.2], 25.0, 11.18)
>>> reg.first_nonfinite_row(Batch.from_dense(np.array([[1e300]])), [1.0])
0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np

from learners.base import UpdateResult
from learners.feature_names import FeatureNames
from learners.features import Batch, FeatureSpec
from learners.linear._learning import NonFiniteWeightsError
from learners.linear._normal import normal_ppf
from learners.linear._params import _check_dim, _covariance
from learners.linear._state import checked_csr
from learners.regression import _kernels as K
from learners.regression import _sgd_kernels as KS
from learners.regression._targets import check_targets
from learners.weights import check_sample_weight

_NO_LOG = (np.empty(0, dtype=np.int64), np.empty((0, 2)))  # update_diag: don't log


@dataclass
class RegressionState:
    """Everything an online regressor has learned (plain arrays and scalars)."""

    mu: np.ndarray  # (d,)
    # AROW: (d,) diagonal, (d, d) full; SGD: (d, 2), each coordinate's AdaGrad sum and
    # scale (learners.regression._sgd_kernels); None for PA
    sigma: np.ndarray | None
    n_seen: int = 0
    n_updates: int = 0
    # [n_y, m, M2]: weighted count, mean and sum of squared deviations of y
    y_stats: np.ndarray = field(default_factory=lambda: np.zeros(3))
    # [n_c, c]: weighted count and mean of AROW's squared standardised residuals;
    # SGD: [H, N, lo, hi], the weight and the weighted sum of the normalised ‖x̃‖² seen,
    # and the range of y seen (its predictions are clipped to it)
    noise: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0]))


class CheckedTargets(NamedTuple):
    """A batch, its targets and weights as ``check`` validated them (for ``update``)."""

    dim: int
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    y: np.ndarray
    sw: np.ndarray


def _y_scale(n_y: float, m2: float) -> float:
    # the kernels' y_scale, in Python (the same operations, so the same bits)
    return math.sqrt(m2 / n_y) if n_y > 0.0 and m2 > 0.0 else 0.0


class RegressorModel:
    """State, learning and prediction of ``LinearRegressor`` (see there)."""

    kind: ClassVar[str] = "regression"
    algorithm: ClassVar[str] = ""
    _code: ClassVar[int] = -1
    _has_cov: ClassVar[bool] = True
    _aux_cols: ClassVar[int] = 0  # SGD: the columns kept beside each weight (no covariance)
    _y_units: ClassVar[bool] = False  # SGD: μ predicts y − m in y's units, not (y − m)/s

    def _setup(
        self, dim: int, covariance: str, epsilon: float = 0.0, C: float = 0.0, r: float = 0.0
    ) -> None:
        self.dim = _check_dim(dim)
        self.covariance = _covariance(covariance, self.dim) if self._has_cov else "none"
        self._eps, self._C, self._r = epsilon, C, r
        # what the examples were (kept in artifacts, never part of the learned state)
        self.features_: FeatureSpec | None = None
        self.feature_names_: FeatureNames | None = None
        self._restore(self._initial_state())

    @property
    def params(self) -> dict[str, Any]:
        """The hyperparameters (JSON-able); ``make_regressor(algo, dim, params)`` rebuilds."""
        raise NotImplementedError

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}(dim={self.dim}{args})"

    # ------------------------------------------------------------------ state

    def _initial_state(self) -> RegressionState:
        d = self.dim
        if self.covariance == "full":
            sigma: np.ndarray | None = np.eye(d)
        elif self._aux_cols:
            return RegressionState(np.zeros(d), np.zeros((d, self._aux_cols)), noise=np.zeros(4))
        else:
            sigma = np.ones(d) if self._has_cov else None
        return RegressionState(np.zeros(d), sigma)

    def state(self) -> RegressionState:
        """A copy of the learned state."""
        sigma: np.ndarray | None
        if self.covariance == "full":
            mu, sigma = self._mu.copy(), self._S.copy()
        elif self._aux_cols:
            mu, sigma = self._w[:, 0].copy(), self._w[:, 1:].copy()
        else:
            mu = self._w[:, 0].copy()  # (a view when _w is one column: PA)
            sigma = self._w[:, 1].copy() if self._has_cov else None
        st = self._stats
        return RegressionState(
            mu, sigma, self.n_seen_, self.n_updates_, st[:3].copy(), st[3:].copy()
        )

    def _check_state(self, st: RegressionState) -> None:
        """``ValueError`` naming what of ``st`` this model cannot hold."""
        d = self.dim
        if np.shape(st.mu) != (d,):
            raise ValueError(f"state.mu: shape {np.shape(st.mu)}, expected {(d,)}")
        want = None if not self._has_cov else (d, d) if self.covariance == "full" else (d,)
        if self._aux_cols:
            want = (d, self._aux_cols)
        got = None if st.sigma is None else np.shape(st.sigma)
        if got != want:
            raise ValueError(f"state.sigma: shape {got}, expected {want}")
        for name, shape in (("y_stats", (3,)), ("noise", (4 if self._aux_cols else 2,))):
            if np.shape(getattr(st, name)) != shape:
                raise ValueError(
                    f"state.{name}: shape {np.shape(getattr(st, name))}, expected {shape}"
                )
        arrays = [st.mu, st.y_stats, st.noise] + ([] if st.sigma is None else [st.sigma])
        if not all(np.isfinite(np.asarray(a, dtype=np.float64)).all() for a in arrays):
            raise ValueError("state arrays hold non-finite values")
        if self.covariance == "diagonal" and not (np.asarray(st.sigma) > 0.0).all():
            raise ValueError("state.sigma: a diagonal covariance must be > 0")
        if self._aux_cols and not (np.asarray(st.sigma) >= 0.0).all():
            raise ValueError("state.sigma: SGD's sums and scales must be >= 0")
        n_y, _, m2 = (float(v) for v in st.y_stats)
        n_c, c = (float(v) for v in st.noise[:2])
        if n_y < 0.0 or m2 < 0.0 or n_c < 0.0 or c < 0.0:
            raise ValueError("state.y_stats / state.noise: counts and squares must be >= 0")
        if self._aux_cols and not st.noise[2] <= st.noise[3]:
            raise ValueError("state.noise: SGD's range of y must have lo <= hi")
        for name in ("n_seen", "n_updates"):
            v = getattr(st, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
                raise ValueError(f"state.{name}: must be an integer >= 0, got {v!r}")

    def _restore(self, st: RegressionState) -> None:
        f64 = np.float64
        if self.covariance == "full":
            self._mu = np.array(st.mu, dtype=f64)
            self._S = np.array(st.sigma, dtype=f64)
        elif self._aux_cols:  # (w, G, n) side by side, as the kernel reads them
            self._w = np.ascontiguousarray(np.column_stack([st.mu, st.sigma]), dtype=f64)  # type: ignore[list-item]
        elif self._has_cov:
            # (μ, σ) side by side: a sparse update touches one cache line per coordinate
            self._w = np.ascontiguousarray(np.stack([st.mu, st.sigma], axis=-1), dtype=f64)  # type: ignore[list-item]
        else:
            self._w = np.array(st.mu, dtype=f64).reshape(self.dim, 1)
        self._stats = np.concatenate([st.y_stats, st.noise]).astype(f64)
        self.n_seen_ = int(st.n_seen)
        self.n_updates_ = int(st.n_updates)

    @property
    def y_mean_(self) -> float:
        """The (weighted) mean of the targets learned so far (0.0 before any)."""
        return float(self._stats[1])

    @property
    def y_std_(self) -> float:
        """Their (weighted, population) standard deviation s (0.0 before any spread)."""
        return _y_scale(float(self._stats[0]), float(self._stats[2]))

    def weights_view(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(mu, sigma)``: copies of the weights of the standardised target (ŷ = m +
        s·(μ·x); SGD: of y − m in y's units) and their variances (the diagonal of Σ;
        ``None`` for PA and SGD)."""
        if self.covariance == "full":
            return self._mu.copy(), np.diagonal(self._S).copy()
        return self._w[:, 0].copy(), (self._w[:, 1].copy() if self._has_cov else None)

    @property
    def coef_(self) -> np.ndarray:
        """The weights in the target's units, s·μ (SGD: μ): what a unit of each feature adds to
        the prediction (ŷ = m + coef_·x); what ``explain`` and ``/weights`` show."""
        mu, _ = self.weights_view()
        return mu if self._y_units else mu * self.y_std_

    def reopen_confidence(self, amount: float) -> None:
        """Move Σ a fraction ``amount`` in [0, 1] of the way back to its prior I (1: the
        prior), keeping μ; PA keeps no Σ: a no-op. After a drift, AROW's steps grow again
        and its served variance widens, as for a model less sure of its weights. SGD's
        AdaGrad sums shrink by that fraction (its steps grow again likewise)."""
        from learners.linear.confidence import check_amount, reopen_diagonal, reopen_full

        if self._aux_cols:
            self._w[:, 1] *= 1.0 - check_amount(amount)
        elif self.covariance == "full":
            reopen_full(self._S[None, :, :], 2, amount)
        elif self._has_cov:
            reopen_diagonal(self._w[None, :, 1], 2, amount)
        else:
            check_amount(amount)

    # ------------------------------------------------------------------ learning

    def check(
        self,
        batch: Batch,
        y: Sequence[Any] | np.ndarray,
        sample_weight: Sequence[float] | np.ndarray | None = None,
    ) -> CheckedTargets:
        """``update``'s validation of its arguments (raising as it does), changing nothing."""
        ip, ix, vs = checked_csr(batch, self.dim)
        n = ip.shape[0] - 1
        targets = check_targets(y, n)
        return CheckedTargets(self.dim, ip, ix, vs, targets, check_sample_weight(sample_weight, n))

    def update(
        self,
        batch: Batch,
        y: Sequence[Any] | np.ndarray,
        sample_weight: Sequence[float] | np.ndarray | None = None,
        checked: CheckedTargets | None = None,
    ) -> UpdateResult:
        """Predict-then-learn each example in order; all or nothing.

        ``y``: finite numbers, one per row. ``sample_weight``: an importance weight
        h > 0 per row (``None`` or ones: the unweighted update, bit for bit); how it
        enters the step is the algorithm's (see its module); the target statistics
        count the row h times. Returns the progressive figures: ``predicted`` (ŷ
        before learning the row, in y's units), ``variance`` (AROW: ŷ's predictive
        variance, else ``None``), ``errors`` = |y − ŷ| and their sum ``loss_sum``, and
        ``updates``, the rows that changed μ. Raises ``ValueError``/``FeatureError``
        naming the culprit (``labels[i]``, ``batch[i]``, ``sample_weight[i]``) before
        anything changes, and :class:`NonFiniteWeightsError` (state restored: weights,
        target statistics and noise scale) if a row would make the state non-finite.
        ``checked``: ``check(batch, y, sample_weight)`` of these very arguments.
        """
        if checked is None or checked.dim != self.dim:
            checked = self.check(batch, y, sample_weight)
        _, ip, ix, vs, targets, sw = checked
        n = ip.shape[0] - 1
        pred, var = np.empty(n), np.empty(n)
        fail, updates = self._run(ip, ix, vs, targets, sw, pred, var)
        if fail >= 0:
            raise NonFiniteWeightsError(fail)
        self.n_seen_ += n
        self.n_updates_ += updates
        errors = np.abs(targets - pred)
        return UpdateResult(
            applied=n, loss_sum=float(errors.sum()), updates=updates, errors=errors,
            predicted=pred, variance=var if self._has_cov else None,
        )  # fmt: skip

    def _run(
        self,
        ip: np.ndarray,
        ix: np.ndarray,
        vs: np.ndarray,
        y: np.ndarray,
        sw: np.ndarray,
        pred: np.ndarray,
        var: np.ndarray,
    ) -> tuple[int, int]:
        """The kernel over every row; on failure the state is as before the call."""
        saved_stats = self._stats.copy()
        if self.covariance == "full":
            # the update is O(d²) a row anyway: one copy of Σ is what a row costs
            mu0, S0 = self._mu.copy(), self._S.copy()
            fail, updates = K.update_full(
                ip, ix, vs, y, sw, self._mu, self._S, self._r, self._stats, pred, var,
                np.empty(self.dim),
            )  # fmt: skip
            if fail >= 0:
                self._mu, self._S = mu0, S0
        elif self._aux_cols:
            fail, updates = self._run_sgd(self._w, ip, ix, vs, y, sw, self._stats, pred, True)
        else:
            w = self._w
            args = (ip, ix, vs, y, sw, w, self._has_cov, self._code, self._eps, self._C, self._r)
            nnz = ix.shape[0]
            if nnz >= w.shape[0]:
                # the undo log would outgrow the state (a long batch): copy the state
                snap = w.copy()
                fail, updates = K.update_diag(*args, self._stats, pred, var, *_NO_LOG, False)
                if fail >= 0:
                    np.copyto(w, snap)
            else:  # log the old values of the coordinates written (O(nnz))
                log_ix, log_w = np.empty(nnz, dtype=np.int64), np.empty((nnz, 2))
                fail, updates = K.update_diag(*args, self._stats, pred, var, log_ix, log_w, True)
        if fail >= 0:
            np.copyto(self._stats, saved_stats)
        return int(fail), int(updates)

    def _run_sgd(
        self,
        w: np.ndarray,
        ip: np.ndarray,
        ix: np.ndarray,
        vs: np.ndarray,
        y: np.ndarray,
        sw: np.ndarray,
        stats: np.ndarray,
        pred: np.ndarray,
        undo: bool,
    ) -> tuple[int, int]:
        """SGD's kernel over every row of ``w`` (the state or a copy); with ``undo`` the
        rows written are put back on failure (from a log, or a copy for a long batch)."""
        nnz = ix.shape[0]
        args = (ip, ix, vs, y, sw, w, self._C, stats, pred)
        if not undo or nnz >= w.shape[0]:
            snap = w.copy() if undo else None
            fail, updates = KS.update_sgd(*args, _NO_LOG[0], np.empty((0, 3)), False)
            if fail >= 0 and snap is not None:
                np.copyto(w, snap)
        else:
            log_ix, log_w = np.empty(nnz, dtype=np.int64), np.empty((nnz, 3))
            fail, updates = KS.update_sgd(*args, log_ix, log_w, True)
        return int(fail), int(updates)

    def first_nonfinite_row(
        self,
        batch: Batch,
        y: Sequence[Any] | np.ndarray,
        sample_weight: Sequence[float] | np.ndarray | None = None,
        checked: CheckedTargets | None = None,
    ) -> int | None:
        """The first row whose update would make the state non-finite, or None when
        ``update(batch, y, sample_weight)`` would succeed; the model is unchanged.
        A dry run on a copy of the coordinates the batch touches (O(nnz); a full Σ is
        copied whole). Malformed input raises as ``update`` does."""
        if checked is None or checked.dim != self.dim:
            checked = self.check(batch, y, sample_weight)
        _, ip, ix, vs, targets, sw = checked
        n = ip.shape[0] - 1
        pred, var, stats = np.empty(n), np.empty(n), self._stats.copy()
        if self.covariance == "full":
            fail, _ = K.update_full(
                ip, ix, vs, targets, sw, self._mu.copy(), self._S.copy(), self._r, stats,
                pred, var, np.empty(self.dim),
            )  # fmt: skip
        elif self._aux_cols:
            small, cols = self._support(ix)
            fail, _ = self._run_sgd(small, ip, cols, vs, targets, sw, stats, pred, False)
        else:
            small, cols = self._support(ix)
            fail, _ = K.update_diag(
                ip, cols, vs, targets, sw, small, self._has_cov,
                self._code, self._eps, self._C, self._r, stats, pred, var, *_NO_LOG, False,
            )  # fmt: skip
        return None if fail < 0 else int(fail)

    def _support(self, ix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A copy of the state rows a batch touches and its columns renumbered into it."""
        if 4 * ix.shape[0] >= self.dim:  # a small state: a copy of it all is cheapest
            return self._w.copy(), ix
        # a row reads and writes only its own coordinates: the batch's support,
        # renumbered, learns exactly as the whole state would
        support = np.unique(ix)
        return self._w[support], np.searchsorted(support, ix)  # (copies)

    # ------------------------------------------------------------------ prediction

    def _scores(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        ip, ix, vs = checked_csr(batch, self.dim)
        if self.covariance == "full":
            return K.scores_full(ip, ix, vs, self._mu, self._S)
        return K.scores_diag(ip, ix, vs, self._w, self._has_cov)

    def predict(self, batch: Batch) -> np.ndarray:
        """ŷ = m + s·(μ·x) per row, in y's units (m before any spread; 0.0 before any
        example)."""
        return self.predict_details(batch)[0]

    def predict_details(self, batch: Batch) -> tuple[np.ndarray, np.ndarray | None]:
        """``(values, variances)``: ŷ per row and, for AROW, its predictive variance
        s²·c·(xᵀΣx + r) in y's units (``None`` for PA). Under AROW's Bayesian reading
        (prior w ~ N(0, c·I), noise variance c·r) the standardised target of x is
        N(μ·x, c·(xᵀΣx + r)); c is estimated online from the pre-update residuals."""
        p, v = self._scores(batch)
        n_y, m, m2, _, c = (float(a) for a in self._stats[:5])
        s = _y_scale(n_y, m2)
        if self._y_units:  # SGD: m + μ·x, clipped to the range of y seen (as VW's)
            values = np.clip(m + p, self._stats[5], self._stats[6]) if n_y > 0.0 else p
        else:
            values = m + s * p
        return values, (s * s * c * (v + self._r) if self._has_cov else None)

    def interval(self, batch: Batch, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the central ``level`` interval of the normal predictive
        distribution of each row (AROW only: PA has no variance, a ``ValueError``)."""
        if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
            raise ValueError(f"level: must be a number in (0, 1), got {level!r}")
        values, variances = self.predict_details(batch)
        if variances is None:
            raise ValueError(f"interval: {self.algorithm} keeps no variance (use arow)")
        half = normal_ppf(0.5 + level / 2.0) * np.sqrt(variances)
        return values - half, values + half
