"""numba kernels for leaf-wise histogram trees: histograms, split search, partition, growth.

Binned rows are sparse: ``(ptr, feat, bins)`` lists, per row, the used features whose
bin differs from the feature's default (most frequent) bin. A histogram holds, for
every bin of every used feature (``bound_off[f]`` is feature ``f``'s first bin), the
sums of gradients and hessians ``hist[k, 0..1]`` and, when needed, the row count ``cnt[k]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# LightGBM's kEpsilon (a float 1e-15f widened), the start of the right-hand hessian sum
_EPS = float(np.float32(1e-15))


@njit(cache=True)
def build_histogram(
    rows: np.ndarray,
    ptr: np.ndarray,
    feat: np.ndarray,
    bins: np.ndarray,
    grad: np.ndarray,
    hess: np.ndarray,
    bound_off: np.ndarray,
    default_bin: np.ndarray,
    hist: np.ndarray,
    cnt: np.ndarray,
    with_counts: bool,
) -> tuple[float, float]:
    """(G, H) histogram of ``rows`` into ``hist`` (and row counts into ``cnt`` if asked).

    Only non-default cells are visited; the default bins are filled afterwards by
    :func:`fix_histogram` (LightGBM's most_freq_bin trick). Returns the row sums (G, H).
    """
    hist[:] = 0.0
    if with_counts:
        cnt[:] = 0
    G = 0.0
    H = 0.0
    for r in rows:
        g = grad[r]
        h = hess[r]
        G += g
        H += h
        for t in range(ptr[r], ptr[r + 1]):
            k = bound_off[feat[t]] + bins[t]
            hist[k, 0] += g
            hist[k, 1] += h
            if with_counts:
                cnt[k] += 1
    return G, H


@njit(cache=True)
def fix_histogram(
    hist: np.ndarray,
    cnt: np.ndarray,
    bound_off: np.ndarray,
    default_bin: np.ndarray,
    G: float,
    H: float,
    n: int,
    with_counts: bool,
) -> None:
    """Each feature's default bin := the leaf total minus its other bins.

    LightGBM's ``Dataset::FixHistogram``, with its order of operations (start from
    the total, subtract the other bins one by one), so sums agree to the last bit.
    """
    for f in range(default_bin.shape[0]):
        d = bound_off[f] + default_bin[f]
        g = G
        h = H
        c = n
        for k in range(bound_off[f], bound_off[f + 1]):
            if k != d:
                g -= hist[k, 0]
                h -= hist[k, 1]
                if with_counts:
                    c -= cnt[k]
        hist[d, 0] = g
        hist[d, 1] = h
        if with_counts:
            cnt[d] = c


@njit(cache=True)
def find_best_split(
    hist: np.ndarray,
    cnt: np.ndarray,
    bound_off: np.ndarray,
    G: float,
    H: float,
    n: int,
    min_data: int,
    min_hess: float,
    l2: float,
    hessian_counts: bool,
) -> tuple[float, int, int]:
    """Best (gain, feature, bin) over all features, LightGBM's reverse scan.

    Left = bins ``<= bin``. Gain = GL²/(HL+l2) + GR²/(HR+l2) - G²/(H+l2); a split
    must have positive gain. Ties: larger bin within a feature (scan from the
    right, strict >), smaller feature across features. With ``hessian_counts`` the
    per-bin row counts used by ``min_data`` are LightGBM's estimate
    ``round(hess * n / H)`` (its histograms hold no counts) instead of exact counts.
    """
    parent = G * G / (H + l2)  # LightGBM's min_gain_shift (min_gain_to_split = 0)
    best_gain = 0.0
    best_f = -1
    best_b = -1
    cnt_factor = n / H if H > 0.0 else 0.0
    for f in range(bound_off.shape[0] - 1):
        lo = bound_off[f]
        nb = bound_off[f + 1] - lo
        sgr = 0.0
        shr = _EPS
        cr = 0
        fbest = -np.inf  # raw GL²/(HL+l2) + GR²/(HR+l2), compared before subtracting
        fb = -1
        for t in range(nb - 1, 0, -1):
            k = lo + t
            sgr += hist[k, 0]
            shr += hist[k, 1]
            if hessian_counts:
                cr += int(hist[k, 1] * cnt_factor + 0.5)
            else:
                cr += cnt[k]
            if cr < min_data or shr < min_hess:
                continue
            if n - cr < min_data:
                break
            shl = H - shr
            if shl < min_hess:
                break
            sgl = G - sgr
            raw = sgl * sgl / (shl + l2) + sgr * sgr / (shr + l2)
            if raw <= parent:
                continue
            if raw > fbest:
                fbest = raw
                fb = t - 1
        if fb >= 0:
            gain = fbest - parent
            if gain > best_gain:
                best_gain = gain
                best_f = f
                best_b = fb
    return best_gain, best_f, best_b


@njit(cache=True)
def right_sums(hist: np.ndarray, lo: int, nb: int, b: int) -> tuple[float, float]:
    """(G, H) of bins ``> b`` summed as the split scan sums them (top down, H from kEpsilon)."""
    g = 0.0
    h = _EPS
    for t in range(nb - 1, b, -1):
        g += hist[lo + t, 0]
        h += hist[lo + t, 1]
    return g, h


@njit(cache=True)
def row_bin(ptr: np.ndarray, feat: np.ndarray, bins: np.ndarray, r: int, f: int, dflt: int) -> int:
    """Bin of used feature ``f`` in row ``r`` (binary search; absent = default bin)."""
    a = ptr[r]
    b = ptr[r + 1]
    while a < b:
        m = (a + b) // 2
        if feat[m] < f:
            a = m + 1
        else:
            b = m
    if a < ptr[r + 1] and feat[a] == f:
        return bins[a]
    return dflt


@njit(cache=True)
def partition(
    rows: np.ndarray,
    ptr: np.ndarray,
    feat: np.ndarray,
    bins: np.ndarray,
    f: int,
    b: int,
    dflt: int,
    buf: np.ndarray,
) -> int:
    """Stable in-place partition of ``rows`` into (bin <= b | bin > b); returns the left size."""
    nl = 0
    nr = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        if row_bin(ptr, feat, bins, r, f, dflt) <= b:
            rows[nl] = r
            nl += 1
        else:
            buf[nr] = r
            nr += 1
    for i in range(nr):
        rows[nl + i] = buf[i]
    return nl


@njit(cache=True)
def grow(
    bag: np.ndarray,
    ptr: np.ndarray,
    feat: np.ndarray,
    bins: np.ndarray,
    grad: np.ndarray,
    hess: np.ndarray,
    bound_off: np.ndarray,
    default_bin: np.ndarray,
    num_leaves: int,
    min_data: int,
    min_hess: float,
    l2: float,
    learning_rate: float,
    hessian_counts: bool,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:
    """Grow one tree best-first; see :mod:`learners.ranking.tree` for the layout returned.

    Returns (feature, bin, left, right, leaf_value, rows, leaf_begin, leaf_count),
    trimmed to the leaves actually grown.
    """
    L = num_leaves
    nb = bound_off[-1]
    hist = np.zeros((L, nb, 2))
    scratch = np.zeros((nb, 2))
    # exact row counts per bin only when min_data_in_leaf is checked on them
    cb = 1 if hessian_counts else nb
    cnt = np.zeros((L, cb), dtype=np.int64)
    scratch_cnt = np.zeros(cb, dtype=np.int64)
    exact = not hessian_counts
    sum_g = np.zeros(L)
    sum_h = np.zeros(L)
    begin = np.zeros(L, dtype=np.int64)
    count = np.zeros(L, dtype=np.int64)
    best_gain = np.full(L, -np.inf)
    best_f = np.full(L, -1, dtype=np.int64)
    best_b = np.full(L, -1, dtype=np.int64)
    feature = np.zeros(L - 1, dtype=np.int32)
    split_bin = np.zeros(L - 1, dtype=np.int32)
    left = np.zeros(L - 1, dtype=np.int32)
    right = np.zeros(L - 1, dtype=np.int32)
    leaf_parent = np.full(L, -1, dtype=np.int64)
    rows = bag.copy()
    buf = np.empty_like(rows)

    count[0] = rows.shape[0]
    sum_g[0], sum_h[0] = build_histogram(
        rows, ptr, feat, bins, grad, hess, bound_off, default_bin, hist[0], cnt[0], exact
    )
    fix_histogram(hist[0], cnt[0], bound_off, default_bin, sum_g[0], sum_h[0], count[0], exact)
    if count[0] >= 2 * min_data:
        g, f, b = find_best_split(
            hist[0],
            cnt[0],
            bound_off,
            sum_g[0],
            sum_h[0],
            count[0],
            min_data,
            min_hess,
            l2,
            hessian_counts,
        )
        if f >= 0:
            best_gain[0], best_f[0], best_b[0] = g, f, b
    n_leaves = 1
    while n_leaves < L:
        leaf = int(np.argmax(best_gain[:n_leaves]))
        if not best_gain[leaf] > 0.0:
            break
        f = best_f[leaf]
        b = best_b[leaf]
        a = begin[leaf]
        c = count[leaf]
        nl = partition(rows[a : a + c], ptr, feat, bins, f, b, default_bin[f], buf)
        new = n_leaves
        node = n_leaves - 1
        par = leaf_parent[leaf]
        if par >= 0:
            if left[par] == ~leaf:
                left[par] = node
            else:
                right[par] = node
        feature[node] = f
        split_bin[node] = b
        left[node] = ~leaf
        right[node] = ~new
        leaf_parent[leaf] = node
        leaf_parent[new] = node
        begin[new] = a + nl
        count[new] = c - nl
        count[leaf] = nl
        # Build the smaller child's histogram; the larger one is parent - smaller
        # (the parent's histogram sits in slot `leaf`).
        small = leaf if nl < c - nl else new
        large = new if small == leaf else leaf
        # child sums as LightGBM's split info has them: the right side summed by the
        # scan, the left side = parent - right
        gr, hr = right_sums(hist[leaf], bound_off[f], bound_off[f + 1] - bound_off[f], b)
        gl = sum_g[leaf] - gr
        hl = sum_h[leaf] - hr
        build_histogram(
            rows[begin[small] : begin[small] + count[small]],
            ptr, feat, bins, grad, hess, bound_off, default_bin, scratch, scratch_cnt, exact,
        )  # fmt: skip
        # in place, no temporaries: hist[large] = parent - small, hist[small] = small
        hp = hist[leaf]
        hn = hist[new]
        for k in range(nb):
            for ch in range(2):
                sv = scratch[k, ch]
                if large == new:
                    hn[k, ch] = hp[k, ch] - sv
                    hp[k, ch] = sv
                else:
                    hp[k, ch] -= sv
                    hn[k, ch] = sv
        if exact:
            cp = cnt[leaf]
            cn = cnt[new]
            for k in range(nb):
                if large == new:
                    cn[k] = cp[k] - scratch_cnt[k]
                    cp[k] = scratch_cnt[k]
                else:
                    cp[k] -= scratch_cnt[k]
                    cn[k] = scratch_cnt[k]
        sum_g[leaf] = gl
        sum_h[leaf] = hl
        sum_g[new] = gr
        sum_h[new] = hr
        fix_histogram(hist[leaf], cnt[leaf], bound_off, default_bin, gl, hl, count[leaf], exact)
        fix_histogram(hist[new], cnt[new], bound_off, default_bin, gr, hr, count[new], exact)
        n_leaves += 1
        best_gain[leaf] = -np.inf
        best_gain[new] = -np.inf
        # LightGBM: no search in either child when both are below 2 * min_data_in_leaf
        if count[leaf] >= 2 * min_data or count[new] >= 2 * min_data:
            for child in (leaf, new):
                g, f2, b2 = find_best_split(
                    hist[child], cnt[child], bound_off, sum_g[child], sum_h[child], count[child],
                    min_data, min_hess, l2, hessian_counts,
                )  # fmt: skip
                if f2 >= 0:
                    best_gain[child] = g
                    best_f[child] = f2
                    best_b[child] = b2
    k = n_leaves - 1
    values = np.zeros(n_leaves)
    for i in range(n_leaves):
        den = sum_h[i] + l2
        # a leaf without curvature (all its pairs tied in label) gets no step
        if den > 0.0:
            values[i] = -sum_g[i] / den * learning_rate
    return (
        feature[:k].copy(), split_bin[:k].copy(), left[:k].copy(), right[:k].copy(),
        values, rows, begin[:n_leaves].copy(), count[:n_leaves].copy(),
    )  # fmt: skip
