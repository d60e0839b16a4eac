"""The dry run of a diagonal (or PA's covariance-free) update as one numba call.

``dry_run_diag`` answers "which row, if any, would make the weights non-finite?"
without touching the model: it gathers the batch's support (the coordinates its rows
touch, in every label's row of the state) into a fresh compact array, renumbers the
batch's indices into it, and runs the very kernel ``update`` runs
(:func:`learners.linear._kernels.update_diag`) on that copy, without its undo log.

Why the answer is exact: an example reads and writes only the coordinates of its
own non-zero features (in every class row it touches), so the compact copy holds
every value the real update would read, in the same order (each row's indices are
renumbered one to one and visited in the same order, so every sum is the same
floating-point sum). The same ``step`` gives the same (α, β, κ) and the same
finiteness checks fail at the same row.

The support is found with an open-addressing hash table of twice the batch's
non-zeros (Fibonacci hashing on the high bits), O(nnz) and independent of the
model's dimension; a batch with as many non-zeros as the model has coordinates
(a dense model's) copies the whole state instead, which is then no bigger.

Until this kernel the dry run did the same in numpy (``np.unique``, ``searchsorted``,
fancy indexing, a twin classifier and its ``update``): ~1.1-3x the apply's own
cost on a 100-row batch, almost all of it Python and numpy call overhead
(``bench/update_path.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from learners.linear._kernels import update_diag

_FIB = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: Knuth's multiplicative hash
_EMPTY = -1


@njit(cache=True)
def _support(indices):  # pragma: no cover - numba
    """(local index of each non-zero, the distinct coordinates in first-seen order, k)."""
    nnz = indices.shape[0]
    bits = 3
    while (1 << bits) < 2 * nnz:
        bits += 1
    size = 1 << bits
    mask = size - 1
    shift = np.uint64(64 - bits)
    keys = np.full(size, _EMPTY, dtype=np.int64)
    slots = np.empty(size, dtype=np.int64)
    local = np.empty(nnz, dtype=np.int64)
    support = np.empty(max(nnz, 1), dtype=np.int64)
    k = 0
    for p in range(nnz):
        j = indices[p]
        h = np.int64((np.uint64(j) * _FIB) >> shift)
        while True:
            key = keys[h]
            if key == j:
                local[p] = slots[h]
                break
            if key == _EMPTY:
                keys[h] = j
                slots[h] = k
                support[k] = j
                local[p] = k
                k += 1
                break
            h = (h + 1) & mask
    return local, support, k


@njit(cache=True)
def dry_run_diag(indptr, indices, values, y, n_labels, w, algo, c, phi, sw):  # pragma: no cover
    """The first row of the batch whose update would make ``w`` non-finite, or -1;
    ``w`` (R x d x C, as ``update_diag`` takes it) is only read. The arguments are
    ``update_diag``'s for the whole batch, already validated (``_check_batch``,
    ``label_codes`` with no new label, ``check_sample_weight``)."""
    n = indptr.shape[0] - 1
    R, d, C = w.shape
    no_mv = np.empty((0, 2))
    no_log_w = np.empty((0, 2))
    no_log_u = np.empty((0, 3), dtype=np.int64)
    if indices.shape[0] >= d:
        local_w = w.copy()
        local_ix = indices
    else:
        local_ix, support, k = _support(indices)
        local_w = np.empty((R, max(k, 1), C))
        if k == 0:  # only empty rows: nothing is read, one coordinate keeps shapes sane
            local_w[:] = 0.0
        for r in range(R):
            for t in range(k):
                for q in range(C):
                    local_w[r, t, q] = w[r, support[t], q]
    res = update_diag(
        indptr, local_ix, values, y, 0, n, n_labels, local_w, algo, c, phi, sw,
        no_mv, no_log_w, no_log_u,
    )  # fmt: skip
    return res[0]
