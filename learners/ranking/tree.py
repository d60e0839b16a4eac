"""Leaf-wise (best-first) histogram regression tree on gradients/hessians, as in LightGBM.

The tree is grown on binned rows (:mod:`learners.ranking.binning`) to at most
``num_leaves`` leaves: repeatedly split the leaf whose best split has the largest
gain ``GL²/(HL+λ) + GR²/(HR+λ) - G²/(H+λ)``. Only the smaller child's histogram is
built from its rows; the larger child's is the parent's minus the smaller's.
Leaf values are Newton steps ``-ΣG / (ΣH + λ)`` times the learning rate.

Nodes use LightGBM's layout: ``left[k]``/``right[k]`` >= 0 is an internal node,
a negative child ``c`` is the leaf ``~c``. A tree without a split has no nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from learners.ranking import _lambdamart_kernels as K
from learners.ranking.binning import BinMapper, BinnedRows


@dataclass(frozen=True)
class TreeParams:
    num_leaves: int
    min_data_in_leaf: int
    min_sum_hessian_in_leaf: float
    lambda_l2: float
    learning_rate: float
    hessian_counts: bool


@dataclass
class Tree:
    """One grown tree: binned split description plus the rows of each leaf."""

    feature: np.ndarray  # int32 used-feature slot per internal node
    bin: np.ndarray  # int32 split bin (left: bin <= this)
    left: np.ndarray  # int32
    right: np.ndarray  # int32
    leaf_value: np.ndarray  # float64, shrunk
    rows: np.ndarray  # bag rows, grouped by leaf
    leaf_begin: np.ndarray
    leaf_count: np.ndarray

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_value.shape[0])


def grow_tree(
    bag: np.ndarray,
    data: BinnedRows,
    mapper: BinMapper,
    grad: np.ndarray,
    hess: np.ndarray,
    p: TreeParams,
) -> Tree:
    L = p.num_leaves
    nb = int(mapper.bound_off_[-1])
    off = mapper.bound_off_
    dflt = mapper.default_bin_
    hg = np.zeros((L, nb))
    hh = np.zeros((L, nb))
    hc = np.zeros((L, nb), dtype=np.int64)
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
    rows = np.ascontiguousarray(bag, dtype=np.int64).copy()
    buf = np.empty_like(rows)
    md = p.min_data_in_leaf

    def hist(slot: int, r: np.ndarray) -> None:
        sum_g[slot], sum_h[slot] = K.build_histogram(
            r,
            data.indptr,
            data.feature,
            data.bin,
            grad,
            hess,
            off,
            dflt,
            hg[slot],
            hh[slot],
            hc[slot],
        )

    def search(leaf: int) -> None:
        g, f, b = K.find_best_split(
            hg[leaf], hh[leaf], hc[leaf], off, sum_g[leaf], sum_h[leaf], int(count[leaf]),
            md, p.min_sum_hessian_in_leaf, p.lambda_l2, p.hessian_counts,
        )  # fmt: skip
        best_gain[leaf], best_f[leaf], best_b[leaf] = (g, f, b) if f >= 0 else (-np.inf, -1, -1)

    count[0] = rows.shape[0]
    hist(0, rows)
    if count[0] >= 2 * md:
        search(0)
    n_leaves = 1
    while n_leaves < L:
        leaf = int(np.argmax(best_gain[:n_leaves]))
        if not best_gain[leaf] > 0.0:
            break
        f, b = int(best_f[leaf]), int(best_b[leaf])
        a, c = int(begin[leaf]), int(count[leaf])
        nl = K.partition(
            rows[a : a + c], data.indptr, data.feature, data.bin, f, b, int(dflt[f]), buf
        )
        new = n_leaves
        node = n_leaves - 1
        par = leaf_parent[leaf]
        if par >= 0:
            if left[par] == ~leaf:
                left[par] = node
            else:
                right[par] = node
        feature[node], split_bin[node] = f, b
        left[node], right[node] = ~leaf, ~new
        leaf_parent[leaf] = leaf_parent[new] = node
        begin[new], count[new], count[leaf] = a + nl, c - nl, nl
        small, large = (leaf, new) if nl < c - nl else (new, leaf)
        # histogram subtraction: the larger child = parent - smaller child
        pg, ph, pc = hg[leaf].copy(), hh[leaf].copy(), hc[leaf].copy()
        psg, psh = sum_g[leaf], sum_h[leaf]
        hist(small, rows[begin[small] : begin[small] + count[small]])
        hg[large], hh[large], hc[large] = pg - hg[small], ph - hh[small], pc - hc[small]
        sum_g[large], sum_h[large] = psg - sum_g[small], psh - sum_h[small]
        n_leaves += 1
        best_gain[leaf] = best_gain[new] = -np.inf
        # LightGBM: no search in either child when both are below 2 * min_data_in_leaf
        if count[leaf] >= 2 * md or count[new] >= 2 * md:
            search(leaf)
            search(new)
    k = n_leaves - 1
    den = sum_h[:n_leaves] + p.lambda_l2
    # a leaf without curvature (all pairs tied in label) gets no step, not a division by 0
    values = np.where(den > 0, -sum_g[:n_leaves] / np.where(den > 0, den, 1.0), 0.0)
    values = values * p.learning_rate
    return Tree(
        feature[:k].copy(), split_bin[:k].copy(), left[:k].copy(), right[:k].copy(),
        values, rows, begin[:n_leaves].copy(), count[:n_leaves].copy(),
    )  # fmt: skip
