"""numba kernels for FastXML prediction: routing points to leaves and ranking labels.

Two routings give bit-identical results: point by point (:func:`predict_rows`,
for small batches: no per-tree set-up) and node by node (:func:`apply_batch`,
for large batches: each reached node's weights are scattered once). Both sum a
node's score as its intercept plus the products in increasing feature order.
All kernels run with ``nogil=True``; callers split trees or rows over threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _route(x_dense, root, child_pos, child_neg, w_ptr, w_idx, w_val, intercept):
    node = root
    while child_pos[node] >= 0:
        s = intercept[node]
        for q in range(w_ptr[node], w_ptr[node + 1]):
            s += w_val[q] * x_dense[w_idx[q]]
        node = child_pos[node] if s >= 0.0 else child_neg[node]
    return node


@njit(cache=True, nogil=True)
def apply_rows(
    indptr, indices, values, dim, roots, child_pos, child_neg, w_ptr, w_idx, w_val, intercept, out
):
    """``out[i, t]`` = the leaf (global node id) of row ``i`` in tree ``t``."""
    xd = np.zeros(dim)
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            xd[indices[p]] = values[p]
        for t in range(roots.shape[0]):
            out[i, t] = _route(xd, roots[t], child_pos, child_neg, w_ptr, w_idx, w_val, intercept)
        for p in range(indptr[i], indptr[i + 1]):
            xd[indices[p]] = 0.0


@njit(cache=True, nogil=True)
def predict_rows(
    indptr,
    indices,
    values,
    dim,
    roots,
    child_pos,
    child_neg,
    w_ptr,
    w_idx,
    w_val,
    intercept,
    leaf_ptr,
    leaf_lab,
    leaf_val,
    n_labels,
    k,
    lo,
    hi,
    out_lab,
    out_score,
):
    """Top-``k`` labels of rows ``lo..hi`` by the leaf distributions averaged over trees."""
    xd = np.zeros(dim)
    score = np.zeros(n_labels)
    seen = np.zeros(n_labels, dtype=np.bool_)
    touched = np.empty(n_labels, dtype=np.int64)
    n_trees = roots.shape[0]
    for i in range(lo, hi):
        for p in range(indptr[i], indptr[i + 1]):
            xd[indices[p]] = values[p]
        nt = 0
        for t in range(n_trees):
            leaf = _route(xd, roots[t], child_pos, child_neg, w_ptr, w_idx, w_val, intercept)
            for q in range(leaf_ptr[leaf], leaf_ptr[leaf + 1]):
                lab = leaf_lab[q]
                if not seen[lab]:
                    seen[lab] = True
                    touched[nt] = lab
                    nt += 1
                score[lab] += leaf_val[q]
        _emit_topk(score, seen, touched, nt, n_trees, k, i, out_lab, out_score)
        for p in range(indptr[i], indptr[i + 1]):
            xd[indices[p]] = 0.0


@njit(cache=True, nogil=True)
def apply_batch(
    indptr,
    indices,
    values,
    dim,
    roots,
    tree_end,
    child_pos,
    child_neg,
    w_ptr,
    w_idx,
    w_val,
    intercept,
    t_lo,
    t_hi,
    out,
):
    """``out[i, t]`` for trees ``t_lo..t_hi``, routing all rows node by node.

    For a batch this beats routing point by point: each reached node's weights
    are scattered once into a dense vector and a row's score then costs its own
    non-zeros only. Products are summed in increasing feature order, exactly as
    :func:`_route` does (features missing on one side add an exact 0), so both
    give bit-identical scores and routes.
    """
    n = indptr.shape[0] - 1
    dense_w = np.zeros(dim)
    perm = np.empty(n, dtype=np.int64)
    tmp = np.empty(n, dtype=np.int64)
    for t in range(t_lo, t_hi):
        root = roots[t]
        size = tree_end[t] - root
        start = np.zeros(size, dtype=np.int64)
        stop = np.zeros(size, dtype=np.int64)
        for i in range(n):
            perm[i] = i
        stop[0] = n
        for local in range(size):
            a = start[local]
            b = stop[local]
            if a == b:
                continue
            node = root + local
            if child_pos[node] < 0:
                for r in range(a, b):
                    out[perm[r], t] = node
                continue
            for q in range(w_ptr[node], w_ptr[node + 1]):
                dense_w[w_idx[q]] = w_val[q]
            lo = a
            hi = b
            for r in range(a, b):  # stable partition: positives to the front
                i = perm[r]
                s = intercept[node]
                for p in range(indptr[i], indptr[i + 1]):
                    s += dense_w[indices[p]] * values[p]
                if s >= 0.0:
                    perm[lo] = i
                    lo += 1
                else:
                    hi -= 1
                    tmp[hi] = i
            for r in range(lo, b):  # negatives were collected backwards
                perm[r] = tmp[b - 1 - (r - lo)]
            for q in range(w_ptr[node], w_ptr[node + 1]):
                dense_w[w_idx[q]] = 0.0
            start[child_pos[node] - root] = a
            stop[child_pos[node] - root] = lo
            start[child_neg[node] - root] = lo
            stop[child_neg[node] - root] = b


@njit(cache=True, nogil=True)
def topk_from_leaves(leaves, leaf_ptr, leaf_lab, leaf_val, n_labels, k, lo, hi, out_lab, out_score):
    """Top-``k`` labels of rows ``lo..hi`` given their leaf in every tree."""
    score = np.zeros(n_labels)
    seen = np.zeros(n_labels, dtype=np.bool_)
    touched = np.empty(n_labels, dtype=np.int64)
    n_trees = leaves.shape[1]
    for i in range(lo, hi):
        nt = 0
        for t in range(n_trees):
            leaf = leaves[i, t]
            for q in range(leaf_ptr[leaf], leaf_ptr[leaf + 1]):
                lab = leaf_lab[q]
                if not seen[lab]:
                    seen[lab] = True
                    touched[nt] = lab
                    nt += 1
                score[lab] += leaf_val[q]
        _emit_topk(score, seen, touched, nt, n_trees, k, i, out_lab, out_score)


@njit(cache=True, nogil=True)
def _emit_topk(score, seen, touched, nt, n_trees, k, i, out_lab, out_score):
    tl = np.sort(touched[:nt])
    key = np.empty(nt)
    for j in range(nt):
        key[j] = -score[tl[j]]
    order = np.argsort(key, kind="mergesort")  # ties: smaller label id first
    for j in range(k):
        if j < nt:
            out_lab[i, j] = tl[order[j]]
            out_score[i, j] = score[tl[order[j]]] / n_trees
        else:
            out_lab[i, j] = -1
            out_score[i, j] = 0.0
    for j in range(nt):
        score[touched[j]] = 0.0
        seen[touched[j]] = False
