"""numba kernels for FastXML training: node splits and tree growth.

A node's split (Prabhu & Varma, KDD 2014) alternates the label-side steps of
:mod:`learners.xml._partition_kernels` (optimal rankings r+-, then the sign rule
for delta) with an L1-regularised logistic regression for ``w``
(:mod:`learners.xml._l1_kernels`); the points then go by ``sign(w^T x)``.
Everything runs with ``nogil=True`` so that trees grow on several threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from learners.xml._l1_kernels import l1lr_solve, log1pexp, rng_below
from learners.xml._partition_kernels import alternate_partition


@njit(cache=True, nogil=True)
def _node_csc(rows, indptr, indices, values, bias, fmap, feats, cnt):
    """Column-major block of the node's rows over the features present (+ bias column)."""
    m = rows.shape[0]
    nf = 0
    for r in range(m):
        i = rows[r]
        for p in range(indptr[i], indptr[i + 1]):
            f = indices[p]
            if fmap[f] < 0:
                fmap[f] = nf
                feats[nf] = f
                cnt[nf] = 0
                nf += 1
            cnt[fmap[f]] += 1
    ncol = nf + 1 if bias > 0.0 else nf
    col_ptr = np.zeros(ncol + 1, dtype=np.int64)
    for c in range(nf):
        col_ptr[c + 1] = col_ptr[c] + cnt[c]
    if bias > 0.0:
        col_ptr[nf + 1] = col_ptr[nf] + m
    row_idx = np.empty(col_ptr[ncol], dtype=np.int64)
    vals = np.empty(col_ptr[ncol])
    fill = col_ptr[:nf].copy()
    for r in range(m):
        i = rows[r]
        for p in range(indptr[i], indptr[i + 1]):
            c = fmap[indices[p]]
            row_idx[fill[c]] = r
            vals[fill[c]] = values[p]
            fill[c] += 1
    if bias > 0.0:
        for r in range(m):
            row_idx[col_ptr[nf] + r] = r
            vals[col_ptr[nf] + r] = bias
    for c in range(nf):
        fmap[feats[c]] = -1  # leave the map clean for the next node
    return col_ptr, row_idx, vals, nf


@njit(cache=True, nogil=True)
def split_node(
    rows,
    indptr,
    indices,
    values,
    y_ptr,
    y_idx,
    y_val,
    pw,
    L,
    c_delta,
    c_r,
    balance,
    bias,
    max_part_iter,
    max_outer,
    eps,
    max_newton,
    max_inner,
    rng,
    ws,
):
    """Learn one node's separator. Returns (ok, feature ids, weights, intercept).

    On success ``ws.delta[:m]`` holds each row's side, ``+1`` iff ``w^T x >= 0``.
    ``ws`` bundles the per-tree scratch buffers (see :func:`grow_tree`).
    """
    (
        fmap,
        feats,
        cnt,
        lab_seen,
        node_labels,
        pos_sum,
        neg_sum,
        disc_pos,
        disc_neg,
        delta,
        side,
        logit_pos,
        logit_neg,
        yb,
        cb,
        margins,
    ) = ws
    m = rows.shape[0]
    k = 0
    for r in range(m):
        i = rows[r]
        for p in range(y_ptr[i], y_ptr[i + 1]):
            lab = y_idx[p]
            if not lab_seen[lab]:
                lab_seen[lab] = True
                node_labels[k] = lab
                k += 1
    nl = np.sort(node_labels[:k])
    for t in range(k):
        lab_seen[nl[t]] = False

    col_ptr, row_idx, vals, nf = _node_csc(rows, indptr, indices, values, bias, fmap, feats, cnt)
    w = np.zeros(col_ptr.shape[0] - 1)
    d_ = delta[:m]
    lp = logit_pos[:m]
    ln = logit_neg[:m]
    for r in range(m):
        d_[r] = 1 if rng_below(rng, 2) == 1 else -1
        lp[r] = 0.0  # before w is learned the logistic term is the same for both sides
        ln[r] = 0.0
    outer = 0
    while True:
        alternate_partition(
            rows,
            y_ptr,
            y_idx,
            y_val,
            pw,
            nl,
            L,
            c_r,
            lp,
            ln,
            d_,
            pos_sum,
            neg_sum,
            disc_pos,
            disc_neg,
            max_part_iter,
        )
        n_pos = 0
        for r in range(m):
            if d_[r] > 0:
                n_pos += 1
        if n_pos == 0 or n_pos == m:
            return False, feats[:0].copy(), w[:0].copy(), 0.0
        c_pos = c_delta * m / n_pos if balance else c_delta
        c_neg = c_delta * m / (m - n_pos) if balance else c_delta
        for r in range(m):
            yb[r] = 1.0 if d_[r] > 0 else -1.0
            cb[r] = c_pos if d_[r] > 0 else c_neg
        l1lr_solve(
            col_ptr, row_idx, vals, yb[:m], cb[:m], w, eps, max_newton, max_inner, rng, margins[:m]
        )
        moved = 0
        for r in range(m):
            side[r] = 1 if margins[r] >= 0.0 else -1
            if side[r] != d_[r]:
                moved += 1
        outer += 1
        if moved == 0 or outer >= max_outer:
            break
        # next outer round: delta starts from w's split and now pays the logistic loss
        for r in range(m):
            d_[r] = side[r]
            lp[r] = c_pos * log1pexp(-margins[r])
            ln[r] = c_neg * log1pexp(margins[r])
    n_pos = 0
    for r in range(m):
        d_[r] = side[r]
        if side[r] > 0:
            n_pos += 1
    if n_pos == 0 or n_pos == m:
        return False, feats[:0].copy(), w[:0].copy(), 0.0
    nz = 0
    for c in range(nf):
        if w[c] != 0.0:
            nz += 1
    f_out = np.empty(nz, dtype=np.int64)
    w_out = np.empty(nz)
    q = 0
    for c in range(nf):
        if w[c] != 0.0:
            f_out[q] = feats[c]
            w_out[q] = w[c]
            q += 1
    order = np.argsort(f_out)
    intercept = w[nf] * bias if bias > 0.0 else 0.0
    return True, f_out[order], w_out[order], intercept


@njit(cache=True, nogil=True)
def leaf_distribution(rows, y_ptr, y_idx, y_val, labels_per_leaf, acc, lab_seen, node_labels):
    """Top ``labels_per_leaf`` of the mean label vector of the rows (desc, ties by id)."""
    m = rows.shape[0]
    k = 0
    for r in range(m):
        i = rows[r]
        for p in range(y_ptr[i], y_ptr[i + 1]):
            lab = y_idx[p]
            if not lab_seen[lab]:
                lab_seen[lab] = True
                node_labels[k] = lab
                k += 1
            acc[lab] += y_val[p]
    nl = np.sort(node_labels[:k])
    key = np.empty(k)
    for t in range(k):
        key[t] = -acc[nl[t]]
    order = np.argsort(key, kind="mergesort")
    top = min(k, labels_per_leaf)
    labs = np.empty(top, dtype=np.int64)
    vals = np.empty(top)
    for t in range(top):
        labs[t] = nl[order[t]]
        vals[t] = acc[labs[t]] / m
    for t in range(k):
        acc[nl[t]] = 0.0
        lab_seen[nl[t]] = False
    return labs, vals


@njit(cache=True, nogil=True)
def _ensure(arr, need):
    if need <= arr.shape[0]:
        return arr
    out = np.empty(max(need, 2 * arr.shape[0]), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@njit(cache=True, nogil=True)
def grow_tree(
    indptr,
    indices,
    values,
    dim,
    y_ptr,
    y_idx,
    y_val,
    n_labels,
    pw,
    max_leaf,
    labels_per_leaf,
    L,
    c_delta,
    c_r,
    balance,
    bias,
    max_part_iter,
    max_outer,
    eps,
    max_newton,
    max_inner,
    seed,
    done,
):
    """Grow one tree on all rows. Nodes are numbered in creation order (children > parent).

    ``done`` (int64, 2) counts, as the tree grows, the rows settled in leaves and the
    nodes processed: another thread reads it to show progress inside a tree.

    Returns ``(child_pos, child_neg, w_ptr, w_idx, w_val, intercept, leaf_ptr,
    leaf_lab, leaf_val)``; a leaf has ``child_pos == child_neg == -1``.
    """
    n = indptr.shape[0] - 1
    rng = np.empty(1, dtype=np.uint64)
    rng[0] = np.uint64(seed)
    cap = max(1, 2 * n - 1)  # a binary tree with non-empty leaves has < 2n nodes
    child_pos = np.full(cap, -1, dtype=np.int64)
    child_neg = np.full(cap, -1, dtype=np.int64)
    start = np.zeros(cap, dtype=np.int64)
    stop = np.zeros(cap, dtype=np.int64)
    w_ptr = np.zeros(cap + 1, dtype=np.int64)
    leaf_ptr = np.zeros(cap + 1, dtype=np.int64)
    intercept = np.zeros(cap)
    w_idx = np.empty(1024, dtype=np.int64)
    w_val = np.empty(1024)
    leaf_lab = np.empty(1024, dtype=np.int64)
    leaf_val = np.empty(1024)
    ws = (
        np.full(dim, -1, dtype=np.int64),  # fmap
        np.empty(dim, dtype=np.int64),  # feats
        np.empty(dim, dtype=np.int64),  # cnt
        np.zeros(n_labels, dtype=np.bool_),  # lab_seen
        np.empty(n_labels, dtype=np.int64),  # node_labels
        np.zeros(n_labels),  # pos_sum
        np.zeros(n_labels),  # neg_sum
        np.zeros(n_labels),  # disc_pos
        np.zeros(n_labels),  # disc_neg
        np.empty(n, dtype=np.int64),  # delta
        np.empty(n, dtype=np.int64),  # side
        np.zeros(n),  # logit_pos
        np.zeros(n),  # logit_neg
        np.empty(n),  # y for the L1 solver
        np.empty(n),  # C for the L1 solver
        np.empty(n),  # margins
    )
    acc = np.zeros(n_labels)
    perm = np.arange(n, dtype=np.int64)
    tmp = np.empty(n, dtype=np.int64)
    n_nodes = 1
    stop[0] = n
    nw = 0
    nleaf = 0
    node = 0
    while node < n_nodes:
        a = start[node]
        b = stop[node]
        rows = perm[a:b]
        ok = False
        if b - a > max_leaf:
            ok, f_ids, f_w, icpt = split_node(
                rows,
                indptr,
                indices,
                values,
                y_ptr,
                y_idx,
                y_val,
                pw,
                L,
                c_delta,
                c_r,
                balance,
                bias,
                max_part_iter,
                max_outer,
                eps,
                max_newton,
                max_inner,
                rng,
                ws,
            )
        if ok:
            side = ws[9]
            lo = a
            hi = b
            for r in range(b - a):  # stable partition: positives first
                if side[r] > 0:
                    tmp[lo] = rows[r]
                    lo += 1
            for r in range(b - a):
                if side[r] <= 0:
                    tmp[lo] = rows[r]
                    lo += 1
            n_pos = 0
            for r in range(b - a):
                if side[r] > 0:
                    n_pos += 1
            perm[a:b] = tmp[a:b]
            child_pos[node] = n_nodes
            child_neg[node] = n_nodes + 1
            start[n_nodes] = a
            stop[n_nodes] = a + n_pos
            start[n_nodes + 1] = a + n_pos
            stop[n_nodes + 1] = hi
            n_nodes += 2
            w_idx = _ensure(w_idx, nw + f_ids.shape[0])
            w_val = _ensure(w_val, nw + f_ids.shape[0])
            w_idx[nw : nw + f_ids.shape[0]] = f_ids
            w_val[nw : nw + f_ids.shape[0]] = f_w
            nw += f_ids.shape[0]
            intercept[node] = icpt
        else:
            labs, lvals = leaf_distribution(
                rows, y_ptr, y_idx, y_val, labels_per_leaf, acc, ws[3], ws[4]
            )
            leaf_lab = _ensure(leaf_lab, nleaf + labs.shape[0])
            leaf_val = _ensure(leaf_val, nleaf + labs.shape[0])
            leaf_lab[nleaf : nleaf + labs.shape[0]] = labs
            leaf_val[nleaf : nleaf + labs.shape[0]] = lvals
            nleaf += labs.shape[0]
            done[0] += b - a
        done[1] += 1
        w_ptr[node + 1] = nw
        leaf_ptr[node + 1] = nleaf
        node += 1
    return (
        child_pos[:n_nodes].copy(),
        child_neg[:n_nodes].copy(),
        w_ptr[: n_nodes + 1].copy(),
        w_idx[:nw].copy(),
        w_val[:nw].copy(),
        intercept[:n_nodes].copy(),
        leaf_ptr[: n_nodes + 1].copy(),
        leaf_lab[:nleaf].copy(),
        leaf_val[:nleaf].copy(),
    )
