"""numba kernels for FastXML: node partitioning, tree growth, routing, top-k.

Notation follows Prabhu & Varma (KDD 2014). At a node holding points ``i`` with
label vectors ``y_i`` the split minimises over ``w``, ``delta`` and the two label
rankings ``r+``/``r-``::

    ||w||_1 + sum_i C_delta(delta_i) log(1 + exp(-delta_i w^T x_i))
            - C_r sum_i (1 + delta_i)/2 L_nDCG@L(r+, y_i)
            - C_r sum_i (1 - delta_i)/2 L_nDCG@L(r-, y_i)

with ``L_nDCG@L(r, y) = I_L(y) sum_{l<=L} y_{r_l} / log2(1 + l)`` and
``I_L(y) = 1 / sum_{l <= min(L, |y|)} 1 / log2(1 + l)``. The point weights
``pw[i] = I_L(y_i)`` are computed once per fit (0 for a point without labels, so
it never moves the rankings). Label ``l`` at position ``t`` (0-based) of a
ranking gets the discount ``disc[l] = 1/log2(t + 2)``; labels outside the top
``L`` get 0. A ranking is a permutation of the labels, so the labels with a zero
sum on one side still take places there (after the positive ones), as in the
released code; giving them discount 0 instead cost ~0.008 P@3 on Bibtex. Ties
are broken deterministically: labels present in the node first, then by id, so a
split depends only on the node's own points.

Everything runs with ``nogil=True`` so that trees grow on several threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from learners.xml._l1_kernels import l1lr_solve, log1pexp, rng_below


@njit(cache=True, nogil=True)
def rank_side(node_labels, sums, L, disc):
    """r = the node's labels sorted by ``sums`` (desc, ties by id); set ``disc`` for them.

    ``node_labels`` (sorted by id) are the labels of the node's points. A label
    with a zero sum on this side still gets its place, after the positive-sum
    labels (see the module docstring); labels absent from the node would come
    after all of them and never matter. Only the top ``L`` places count.
    """
    k = node_labels.shape[0]
    key = np.empty(k)
    for t in range(k):
        key[t] = -sums[node_labels[t]]
        disc[node_labels[t]] = 0.0
    order = np.argsort(key, kind="mergesort")  # stable: equal sums keep id order
    for t in range(min(L, k)):
        disc[node_labels[order[t]]] = 1.0 / np.log2(t + 2.0)


@njit(cache=True, nogil=True)
def rank_step(
    rows, y_ptr, y_idx, y_val, pw, delta, node_labels, L, pos_sum, neg_sum, disc_pos, disc_neg
):
    """Optimal r+ and r- for fixed delta: rank sum_{i on that side} I_L(y_i) y_i."""
    for t in range(node_labels.shape[0]):
        pos_sum[node_labels[t]] = 0.0
        neg_sum[node_labels[t]] = 0.0
    for r in range(rows.shape[0]):
        i = rows[r]
        wgt = pw[i]
        for p in range(y_ptr[i], y_ptr[i + 1]):
            if delta[r] > 0:
                pos_sum[y_idx[p]] += wgt * y_val[p]
            else:
                neg_sum[y_idx[p]] += wgt * y_val[p]
    rank_side(node_labels, pos_sum, L, disc_pos)
    rank_side(node_labels, neg_sum, L, disc_neg)


@njit(cache=True, nogil=True)
def delta_step(rows, y_ptr, y_idx, y_val, pw, disc_pos, disc_neg, c_r, logit_pos, logit_neg, delta):
    """Optimal delta for fixed r+-, w: delta_i = sign(v-_i - v+_i); a tie keeps delta_i.

    ``v+-_i = C_delta(+-1) log(1 + exp(-+ w^T x_i)) - C_r L_nDCG@L(r+-, y_i)``; the
    caller passes the logistic parts in ``logit_pos``/``logit_neg`` (zeros before
    ``w`` exists). Returns how many delta_i changed.
    """
    changed = 0
    for r in range(rows.shape[0]):
        i = rows[r]
        g_pos = 0.0
        g_neg = 0.0
        for p in range(y_ptr[i], y_ptr[i + 1]):
            g_pos += y_val[p] * disc_pos[y_idx[p]]
            g_neg += y_val[p] * disc_neg[y_idx[p]]
        v_pos = logit_pos[r] - c_r * pw[i] * g_pos
        v_neg = logit_neg[r] - c_r * pw[i] * g_neg
        new = delta[r]
        if v_neg > v_pos:
            new = 1
        elif v_neg < v_pos:
            new = -1
        if new != delta[r]:
            delta[r] = new
            changed += 1
    return changed


@njit(cache=True, nogil=True)
def alternate_partition(
    rows,
    y_ptr,
    y_idx,
    y_val,
    pw,
    node_labels,
    L,
    c_r,
    logit_pos,
    logit_neg,
    delta,
    pos_sum,
    neg_sum,
    disc_pos,
    disc_neg,
    max_iter,
):
    """Alternate the r+- and delta steps until delta stops changing; returns rounds."""
    it = 0
    while it < max_iter:
        rank_step(
            rows,
            y_ptr,
            y_idx,
            y_val,
            pw,
            delta,
            node_labels,
            L,
            pos_sum,
            neg_sum,
            disc_pos,
            disc_neg,
        )
        it += 1
        if (
            delta_step(
                rows, y_ptr, y_idx, y_val, pw, disc_pos, disc_neg, c_r, logit_pos, logit_neg, delta
            )
            == 0
        ):
            break
    return it


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
):
    """Grow one tree on all rows. Nodes are numbered in creation order (children > parent).

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
