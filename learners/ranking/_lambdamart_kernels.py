"""numba kernels for LambdaMART: lambda gradients, histograms, split search, partition, scoring.

Binned rows are sparse: ``(ptr, feat, bins)`` lists, per row, the used features whose
bin differs from the feature's default (most frequent) bin. Histograms are flat
over all bins of all used features (``bound_off[f]`` is feature ``f``'s first bin).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from learners.ranking._tree_kernels import row_bin

# ----------------------------------------------------------------------------- gradients

_ONE_HUNDREDTH_F32 = float(np.float32(0.01))  # LightGBM writes the constant as 0.01f


@njit(cache=True)
def inverse_max_dcg(labels: np.ndarray, offsets: np.ndarray, k: int) -> np.ndarray:
    """1 / (ideal DCG@k) per query, 0 when the ideal DCG is 0 (LightGBM's cache)."""
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    for q in range(nq):
        y = np.sort(labels[offsets[q] : offsets[q + 1]])[::-1]
        m = 0.0
        for i in range(min(k, y.shape[0])):
            m += (2.0 ** y[i] - 1.0) / np.log2(i + 2.0)
        if m > 0.0:
            out[q] = 1.0 / m
    return out


@njit(cache=True)
def lambda_gradients(
    scores: np.ndarray,
    labels: np.ndarray,
    offsets: np.ndarray,
    inv_max_dcg: np.ndarray,
    sigma: float,
    truncation: int,
    norm: bool,
    grad: np.ndarray,
    hess: np.ndarray,
    sig_table: np.ndarray,
    f32: bool,
) -> None:
    """LightGBM's LambdarankNDCG gradients/hessians (first-order loss derivative, >0 hessian).

    Pairs (i, j) with i in the top ``truncation`` of the current ranking, j below
    it, labels different. |dNDCG| uses the *current* positions; with ``norm`` it is
    divided by ``0.01 + |s_i - s_j|`` (unless all scores are equal) and the query's
    lambdas are rescaled by ``log2(1 + S) / S`` (S = sum of |lambda|).

    LightGBM's numerics, optionally: ``sig_table`` (from :func:`sigmoid_table`;
    empty = the exact sigmoid) and ``f32`` (lambdas accumulated in float32, its
    ``score_t``). They make the trees bit-compatible with LightGBM's, not better.
    """
    use_table = sig_table.shape[0] > 0
    n_tab = sig_table.shape[0]
    tab_min = -25.0 / sigma
    tab_max = 25.0 / sigma
    tab_factor = n_tab / (tab_max - tab_min) if use_table else 0.0
    nq = offsets.shape[0] - 1
    # gains and discounts once per call, not once per pair
    gain = 2.0**labels - 1.0
    max_cnt = 1
    for q in range(nq):
        max_cnt = max(max_cnt, offsets[q + 1] - offsets[q])
    disc = 1.0 / np.log2(np.arange(max_cnt) + 2.0)
    for q in range(nq):
        a = offsets[q]
        cnt = offsets[q + 1] - a
        for i in range(cnt):
            grad[a + i] = 0.0
            hess[a + i] = 0.0
        if cnt < 2:
            continue
        s = scores[a : a + cnt]
        y = labels[a : a + cnt]
        order = np.argsort(-s, kind="mergesort")  # stable, descending
        best = s[order[0]]
        worst = s[order[cnt - 1]]
        imd = inv_max_dcg[q]
        sum_lambdas = 0.0
        for i in range(min(cnt - 1, truncation)):
            oi = order[i]
            for j in range(i + 1, cnt):
                oj = order[j]
                if y[oi] == y[oj]:
                    continue
                if y[oi] > y[oj]:
                    hr, lr, hi, lo = i, j, oi, oj
                else:
                    hr, lr, hi, lo = j, i, oj, oi
                delta = s[hi] - s[lo]
                dndcg = (gain[a + hi] - gain[a + lo]) * abs(disc[hr] - disc[lr]) * imd
                if norm and best != worst:
                    dndcg /= _ONE_HUNDREDTH_F32 + abs(delta)
                if not use_table:
                    p = 1.0 / (1.0 + np.exp(sigma * delta))
                elif delta <= tab_min:
                    p = sig_table[0]
                elif delta >= tab_max:
                    p = sig_table[n_tab - 1]
                else:
                    p = sig_table[int((delta - tab_min) * tab_factor)]
                # operation order as LightGBM's (p(1-p) first): the trees are sensitive
                # to the last bit through near-tied splits
                p_hess = p * (1.0 - p) * (sigma * sigma * dndcg)
                p_lambda = p * (-sigma * dndcg)
                if f32:
                    pl = np.float32(p_lambda)
                    ph = np.float32(p_hess)
                    grad[a + lo] = np.float32(np.float32(grad[a + lo]) - pl)
                    hess[a + lo] = np.float32(np.float32(hess[a + lo]) + ph)
                    grad[a + hi] = np.float32(np.float32(grad[a + hi]) + pl)
                    hess[a + hi] = np.float32(np.float32(hess[a + hi]) + ph)
                else:
                    grad[a + lo] -= p_lambda
                    hess[a + lo] += p_hess
                    grad[a + hi] += p_lambda
                    hess[a + hi] += p_hess
                sum_lambdas -= 2.0 * p_lambda
        if norm and sum_lambdas > 0.0:
            f = np.log2(1.0 + sum_lambdas) / sum_lambdas
            for i in range(cnt):
                grad[a + i] *= f
                hess[a + i] *= f
                if f32:
                    grad[a + i] = np.float32(grad[a + i])
                    hess[a + i] = np.float32(hess[a + i])


@njit(cache=True)
def sigmoid_table(sigma: float, n: int) -> np.ndarray:
    """LightGBM's lookup table of 1 / (1 + exp(sigma * x)) over x in [-25/sigma, 25/sigma)."""
    lo = -25.0 / sigma
    factor = n / (50.0 / sigma)
    out = np.empty(n)
    for i in range(n):
        out[i] = 1.0 / (1.0 + np.exp((i / factor + lo) * sigma))
    return out


# ----------------------------------------------------------------------------- bagging


@njit(cache=True)
def lcg_next16(states: np.ndarray, i: int) -> int:
    """LightGBM's ``Random::RandInt16``: x = 214013 x + 2531011 (mod 2^32); (x >> 16) & 0x7FFF."""
    x = (np.uint64(214013) * np.uint64(states[i]) + np.uint64(2531011)) & np.uint64(0xFFFFFFFF)
    states[i] = np.uint32(x)
    return int((x >> np.uint64(16)) & np.uint64(0x7FFF))


@njit(cache=True)
def bernoulli_bag(states: np.ndarray, n: int, fraction: float, block: int) -> np.ndarray:
    """Rows kept by LightGBM's bagging: row i is in when the next float of generator
    ``i // block`` is < fraction (its ``BaggingHelper``); returns them ascending."""
    keep = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if lcg_next16(states, i // block) / 32768.0 < fraction:
            keep[m] = i
            m += 1
    return keep[:m].copy()


@njit(cache=True)
def add_leaf_values(
    rows: np.ndarray, begin: np.ndarray, count: np.ndarray, values: np.ndarray, scores: np.ndarray
) -> None:
    for leaf in range(begin.shape[0]):
        v = values[leaf]
        for i in range(begin[leaf], begin[leaf] + count[leaf]):
            scores[rows[i]] += v


@njit(cache=True)
def add_tree_binned(
    ptr: np.ndarray,
    feat: np.ndarray,
    bins: np.ndarray,
    default_bin: np.ndarray,
    nfeat: np.ndarray,
    nbin: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    leaf_value: np.ndarray,
    rows: np.ndarray,
    scores: np.ndarray,
) -> None:
    """scores[r] += tree(r) for the given rows, on binned data (out-of-bag / validation rows)."""
    for r in rows:
        node = 0
        if left.shape[0] == 0:
            scores[r] += leaf_value[0]
            continue
        while node >= 0:
            f = nfeat[node]
            if row_bin(ptr, feat, bins, r, f, default_bin[f]) <= nbin[node]:
                node = left[node]
            else:
                node = right[node]
        scores[r] += leaf_value[~node]


# ----------------------------------------------------------------------------- scoring


@njit(cache=True, parallel=True)
def csr_to_dense_mapped(
    indptr: np.ndarray, cols: np.ndarray, values: np.ndarray, start: int, stop: int, d: int
) -> np.ndarray:
    """Rows start:stop as a dense block over the ``d`` columns the trees use.

    ``cols[t]`` is the block column of entry ``t`` (-1: a feature no tree tests).
    """
    out = np.zeros((stop - start, d))
    for i in prange(start, stop):
        for t in range(indptr[i], indptr[i + 1]):
            j = cols[t]
            if j >= 0:
                out[i - start, j] = values[t]
    return out


@njit(cache=True, parallel=True)
def predict_dense(
    X: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    leaf_value: np.ndarray,
    node_off: np.ndarray,
    leaf_off: np.ndarray,
    out: np.ndarray,
) -> None:
    """out[i] = sum of the trees on row i; a row goes left when ``x[feature] <= threshold``."""
    n = X.shape[0]
    n_trees = node_off.shape[0] - 1
    for i in prange(n):
        s = 0.0
        for t in range(n_trees):
            no = node_off[t]
            lo = leaf_off[t]
            if node_off[t + 1] == no:
                s += leaf_value[lo]
                continue
            node = 0
            while node >= 0:
                k = no + node
                node = left[k] if X[i, feature[k]] <= threshold[k] else right[k]
            s += leaf_value[lo + ~node]
        out[i] = s


# ----------------------------------------------------------------------------- QuickScorer-style

# de Bruijn table: index of the lowest set bit of a 64-bit word without a loop
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_TABLE = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4,
     62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24, 18, 12, 5,
     63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11,
     46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6],
    dtype=np.int64,
)  # fmt: skip


@njit(cache=True)
def lowest_bit(m: np.uint64) -> int:
    low = m & (~m + np.uint64(1))
    return _DEBRUIJN_TABLE[int((low * _DEBRUIJN) >> np.uint64(58))]


@njit(cache=True)
def _score_block(
    Xt: np.ndarray,
    m: int,
    feature: np.ndarray,
    threshold: np.ndarray,
    elim: np.ndarray,
    node_off: np.ndarray,
    leaf_off: np.ndarray,
    inorder_value: np.ndarray,
    out: np.ndarray,
    r0: int,
) -> None:
    """Score ``m`` rows held column-major in ``Xt`` (QuickScorer's exit-leaf rule).

    For every internal node whose test sends a row right, the leaves of its left
    subtree are impossible: ``mask &= elim[node]``. The exit leaf is the leftmost
    (in-order) leaf left in the mask. Nodes are independent of each other, so the
    inner loop over rows is branch-free and vectorises.
    """
    acc = np.zeros(m)
    mask = np.empty(m, dtype=np.uint64)
    ones = ~np.uint64(0)
    for t in range(node_off.shape[0] - 1):
        mask[:] = ones
        for k in range(node_off[t], node_off[t + 1]):
            col = Xt[feature[k]]
            thr = threshold[k]
            e = elim[k]
            for i in range(m):
                mask[i] &= e if col[i] > thr else ones
        lo = leaf_off[t]
        for i in range(m):
            acc[i] += inorder_value[lo + lowest_bit(mask[i])]
    for i in range(m):
        out[r0 + i] = acc[i]


@njit(cache=True, parallel=True)
def predict_csr_qs(
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    remap: np.ndarray,
    d: int,
    feature: np.ndarray,
    threshold: np.ndarray,
    elim: np.ndarray,
    node_off: np.ndarray,
    leaf_off: np.ndarray,
    inorder_value: np.ndarray,
    out: np.ndarray,
    block: int,
) -> None:
    """Scores of CSR rows; ``remap[j]`` = compact column of feature j (-1: no tree tests it;
    features >= len(remap) are unknown to the model and ignored)."""
    n = indptr.shape[0] - 1
    nf = remap.shape[0]
    nb = (n + block - 1) // block
    for b in prange(nb):
        r0 = b * block
        m = min(n, r0 + block) - r0
        Xt = np.zeros((max(d, 1), m))
        for i in range(m):
            for t in range(indptr[r0 + i], indptr[r0 + i + 1]):
                f = indices[t]
                if f < nf:
                    j = remap[f]
                    if j >= 0:
                        Xt[j, i] = values[t]
        _score_block(Xt, m, feature, threshold, elim, node_off, leaf_off, inorder_value, out, r0)


@njit(cache=True, parallel=True)
def predict_dense_qs(
    X: np.ndarray,
    used: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    elim: np.ndarray,
    node_off: np.ndarray,
    leaf_off: np.ndarray,
    inorder_value: np.ndarray,
    out: np.ndarray,
    block: int,
) -> None:
    """Scores of dense rows; column ``used[j]`` of X is compact column j."""
    n = X.shape[0]
    d = used.shape[0]
    nb = (n + block - 1) // block
    for b in prange(nb):
        r0 = b * block
        m = min(n, r0 + block) - r0
        Xt = np.zeros((max(d, 1), m))
        for i in range(m):
            for j in range(d):
                Xt[j, i] = X[r0 + i, used[j]]
        _score_block(Xt, m, feature, threshold, elim, node_off, leaf_off, inorder_value, out, r0)
