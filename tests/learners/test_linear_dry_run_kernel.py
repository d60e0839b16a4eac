"""The one-call dry run (``learners.linear._dry_run_kernels``) against the general one
(a twin classifier on the batch's support, ``_first_nonfinite_row_twin``) and against
a real ``update`` on a copy; and ``calibration.calibrated_z`` against ``margin_z``.

The kernel finds the batch's support with an open-addressing table: these batches
include indices that share their low bits (multiples of 2**6 and 2**10, which a
low-bits hash would pile into one slot) and models wide enough that the support is
gathered (not the whole state copied)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from learners.features import Batch
from learners.linear import (
    ALGORITHMS,
    LinearClassifier,
    LinearState,
    NonFiniteWeightsError,
    first_nonfinite_row,
    make_classifier,
)
from learners.linear.calibration import calibrated_z, link_is_probit, margin_z
from learners.linear.dry_run import _first_nonfinite_row_twin

DIM = 1 << 14  # wide enough that a batch's support is gathered, not the state copied


def _sparse_batch(rng: np.random.Generator, n: int, pattern: str) -> Batch:
    rows = []
    for _ in range(n):
        k = int(rng.integers(0, 9))  # empty rows too
        if pattern == "strided":  # equal low bits: one hash slot for a low-bits hash
            cols = np.unique(rng.choice(DIM >> 10, size=k) << 10) if k else np.zeros(0, int)
        elif pattern == "strided6":
            cols = np.unique(rng.choice(DIM >> 6, size=k) << 6) if k else np.zeros(0, int)
        else:
            cols = np.unique(rng.integers(0, DIM, size=k))
        big = rng.random() < 0.25
        mags = 10.0 ** rng.uniform(-300, 200, cols.size) if big else np.ones(cols.size)
        vals = rng.choice([-1.0, 1.0], cols.size) * mags * rng.uniform(0.1, 1.0, cols.size)
        rows.append((cols.astype(np.int64), vals))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(c) for c, _ in rows], out=indptr[1:])
    indices = np.concatenate([c for c, _ in rows] or [np.zeros(0, np.int64)])
    values = np.concatenate([v for _, v in rows] or [np.zeros(0)])
    return Batch(indptr, indices.astype(np.int64), values.astype(np.float64), DIM)


def _real_outcome(clf: LinearClassifier, batch: Batch, labels: list, w: object) -> int | None:
    twin = LinearClassifier.from_bytes(clf.to_bytes())
    try:
        twin.update(batch, labels, w)
    except NonFiniteWeightsError as e:
        return e.row
    return None


@pytest.mark.parametrize("pattern", ["random", "strided", "strided6"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_kernel_agrees_with_the_twin_and_with_update(algorithm: str, pattern: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{algorithm}/{pattern}".encode()))
    clf = make_classifier(algorithm, DIM, {})
    # Known labels first (the kernel runs only when the batch brings no new label);
    # a third label makes the model multiclass half of the time.
    labels_known = ["a", "b", "c"] if rng.random() < 0.5 else ["a", "b"]
    k = len(labels_known)
    first = Batch(np.arange(k + 1), np.arange(k) * 997, np.ones(k), DIM)
    clf.update(first, labels_known)
    outcomes = set()
    for _ in range(30):
        batch = _sparse_batch(rng, int(rng.integers(1, 12)), pattern)
        labels = rng.choice(labels_known, size=batch.n_rows).tolist()
        w = 10.0 ** rng.uniform(-3, 300, batch.n_rows) if rng.random() < 0.3 else None
        before = clf.state_digest()
        fast = first_nonfinite_row(clf, batch, labels, w)
        _, ix, vs = clf._check_batch(batch)
        twin = _first_nonfinite_row_twin(clf, batch, ix, vs, labels, w)
        assert clf.state_digest() == before  # neither dry run changes the model
        assert fast == twin == _real_outcome(clf, batch, labels, w)
        outcomes.add(fast is None)
        if fast is None:
            clf.update(batch, labels, w)
    assert outcomes == {True, False}  # both answers were exercised


def test_kernel_path_refuses_malformed_input_as_update_does() -> None:
    clf = make_classifier("arow", 8, {})
    batch = Batch.from_dense(np.eye(2, 8))
    clf.update(batch, ["a", "b"])
    with pytest.raises(ValueError, match=r"labels: got 1 labels"):
        first_nonfinite_row(clf, batch, ["a"])
    with pytest.raises(ValueError, match=r"sample_weight\[1\]"):
        first_nonfinite_row(clf, batch, ["a", "b"], [1.0, -1.0])
    assert first_nonfinite_row(clf, Batch.from_dense(np.zeros((0, 8))), []) is None


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_calibrated_z_is_margin_z_bit_for_bit(algorithm: str) -> None:
    rng = np.random.default_rng(zlib.crc32(algorithm.encode()))
    clf = make_classifier(algorithm, 4, {"r": 0.7} if algorithm == "arow" else {})
    n = 500
    mv = np.column_stack([rng.normal(size=n) * 10.0 ** rng.uniform(-5, 5, n), rng.random(n)])
    mv[rng.random(n) < 0.2, 1] = 0.0  # x = 0: z = 0
    mv[rng.random(n) < 0.1, 0] = 0.0  # a zero margin: z = ±0.0, signs kept
    mv[rng.random(n) < 0.3, 0] = np.nan  # rows learned while multiclass: not recorded
    y = rng.integers(0, 2, n)
    z, pos = calibrated_z(mv, y, link_is_probit(algorithm), float(clf.params.get("r", 0.0)))
    rows = ~np.isnan(mv[:, 0])
    want_pos = y[rows] == 0
    zt = margin_z(algorithm, clf.params, mv[rows, 0], mv[rows, 1])
    want = np.where(want_pos, zt, -zt)
    assert np.array_equal(pos, want_pos)
    assert z.view(np.int64).tolist() == want.view(np.int64).tolist()  # bits, incl. -0.0


@pytest.mark.parametrize("shift", [0, 6, 20, 40])
def test_support_renumbers_one_to_one(shift: int) -> None:
    """``_support``: each non-zero's local index points at its own coordinate, the
    coordinates are distinct and each one is there (keys sharing low bits included)."""
    from learners.linear._dry_run_kernels import _support

    rng = np.random.default_rng(shift)
    for nnz in (0, 1, 7, 8, 9, 300, 5000):
        indices = (rng.integers(0, max(nnz // 3, 1), nnz) << shift).astype(np.int64)
        local, support, k = _support(indices)
        assert k == np.unique(indices).size
        assert support[:k].tolist() == list(dict.fromkeys(indices.tolist()))  # first-seen order
        assert support[local].tolist() == indices.tolist()


def _result(r: object) -> tuple:
    z = getattr(r, "z", None)
    pos = getattr(r, "positive", None)
    return (r.applied, r.correct, r.loss_sum, r.updates,  # type: ignore[attr-defined]
            None if z is None else z.tobytes(), None if pos is None else pos.tobytes())  # fmt: skip


@pytest.mark.parametrize("algorithm", ["pa1", "arow", "scw2"])
def test_update_with_a_checked_batch_is_update(algorithm: str) -> None:
    """``update(..., checked)`` gives the state and figures of a plain ``update``, also
    when labels were added since the check (known codes stay) or the model was
    restored (a new label index: checked anew), and with a batch of new labels."""
    rng = np.random.default_rng(zlib.crc32(algorithm.encode()))
    a = make_classifier(algorithm, DIM, {})
    a.update(Batch(np.arange(3), np.array([5, 9]), np.ones(2), DIM), ["x", "y"])
    b = LinearClassifier.from_bytes(a.to_bytes())
    for step in range(12):
        batch = _sparse_batch(rng, 6, "random")
        batch = Batch(batch.indptr, batch.indices, np.clip(batch.values, -3, 3), DIM)
        labels = rng.choice(["x", "y"] + (["z"] if step >= 6 else []), size=6).tolist()
        w = rng.uniform(0.5, 2.0, 6) if step % 2 else None
        checked = b.check(batch, labels, w)
        if step == 3:  # a label added in place after the check: the codes still hold
            extra = Batch(np.arange(2), np.array([1]), np.ones(1), DIM)
            a.update(extra, ["q"])
            b.update(extra, ["q"])
        if step == 4:  # a restore builds a new label index: the check is made again
            b._restore(b.state())
        if step == 5:  # ... in which the labels may have other codes (here: reversed)
            st = a.state()
            for m in (a, b):  # each its own arrays (_restore may keep them as they are)
                sigma = None if st.sigma is None else st.sigma[::-1].copy()
                m._restore(LinearState(st.labels[::-1], st.mu[::-1].copy(), sigma))
        assert _result(b.update(batch, labels, w, checked)) == _result(a.update(batch, labels, w))
        assert a.state_digest() == b.state_digest()
