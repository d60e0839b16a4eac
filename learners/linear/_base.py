"""The shell shared by every online linear classifier (state, labels, validation, I/O).

A model is binary while it has seen at most two labels: one mean vector μ (and
covariance Σ), ``labels_[0]`` (the first seen) on the positive side, so
``score(labels_[0]) = μ·x`` and ``score(labels_[1]) = −μ·x``. When a third label
arrives the model becomes multiclass by an exact embedding: μ₀ = μ/2, μ₁ = −μ/2,
Σ₀ = Σ₁ = Σ/2 (the pair's margin (μ₀ − μ₁)·x and variance xᵀ(Σ₀ + Σ₁)x are
unchanged, and halving is exact in floating point), and every new label starts
at μ = 0, Σ = I.

Multiclass updates follow Jubatus: against the highest-scoring wrong label r,
m = (μ_y − μ_r)·x and v = xᵀ(Σ_y + Σ_r)x give the algorithm's (α, β); then
μ_y += αΣ_y x, μ_r −= αΣ_r x and both covariances shrink with β. PA uses
2‖x‖² (the norm of the joint feature map) in place of ‖x‖².

``update`` validates the whole batch before touching the state; labels that are
new to the model are added at their first position in the batch, so a batch is
exactly a loop of single updates.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from learners import artifact
from learners.base import Label, Prediction, UpdateResult, check_label, digest_arrays
from learners.feature_names import FeatureNames, artifact_extras
from learners.features import Batch, FeatureError, FeatureSpec
from learners.linear import _artifact
from learners.linear import _kernels as K
from learners.linear import _kernels_full as KF
from learners.linear._labels import IntTable, int_table, label_codes
from learners.linear._normal import normal_cdf, normal_ppf
from learners.linear._params import _check_dim, _covariance
from learners.linear.calibration import calibrated_z, link_is_probit
from learners.linear.confidence import check_amount, reopen_diagonal, reopen_full
from learners.weights import check_sample_weight

ALGORITHMS: tuple[str, ...] = ("pa", "pa1", "pa2", "cw", "arow", "scw1", "scw2")
KIND = _artifact.KIND
_KEEP_SCRATCH = 1 << 22  # items of each undo scratch buffer kept per thread between calls (32 MiB)
_NO_LOG = (np.empty((0, 2)), np.empty((0, 3), dtype=np.int64))  # update_diag: don't log
_scratch = threading.local()


def _scratch_buffer(name: str, rows: int, cols: int, dtype: type) -> np.ndarray:
    """A reusable (>= ``rows``, ``cols``) buffer, one per thread, shared by every model.

    Fresh buffers cost a page fault per 4 KiB (about 10 ms for a 2**20-dim state),
    so the largest one needed so far is kept, up to ``_KEEP_SCRATCH`` items; a
    bigger request gets a buffer that dies with the call.
    """
    key = f"{name}{cols}"
    buf = getattr(_scratch, key, None)
    if buf is not None and buf.shape[0] >= rows:
        return buf
    if rows * cols > _KEEP_SCRATCH:
        return np.empty((rows, cols), dtype=dtype)
    old = 0 if buf is None else buf.shape[0]
    buf = np.empty((min(max(rows, 4096, 2 * old), _KEEP_SCRATCH // cols), cols), dtype=dtype)
    setattr(_scratch, key, buf)
    return buf


def _copy_to_scratch(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` in the thread's reused snapshot buffer (valid until the next one)."""
    snap = _scratch_buffer("state", a.size, 1, np.float64)[: a.size].reshape(a.shape)
    np.copyto(snap, a)
    return snap


class NotFittedError(ValueError):
    """Prediction was asked of a model that has not learned any label yet."""


class NonFiniteWeightsError(FloatingPointError, ValueError):
    """An example would make the weights inf/NaN; the batch was rejected, state unchanged.

    Both a ``FloatingPointError`` and a ``ValueError`` (bad input, e.g. feature values
    around 1e300); ``location`` names the example (``labels[i]``). Deterministic: a
    replica replaying the same batch raises the same error.
    """

    def __init__(self, row: int) -> None:
        self.row = row
        self.location = f"labels[{row}]"
        super().__init__(
            f"{self.location}: weights became non-finite at {self.location}; state left unchanged"
        )


class CheckedBatch(NamedTuple):
    """A batch with its labels and importance weights checked and coded for one model
    (:meth:`LinearClassifier.check`), so that a dry run and the update that follows it
    validate and code the batch once. The codes hold while ``label_index`` is still the
    model's label index and the batch brought no new label: labels are only ever
    appended to an index in place (a rollback or a restore builds a new one), so the
    code of a known label never changes; ``update`` checks anew otherwise."""

    label_index: dict[Label, int]
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    y: np.ndarray
    new: list[tuple[int, Label]]
    sw: np.ndarray


@dataclass
class LinearState:
    """Everything a linear classifier has learned (plain arrays and scalars)."""

    labels: list[Label]
    mu: np.ndarray  # (R, d): R == 1 while binary, else one row per label
    sigma: np.ndarray | None  # (R, d) diagonal, (R, d, d) full, None for PA
    n_seen: int = 0
    n_updates: int = 0


class LinearClassifier:
    """Base of PA, PA1, PA2, CW, AROW, SCW1, SCW2; use a subclass or ``make_classifier``."""

    kind: ClassVar[str] = KIND
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

    @classmethod
    def from_state(
        cls, algorithm: str, dim: int, params: dict[str, Any], state: LinearState
    ) -> LinearClassifier:
        """A model with the given hyperparameters and learned state (arrays are copied)."""
        from learners.linear import make_classifier

        clf = make_classifier(algorithm, dim, params)
        clf._check_state(state)
        clf._restore(
            LinearState(
                list(state.labels),
                np.array(state.mu, dtype=np.float64),
                None if state.sigma is None else np.array(state.sigma, dtype=np.float64),
                int(state.n_seen),
                int(state.n_updates),
            )
        )
        return clf

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
        if not isinstance(batch, Batch):
            raise TypeError(
                f"batch: expected a learners.features.Batch, got {type(batch).__name__}"
            )
        if batch.dim != self.dim:
            raise ValueError(
                f"batch.dim: {batch.dim} does not match the model dimension {self.dim}"
            )
        ip = np.ascontiguousarray(batch.indptr, dtype=np.int64)
        ix = np.ascontiguousarray(batch.indices, dtype=np.int64)
        vs = np.ascontiguousarray(batch.values, dtype=np.float64)
        if ip.ndim != 1 or ix.ndim != 1 or vs.ndim != 1 or ip.shape[0] == 0:
            raise ValueError("batch: malformed CSR arrays (indptr/indices/values must be 1-d)")
        row, code = K.validate_batch(ip, ix, vs, self.dim)
        if row >= 0:
            if code == K.BAD_INDPTR:
                raise ValueError("batch.indptr: not a valid CSR row pointer for these indices")
            problem = {
                K.BAD_INDEX: f"a feature index is outside [0, {self.dim})",
                K.UNSORTED: "feature indices are not sorted and unique",
                K.NONFINITE: "a feature value is not finite (NaN or infinite)",
            }[code]
            raise FeatureError(f"batch[{row}]", problem)
        return ip, ix, vs

    # ------------------------------------------------------------------ learning

    def check(
        self,
        batch: Batch,
        labels: Sequence[Label] | np.ndarray,
        sample_weight: Sequence[float] | np.ndarray | None = None,
    ) -> CheckedBatch:
        """``update``'s checks of its arguments (raising as it does), and the label codes."""
        ip, ix, vs = self._check_batch(batch)
        n = ip.shape[0] - 1
        y, new = label_codes(labels, n, self._index, self._int_table)
        sw = check_sample_weight(sample_weight, n)
        return CheckedBatch(self._index, ip, ix, vs, y, new, sw)

    def update(
        self,
        batch: Batch,
        labels: Sequence[Label] | np.ndarray,
        sample_weight: Sequence[float] | np.ndarray | None = None,
        checked: CheckedBatch | None = None,
    ) -> UpdateResult:
        """Predict-then-learn each example in order; all-or-nothing on error.

        ``labels`` are strings or integers (a list, or a numpy integer array — the
        fastest form, checked without a Python loop). ``sample_weight``: an optional
        importance weight per example (finite, > 0; ``None`` or ones is the
        unweighted update, bit for bit); how it enters the step is the algorithm's
        (see its module). Returns the progressive
        figures: pre-update predictions that were right, the sum of pre-update
        hinge losses max(0, 1 − m), and how many examples changed the model.
        Raises ``ValueError``/``FeatureError`` naming the culprit (``labels[i]``,
        ``batch[i]``, ``batch.dim``) before anything changes, and
        :class:`NonFiniteWeightsError` (state restored) if an example would make the
        weights non-finite. ``checked``: ``check(batch, labels, sample_weight)`` of these
        very arguments, made earlier (for a dry run); used while its codes hold.
        """
        if checked is None or checked.label_index is not self._index or checked.new:
            checked = self.check(batch, labels, sample_weight)
        _, ip, ix, vs, y, new, sw = checked
        n = ip.shape[0] - 1
        if n == 0:
            return UpdateResult(applied=0)
        # pre-update (margin, variance) of each row learned while the model is binary,
        # and whether each row was predicted right (column 2)
        binary = len(self.labels_) <= 2
        mv = np.full((n, 3), np.nan)
        if new:
            correct, loss_sum, updates = self._update_growing(ip, ix, vs, y, new, sw, mv)
        else:  # the usual case: one kernel run, which undoes itself on failure
            fail, correct, loss_sum, updates = self._run(ip, ix, vs, y, 0, n, sw, mv)
            if fail >= 0:
                raise NonFiniteWeightsError(fail)
        self.n_seen_ += n
        self._fresh = False
        self.n_updates_ += updates
        z, positive = self._calibrated(mv, y) if binary else (None, None)
        return UpdateResult(
            applied=n, correct=correct, loss_sum=loss_sum, updates=updates,
            z=z, positive=positive, probit=link_is_probit(self.algorithm),
            errors=1.0 - mv[:, 2],
        )  # fmt: skip

    def _calibrated(
        self, mv: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(z of ``labels_[0]``, label is ``labels_[0]``) for the rows learned while binary."""
        if mv.shape[0] == 0:
            return None, None
        # calibration.margin_z's z, in one kernel call (bit for bit the same values)
        probit = link_is_probit(self.algorithm)
        r = float(self.params["r"]) if self.algorithm == "arow" else 0.0
        return calibrated_z(mv, y, probit, r)

    def update_parts(
        self,
        batch: Batch,
        labels: Sequence[Label],
        cuts: Sequence[int],
        sample_weight: Sequence[float] | np.ndarray | None = None,
    ) -> list[UpdateResult]:
        """``update`` of rows ``[cuts[k], cuts[k+1])`` in turn (``cuts`` from 0 to the
        batch's length), with each part's progressive figures; all or nothing, as one
        ``update``: on error the state is put back as it was and the error raised. The
        state is the same as after one ``update`` of the whole batch (a batch is only a
        transport). The service uses it when some rows' figures are counted elsewhere
        (delayed labels, scored by the prediction that was served)."""
        if list(cuts[:1]) != [0] or cuts[-1] != batch.n_rows:
            raise ValueError(f"cuts must run from 0 to {batch.n_rows}")
        sw = check_sample_weight(sample_weight, batch.n_rows)
        if len(cuts) <= 2:
            return [self.update(batch, labels, sample_weight)]
        fresh = self._fresh
        saved = None if fresh else self.state()  # a copy of the state: the rollback
        out = []
        try:
            for a, b in itertools.pairwise(cuts):
                part_w = None if sw.size == 0 else sw[a:b]
                out.append(self.update(batch.take(np.arange(a, b)), list(labels[a:b]), part_w))
        except BaseException:
            if saved is None:
                self._reset()
            else:
                self._restore(saved)
            raise
        return out

    def _update_growing(
        self,
        ip: np.ndarray,
        ix: np.ndarray,
        vs: np.ndarray,
        y: np.ndarray,
        new: list[tuple[int, Label]],
        sw: np.ndarray,
        mv: np.ndarray,
    ) -> tuple[int, float, int]:
        """``update`` of a batch with new labels: growth happens at each new label's
        first row, so the call spans several kernel runs; one snapshot rolls all back."""
        n = ip.shape[0] - 1
        labels = list(self.labels_)
        full = self.covariance == "full"
        fresh = self._fresh  # the first batch of a new model: nothing to copy
        snapshot = self.state() if full else None if fresh else _copy_to_scratch(self._w)
        start = 0
        correct = 0
        loss_sum = 0.0
        updates = 0
        pending = list(new)
        for stop in [pos for pos, _ in new] + [n]:
            if stop > start:
                fail, c, ls, u = self._run(ip, ix, vs, y, start, stop, sw, mv, False)
                if fail >= 0:
                    if full:
                        self._restore(snapshot)  # type: ignore[arg-type]
                    elif fresh:
                        self._reset()
                    else:
                        self._w = np.array(snapshot)  # may differ in shape: labels were added
                        self.labels_ = labels
                        self._index = {lab: i for i, lab in enumerate(labels)}
                        self._table = None
                    raise NonFiniteWeightsError(fail)
                correct += c
                loss_sum += ls
                updates += u
            if pending and pending[0][0] == stop:
                self._add_label(pending.pop(0)[1])
            start = stop
        return correct, loss_sum, updates

    def _int_table(self) -> IntTable:
        # rebuilt only after the labels change (_add_label / _restore reset it)
        if self._table is None:
            self._table = int_table(self._index)
        return self._table

    def _run(
        self,
        ip: np.ndarray,
        ix: np.ndarray,
        vs: np.ndarray,
        y: np.ndarray,
        start: int,
        stop: int,
        sw: np.ndarray,
        mv: np.ndarray,
        undo: bool = True,
    ) -> tuple[int, int, float, int]:
        """Kernel over rows [start, stop); with ``undo`` the state is unchanged on failure
        (without, the caller holds a snapshot and restores it)."""
        n_labels = len(self.labels_)
        if self.covariance == "full":
            R = self._mu.shape[0]
            saved = np.zeros(R, dtype=np.bool_)
            # np.empty only reserves: pages are touched for the classes actually saved
            undo_mu = np.empty_like(self._mu)
            undo_S = np.empty_like(self._S)
            return KF.update_full(
                ip, ix, vs, y, start, stop, n_labels, self._mu, self._S,
                self._code, self._c, self._phi, saved, undo_mu, undo_S, sw, mv,
            )  # fmt: skip
        w = self._w
        args = (ip, ix, vs, y, start, stop, n_labels, w, self._code, self._c, self._phi, sw, mv)
        if not undo:
            return K.update_diag(*args, *_NO_LOG)
        sides = 1 if n_labels <= 2 else 2
        n_coords = int(ip[stop] - ip[start]) * sides
        if n_coords >= w.shape[0] * w.shape[1]:
            # The log would outgrow the state (a long batch): copy the state instead
            # (a sequential copy), run without logging, restore the copy on failure.
            snap = _copy_to_scratch(w)
            res = K.update_diag(*args, *_NO_LOG)
            if res[0] >= 0:
                np.copyto(w, snap)
            return res
        # Short batch: log the old values of the touched coordinates (O(nnz)).
        log_w = _scratch_buffer("log_w", n_coords, w.shape[2], np.float64)
        log_u = _scratch_buffer("log_u", (stop - start) * sides, 3, np.int64)
        return K.update_diag(*args, log_w, log_u)

    # ------------------------------------------------------------------ prediction

    def _fitted(self) -> None:
        if not self.labels_:
            raise NotFittedError("model has not learned any label yet")

    def decision_function(self, batch: Batch) -> np.ndarray:
        """(n, K) scores, columns in ``labels_`` order (binary: μ·x and −μ·x; one label: μ·x)."""
        self._fitted()
        return self._decision(*self._check_batch(batch))

    def _decision(self, ip: np.ndarray, ix: np.ndarray, vs: np.ndarray) -> np.ndarray:
        return K.scores(ip, ix, vs, self._mean, len(self.labels_) == 2)

    def predict(self, batch: Batch) -> list[Label]:
        s = self.decision_function(batch)
        labels = self.labels_
        return [labels[k] for k in np.argmax(s, axis=1).tolist()]

    def predict_details(self, batch: Batch) -> list[Prediction]:
        """Label, score, all scores and a confidence per example.

        ``confidence`` (CW, AROW, SCW) is Φ(m/√v): the probability, under the
        Gaussian weights, that the predicted label still beats the runner-up, with
        m = (μ_pred − μ_runner)·x and v = xᵀ(Σ_pred + Σ_runner)x. A binary model
        uses its own margin |μ·x| and variance xᵀΣx (the same pair figures the
        multiclass embedding preserves). ``None`` for PA, or while only one label
        is known (there is no runner-up).
        """
        self._fitted()
        ip, ix, vs = self._check_batch(batch)
        labels = self.labels_
        if self._has_cov and self.covariance != "full" and len(labels) >= 2:
            # the common serving case: one kernel call for scores, ranks and variances
            s, best, margin, var = K.details_diag(ip, ix, vs, self._w, len(labels))
            sqrt, cdf = math.sqrt, normal_cdf
            return [
                Prediction(
                    labels[b],
                    row[b],
                    dict(zip(labels, row, strict=True)),
                    cdf(m / sqrt(v)) if v > 0.0 else 0.5,
                )
                for row, b, m, v in zip(
                    s.tolist(), best.tolist(), margin.tolist(), var.tolist(), strict=True
                )
            ]
        s = self._decision(ip, ix, vs)
        n, k = s.shape
        best, second, margin = K.best_two(s, k == 2)
        conf: list[float | None] = [None] * n
        cov = self._cov
        if cov is not None and k >= 2:
            fn = KF.pair_variance_full if self.covariance == "full" else K.pair_variance_diag
            # a binary model keeps one Σ (row 0) for the pair; second is then -1
            ka = best if k > 2 else np.zeros(n, np.int64)
            var = fn(ip, ix, vs, cov, ka, second)
            conf = [
                normal_cdf(m / math.sqrt(v)) if v > 0.0 else 0.5
                for m, v in zip(margin.tolist(), var.tolist(), strict=True)
            ]
        return [
            Prediction(labels[b], row[b], dict(zip(labels, row, strict=True)), c)
            for row, b, c in zip(s.tolist(), best.tolist(), conf, strict=True)
        ]

    def label_weights(self, label: Label) -> tuple[np.ndarray, np.ndarray | None]:
        """``(w, var)``: the weights that score ``label`` (its score is ``w·x``) and
        their variances (the diagonal of Σ: how sure the model is of each weight;
        ``None`` for PA, which keeps no Σ). Copies. A binary model scores its first
        label with μ and its second with −μ, both with the one Σ; ``KeyError`` for a
        label the model does not know."""
        j = self._index[label]
        binary = len(self.labels_) <= 2
        row = 0 if binary else j
        w = np.array(self._mean[row], dtype=np.float64)
        if binary and j == 1:
            w = -w
        cov = self._cov
        if cov is None:
            return w, None
        var = np.diagonal(cov[row]) if self.covariance == "full" else cov[row]
        return w, np.array(var, dtype=np.float64)

    # ------------------------------------------------------------------ persistence

    def state_digest(self) -> str:
        st = self.state()
        arrays = [st.mu] + ([] if st.sigma is None else [st.sigma])
        meta = [self.algorithm, self.dim, self.params, self.labels_, self.n_seen_, self.n_updates_]
        return digest_arrays(*meta, *arrays)

    def to_bytes(self, meta: dict[str, Any] | None = None) -> bytes:
        """The model as an artifact (kind ``"linear"``): hyperparameters, labels, counts,
        ``mu`` (and ``sigma``), plus ``features_`` and ``feature_names_`` when set.
        ``meta`` adds JSON fields to the artifact's ``meta`` (e.g. where it came from)."""
        return artifact.dumps(KIND, *self._artifact_parts(self.state(), meta))

    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], memoryview]:
        """Copy the learned state now and return a function that serialises the copy.

        The copy is one memcpy of the (interleaved) weights; the slow part, splitting
        and serialising, can then run in a worker thread while updates go on (the
        service's checkpoints do this). ``snapshot()()`` holds the same bytes as
        ``to_bytes()`` taken at the moment of the snapshot (up to the artifact's
        creation time), in a buffer written by :func:`learners.artifact.dumps_buffer`
        (numpy copies and hashlib, which release the GIL: the event loop thread keeps
        running while a worker serialises a 2**20-dimension model).
        """
        # taken now, with the weights (the names' arrays are replaced on an add, never
        # changed in place, so they need no copy)
        extras = artifact_extras(self.features_, self.feature_names_)
        if self.covariance == "full":
            st = self.state()
            return lambda: artifact.dumps_buffer(KIND, *self._artifact_parts(st, meta, extras))
        w = self._w.copy()  # numpy releases the GIL for the copy
        labels, n_seen, n_updates = list(self.labels_), self.n_seen_, self.n_updates_
        has_cov = self._has_cov

        def dump() -> memoryview:
            # strided views of the copy: dumps_buffer copies each column straight into place
            sigma = w[:, :, 1] if has_cov else None
            st = LinearState(labels, w[:, :, 0], sigma, n_seen, n_updates)
            return artifact.dumps_buffer(KIND, *self._artifact_parts(st, meta, extras))

        return dump

    def _artifact_parts(
        self,
        st: LinearState,
        meta: dict[str, Any] | None = None,
        extras: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None,
    ) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
        return _artifact.parts(self, st, meta, extras)

    @classmethod
    def from_bytes(
        cls, blob: bytes | bytearray | memoryview, *, max_bytes: int | None = None
    ) -> LinearClassifier:
        """Read a model written by :meth:`to_bytes` (any algorithm), validated."""
        art = artifact.loads(blob, expected_kind=KIND, max_bytes=max_bytes)
        return cls.from_artifact(art)

    @classmethod
    def from_artifact(cls, art: artifact.Artifact) -> LinearClassifier:
        """The model an :class:`~learners.artifact.Artifact` of kind ``"linear"`` holds
        (with its ``features_`` and ``feature_names_`` when it carries them), validated
        (:func:`learners.linear._artifact.read`)."""
        return _artifact.read(cls, art)


def phi_of(eta: float) -> float:
    """φ = Φ⁻¹(η), the confidence threshold of CW and SCW."""
    return normal_ppf(eta)
