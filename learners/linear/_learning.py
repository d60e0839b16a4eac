"""How an online linear classifier learns: ``update`` (predict, then learn, each
example in order), all or nothing per batch.

Multiclass updates follow Jubatus: against the highest-scoring wrong label r,
m = (μ_y − μ_r)·x and v = xᵀ(Σ_y + Σ_r)x give the algorithm's (α, β); then
μ_y += αΣ_y x, μ_r −= αΣ_r x and both covariances shrink with β. PA uses
2‖x‖² (the norm of the joint feature map) in place of ‖x‖².

``update`` validates the whole batch before touching the state; labels that are
new to the model are added at their first position in the batch, so a batch is
exactly a loop of single updates.

On failure the state is put back: the kernels undo their own changes (the diagonal one
from a log of the coordinates it changed, kept in per-thread scratch buffers), or the
state is restored from a copy taken before (a batch longer than the state, or one that
adds labels).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from learners.base import Label, UpdateResult
from learners.features import Batch
from learners.linear import _kernels as K
from learners.linear import _kernels_full as KF
from learners.linear._labels import label_codes
from learners.linear._state import LinearModel
from learners.linear.calibration import calibrated_z, link_is_probit
from learners.weights import check_sample_weight

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


class LinearLearner(LinearModel):
    """The learning half of ``LinearClassifier``: checks a batch and learns it."""

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
