"""Quantile-style feature binning for histogram tree learning, as LightGBM does it.

For each feature the distinct values (zeros included, counted from the rows a
sparse input leaves out) are split into at most ``max_bin`` bins:

- zero always has a bin of its own (upper bound ``1e-35``; negatives below it,
  positives above), like LightGBM's ``FindBinWithZeroAsOneBin``;
- on each side, ``GreedyFindBin``: with few distinct values one bin per value
  (a bin closes only once it holds ``min_data_in_bin`` samples), otherwise bins
  of about equal counts;
- bin upper bounds are (the next double above) midpoints between adjacent distinct
  values, so a split "bin <= t" is the raw test ``value <= bounds[t]`` at prediction time.

Features whose values all fall in one bin cannot split and are dropped
(``used_features_``); with ``min_split_data`` (LightGBM's ``feature_pre_filter``
with ``min_data_in_leaf``) so are features where no threshold leaves that many
rows on both sides.
As in LightGBM, at most ``sample_cnt`` rows (200,000) are used to find the bins.

>>> import numpy as np
>>> from learners.features import Batch
>>> X = Batch.from_dense(np.array([[0.0], [1.0], [2.0]]))
>>> bm = BinMapper(max_bin=255, min_data_in_bin=1).fit(X)
>>> bm.bounds_[0].tolist()
[1.0000000180025095e-35, 1.5000000000000002, inf]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from learners.features import Batch
from learners.ranking._binning_kernels import binned_csr, greedy_find_bin

__all__ = ["ZERO_THRESHOLD", "BinMapper", "BinnedRows"]

# LightGBM's kZeroThreshold, declared `const double kZeroThreshold = 1e-35f`: the float
# literal widened, which is not the double 1e-35
ZERO_THRESHOLD = float(np.float32(1e-35))


@dataclass(frozen=True)
class BinnedRows:
    """Rows as sparse (used-feature, bin) pairs; an absent feature is in its default bin."""

    indptr: np.ndarray  # int64, n + 1
    feature: np.ndarray  # int32 used-feature slot, sorted within a row
    bin: np.ndarray  # uint16
    n_rows: int


def _find_bins(nonzero: np.ndarray, n_zero: int, max_bin: int, min_data_in_bin: int) -> np.ndarray:
    """LightGBM's FindBinWithZeroAsOneBin over one feature's sampled values."""
    distinct, counts = np.unique(nonzero, return_counts=True)
    counts = counts.astype(np.int64)
    neg = distinct < -ZERO_THRESHOLD
    pos = distinct > ZERO_THRESHOLD
    total = int(counts.sum()) + n_zero
    bounds: list[float] = []
    n_neg = int(neg.sum())
    if n_neg > 0 and max_bin > 1:
        neg_cnt = int(counts[neg].sum())
        left_max_bin = max(1, int(neg_cnt / max(total - n_zero, 1) * (max_bin - 1)))
        b = greedy_find_bin(distinct[neg], counts[neg], left_max_bin, neg_cnt, min_data_in_bin)
        bounds = b.tolist()
        bounds[-1] = -ZERO_THRESHOLD
    right_max_bin = max_bin - 1 - len(bounds)
    if pos.any() and right_max_bin > 0:
        pos_cnt = int(counts[pos].sum())
        rb = greedy_find_bin(distinct[pos], counts[pos], right_max_bin, pos_cnt, min_data_in_bin)
        bounds.append(ZERO_THRESHOLD)
        bounds.extend(rb.tolist())
    else:
        bounds.append(np.inf)
    return np.asarray(bounds, dtype=np.float64)


class BinMapper:
    """Per-feature bin upper bounds learnt from a training batch."""

    def __init__(
        self,
        max_bin: int = 255,
        min_data_in_bin: int = 3,
        sample_cnt: int = 200_000,
        seed: int = 0,
        min_split_data: int = 0,
    ) -> None:
        if not 2 <= max_bin <= 65535:
            raise ValueError(f"max_bin: must be in [2, 65535], got {max_bin}")
        if min_data_in_bin < 1:
            raise ValueError(f"min_data_in_bin: must be >= 1, got {min_data_in_bin}")
        self.max_bin = max_bin
        self.min_split_data = min_split_data
        self.min_data_in_bin = min_data_in_bin
        self.sample_cnt = sample_cnt
        self.seed = seed

    def fit(self, X: Batch) -> BinMapper:
        n = X.n_rows
        if n > self.sample_cnt:
            # Bins come from a sample, as LightGBM's bin_construct_sample_cnt.
            rows = np.sort(
                np.random.default_rng(self.seed).choice(n, self.sample_cnt, replace=False)
            )
            X = X.take(rows)
            n = X.n_rows
        order = np.argsort(X.indices, kind="stable")
        cols = X.indices[order]
        vals = X.values[order]
        starts = np.searchsorted(cols, np.arange(X.dim + 1))
        self.bounds_: dict[int, np.ndarray] = {}
        used: list[int] = []
        defaults: list[int] = []
        for j in range(X.dim):
            v = vals[starts[j] : starts[j + 1]]
            nz = v[v != 0.0]
            b = _find_bins(nz, n - nz.shape[0], self.max_bin, self.min_data_in_bin)
            if b.shape[0] < 2:
                continue
            # bin of a value: first bound >= value (LightGBM's ValueToBin)
            cnt = np.bincount(np.searchsorted(b, nz, side="left"), minlength=b.shape[0])
            cnt[int(np.searchsorted(b, 0.0, side="left"))] += n - nz.shape[0]
            if int(cnt.max()) == n:  # every value in one bin: the feature can never split
                continue
            if self.min_split_data > 0:
                # LightGBM's feature_pre_filter (NeedFilter): drop a feature when no
                # threshold leaves min_data_in_leaf rows on both sides
                left = np.cumsum(cnt[:-1])
                ok = (left >= self.min_split_data) & (n - left >= self.min_split_data)
                if not ok.any():
                    continue
            self.bounds_[j] = b
            used.append(j)
            # the most frequent bin is left implicit in BinnedRows (LightGBM's
            # most_freq_bin), so histograms touch only the other cells
            defaults.append(int(np.argmax(cnt)))
        self.dim_ = X.dim
        self._index(used)
        self.default_bin_ = np.asarray(defaults, dtype=np.int64)
        return self

    def _index(self, used: list[int]) -> None:
        nf = len(used)
        self.used_features_ = np.asarray(used, dtype=np.int64)
        self.n_bins_ = np.array([self.bounds_[j].shape[0] for j in used], dtype=np.int64)
        self.bound_off_ = np.zeros(nf + 1, dtype=np.int64)
        np.cumsum(self.n_bins_, out=self.bound_off_[1:])
        self.flat_bounds_ = (
            np.concatenate([self.bounds_[j] for j in used]) if nf else np.zeros(0, dtype=np.float64)
        )
        self.zero_bin_ = np.array(
            [int(np.searchsorted(self.bounds_[j], 0.0, side="left")) for j in used], dtype=np.int64
        )
        self.feat_map_ = np.full(self.dim_, -1, dtype=np.int64)
        self.feat_map_[self.used_features_] = np.arange(nf)

    def transform(self, X: Batch) -> BinnedRows:
        if X.dim > self.dim_:
            raise ValueError(f"X has dimension {X.dim}, the bins were fit on {self.dim_}")
        return self._transform(X, self.default_bin_)

    def _transform(self, X: Batch, default_bin: np.ndarray) -> BinnedRows:
        fmap = self.feat_map_
        if X.dim < self.dim_:
            fmap = fmap[: X.dim]
        ptr, feat, bn = binned_csr(
            X.indptr,
            X.indices,
            X.values,
            fmap,
            self.flat_bounds_,
            self.bound_off_,
            default_bin,
            self.zero_bin_,
        )
        return BinnedRows(ptr, feat, bn, X.n_rows)

    def threshold(self, f: int, b: int) -> float:
        """Raw threshold of the split ``bin <= b`` on used feature ``f``."""
        return float(self.flat_bounds_[self.bound_off_[f] + b])
