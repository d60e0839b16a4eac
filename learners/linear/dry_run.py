"""Would this batch make a linear classifier's weights non-finite? A dry run at O(nnz).

An example reads and writes only the weight coordinates of its own non-zero
features (plus whole per-label rows and scalars), so the model restricted to the
batch's support U, the union of its feature indices, learns the batch exactly as
the whole model would on those coordinates, and leaves the others as they are.
The dry run copies the (labels x U) block, not the model: a batch of a 2**20-dim
sparse model costs what its own update costs. (A full-covariance model keeps the
U x U block of each Σ: its updates read Σ only through Σx with x supported on U.)

>>> from learners.features import FeatureSpec
>>> from learners.linear import make_classifier
>>> spec = FeatureSpec.sparse(1000)
>>> clf = make_classifier("pa", dim=1000)
>>> first_nonfinite_row(clf, spec.encode([{"5": 1.0}, {"7": 1e200, "9": 1e200}]), ["a", "b"])
1
>>> clf.n_seen_, first_nonfinite_row(clf, spec.encode([{"5": 1.0}]), ["a"])
(0, None)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from learners.base import Label
from learners.features import Batch
from learners.linear._base import LinearClassifier
from learners.linear._dry_run_kernels import dry_run_diag
from learners.linear._learning import CheckedBatch, NonFiniteWeightsError
from learners.linear._state import LinearState

__all__ = ["first_nonfinite_row"]


def first_nonfinite_row(
    clf: LinearClassifier,
    batch: Batch,
    labels: Sequence[Label] | np.ndarray,
    sample_weight: Sequence[float] | np.ndarray | None = None,
    checked: CheckedBatch | None = None,
) -> int | None:
    """The first row of ``batch`` whose update would make ``clf``'s weights non-finite
    (``clf`` is not changed), or None when ``clf.update(batch, labels, sample_weight)``
    would succeed on the current state (the weights are part of the run: a huge one
    that overflows the step is found here). Malformed input raises as ``update`` does.
    ``checked``: ``clf.check(batch, labels, sample_weight)``, if the caller made it (to
    hand it to the ``update`` that follows)."""
    if checked is None or checked.label_index is not clf._index:
        checked = clf.check(batch, labels, sample_weight)  # update's checks, in its order
    ip, ix, vs, y, new, sw = checked[1:]
    if clf.covariance != "full" and not new:
        # The usual case, in one kernel call (learners.linear._dry_run_kernels): update's
        # kernel on a copy of the batch's support. A batch that brings new labels grows
        # the state between kernel runs: the general path below.
        if ip.shape[0] == 1:
            return None  # no rows
        row = dry_run_diag(ip, ix, vs, y, len(clf.labels_), clf._w, clf._code, clf._c, clf._phi, sw)
        return None if row < 0 else int(row)
    return _first_nonfinite_row_twin(clf, batch, ix, vs, labels, sample_weight)


def _first_nonfinite_row_twin(
    clf: LinearClassifier,
    batch: Batch,
    ix: np.ndarray,
    vs: np.ndarray,
    labels: Sequence[Label] | np.ndarray,
    sample_weight: Sequence[float] | np.ndarray | None,
) -> int | None:
    """The general dry run (full covariance, or labels new to the model): a twin
    classifier holding the model restricted to the batch's support learns the batch."""
    cov = clf._cov
    if ix.size >= clf.dim and (cov is None or cov.ndim == 2):
        # A batch that touches as many coordinates as the model has (a dense model's,
        # typically): copying the whole state is cheaper than finding the support.
        small, k = batch, clf.dim
        mu = clf._mean.copy()
        cov = None if cov is None else cov.copy()
    else:
        support = np.unique(ix)
        k = max(int(support.size), 1)  # a batch of empty rows still runs (on one coordinate)
        if support.size == 0:
            support = np.zeros(1, dtype=np.int64)
        small = Batch(batch.indptr, np.searchsorted(support, ix), vs, k)
        # fancy indexing copies: the twin never shares an array with clf
        mu = clf._mean[:, support]
        if cov is not None:
            cov = cov[:, support[:, None], support] if cov.ndim == 3 else cov[:, support]
    twin = copy.copy(clf)  # same class and hyperparameters; its state is replaced below
    twin.dim = k
    twin._restore(LinearState(list(clf.labels_), mu, cov, clf.n_seen_, clf.n_updates_))
    try:
        twin.update(small, labels, sample_weight)
    except NonFiniteWeightsError as e:
        return e.row
    return None
