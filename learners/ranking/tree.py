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

from learners.ranking._tree_kernels import grow
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
    """Grow one tree on the rows ``bag`` (the whole loop runs in one numba kernel)."""
    out = grow(
        np.ascontiguousarray(bag, dtype=np.int64), data.indptr, data.feature, data.bin,
        grad, hess, mapper.bound_off_, mapper.default_bin_, p.num_leaves, p.min_data_in_leaf,
        p.min_sum_hessian_in_leaf, p.lambda_l2, p.learning_rate, p.hessian_counts,
    )  # fmt: skip
    return Tree(*out)
