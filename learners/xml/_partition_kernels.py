"""numba kernels for FastXML's label-side steps: the r+- (ranking) and delta steps.

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
