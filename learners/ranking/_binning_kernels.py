"""numba kernels for feature binning (LightGBM's ``GreedyFindBin``) and binned CSR building."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def greedy_find_bin(
    distinct: np.ndarray, counts: np.ndarray, max_bin: int, total_cnt: int, min_data_in_bin: int
) -> np.ndarray:
    """Bin upper bounds for sorted distinct values, as LightGBM's ``GreedyFindBin``.

    Few distinct values: one bin per value, except that a bin is closed only once
    it holds ``min_data_in_bin`` samples. Many: bins of roughly equal counts, with
    very frequent values in bins of their own. Bounds are the next double above
    the midpoints between adjacent distinct values (LightGBM's
    ``GetDoubleUpperBound``; a test value equal to the midpoint goes left as in
    LightGBM); the last bound is +inf.
    """
    n = distinct.shape[0]
    out = np.empty(max(n, 1) + 1, dtype=np.float64)
    m = 0
    if n <= max_bin:
        cur = 0
        for i in range(n - 1):
            cur += counts[i]
            if cur >= min_data_in_bin:
                val = np.nextafter((distinct[i] + distinct[i + 1]) / 2.0, np.inf)
                if m == 0 or val > np.nextafter(out[m - 1], np.inf):
                    out[m] = val
                    m += 1
                    cur = 0
        out[m] = np.inf
        m += 1
        return out[:m].copy()
    if min_data_in_bin > 0:
        max_bin = max(min(max_bin, total_cnt // min_data_in_bin), 1)
    mean_bin_size = total_cnt / max_bin
    rest_bin_cnt = max_bin
    rest_sample_cnt = total_cnt
    big = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        if counts[i] >= mean_bin_size:
            big[i] = True
            rest_bin_cnt -= 1
            rest_sample_cnt -= counts[i]
    mean_bin_size = rest_sample_cnt / max(rest_bin_cnt, 1)
    upper = np.full(max_bin, np.inf)
    lower = np.full(max_bin, np.inf)
    bin_cnt = 0
    lower[0] = distinct[0]
    cur = 0
    for i in range(n - 1):
        if not big[i]:
            rest_sample_cnt -= counts[i]
        cur += counts[i]
        if big[i] or cur >= mean_bin_size or (big[i + 1] and cur >= max(1.0, mean_bin_size * 0.5)):
            upper[bin_cnt] = distinct[i]
            bin_cnt += 1
            lower[bin_cnt] = distinct[i + 1]
            if bin_cnt >= max_bin - 1:
                break
            cur = 0
            if not big[i]:
                rest_bin_cnt -= 1
                mean_bin_size = rest_sample_cnt / max(rest_bin_cnt, 1)
    bin_cnt += 1
    for i in range(bin_cnt - 1):
        val = np.nextafter((upper[i] + lower[i + 1]) / 2.0, np.inf)
        if m == 0 or val > np.nextafter(out[m - 1], np.inf):
            out[m] = val
            m += 1
    out[m] = np.inf
    m += 1
    return out[:m].copy()


@njit(cache=True)
def binned_csr(
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    feat_map: np.ndarray,
    bounds: np.ndarray,
    bound_off: np.ndarray,
    default_bin: np.ndarray,
    zero_bin: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows as (used-feature, bin) pairs, omitting each feature's default (most frequent) bin.

    ``feat_map[j]`` is the used-feature slot of raw column ``j`` (-1 = unused). A
    zero that is not the default bin (rare: features mostly non-zero) is stored
    explicitly, so every row is complete: absent pair = default bin.
    """
    n = indptr.shape[0] - 1
    nf = default_bin.shape[0]
    # zero cells whose bin is not the default: one per (row, such feature) absent from the row
    nz_feats = np.empty(nf, dtype=np.int64)
    n_nzf = 0
    for f in range(nf):
        if zero_bin[f] != default_bin[f]:
            nz_feats[n_nzf] = f
            n_nzf += 1
    cap = indices.shape[0] + n * n_nzf
    out_f = np.empty(cap, dtype=np.int32)
    out_b = np.empty(cap, dtype=np.uint16)
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    rowvals = np.full(nf, np.nan)
    p = 0
    for i in range(n):
        for t in range(indptr[i], indptr[i + 1]):
            f = feat_map[indices[t]]
            if f >= 0:
                rowvals[f] = values[t]
        for k in range(n_nzf):
            f = nz_feats[k]
            if np.isnan(rowvals[f]):
                rowvals[f] = 0.0
        # emit in used-feature order so rows stay sorted (binary search in partitioning)
        for f in range(nf):
            v = rowvals[f]
            if np.isnan(v):
                continue
            rowvals[f] = np.nan
            lo = bound_off[f]
            hi = bound_off[f + 1] - 1
            # first bound >= v  (LightGBM's ValueToBin: v <= upper_bound[bin])
            a, b = lo, hi
            while a < b:
                mid = (a + b) // 2
                if bounds[mid] >= v:
                    b = mid
                else:
                    a = mid + 1
            bn = a - lo
            if bn != default_bin[f]:
                out_f[p] = f
                out_b[p] = bn
                p += 1
        out_ptr[i + 1] = p
    return out_ptr, out_f[:p].copy(), out_b[:p].copy()
