"""The one in-memory form of feature rows every learner reads: :class:`Batch`, ``n``
examples in CSR form (``indptr`` int64 of ``n + 1``, ``indices`` int64 sorted and unique
within each row, ``values`` float64, and the dimension ``dim``), with
:func:`canonical_rows` (sort each row, sum repeated indices), :func:`concat`, and
:class:`FeatureError`, the error naming the example and field that cannot become a row.

How wire examples become a ``Batch`` is :class:`learners.features.FeatureSpec`'s part.

>>> b = Batch.from_dense(np.array([[0.0, 2.0], [1.5, 0.0]]))
>>> b.indptr.tolist(), b.indices.tolist(), b.values.tolist()
([0, 1, 2], [1, 0], [2.0, 1.5])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Batch", "FeatureError", "canonical_rows", "concat"]


class FeatureError(ValueError):
    """An example that cannot become a feature row.

    ``location`` names the example and field (``examples[3].x["17"]``) and
    ``problem`` says what is wrong (``value is NaN``).
    """

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(f"{location}: {problem}")
        self.location = location
        self.problem = problem


@dataclass(frozen=True)
class Batch:
    """``n`` examples in CSR form. Rows have sorted, unique indices."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    dim: int

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @classmethod
    def from_dense(cls, X: np.ndarray, *, keep_zeros: bool = False) -> Batch:
        """Build from a 2-d array; zeros are dropped unless ``keep_zeros``."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            row = int(np.argwhere(~np.isfinite(X))[0][0])
            raise FeatureError(f"X[{row}]", "value is not finite")
        n, d = X.shape
        if keep_zeros:
            indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
            indices = np.tile(np.arange(d, dtype=np.int64), n)
            return cls(indptr, indices, X.ravel().copy(), d)
        mask = X != 0.0
        counts = mask.sum(axis=1)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows, cols = np.nonzero(mask)
        del rows
        return cls(indptr, cols.astype(np.int64), X[mask].astype(np.float64), d)

    @classmethod
    def from_csr(
        cls, indptr: Any, indices: Any, values: Any, dim: int, *, check: bool = True
    ) -> Batch:
        """Wrap CSR arrays (e.g. a ``scipy.sparse.csr_matrix``'s) after checking them."""
        ip = np.ascontiguousarray(indptr, dtype=np.int64)
        ix = np.ascontiguousarray(indices, dtype=np.int64)
        vs = np.ascontiguousarray(values, dtype=np.float64)
        if check:
            if ip.ndim != 1 or ip.shape[0] < 1 or ip[0] != 0 or ip[-1] != ix.shape[0]:
                raise ValueError("indptr is not a valid CSR row pointer")
            if np.any(np.diff(ip) < 0):
                raise ValueError("indptr must be non-decreasing")
            if ix.shape != vs.shape:
                raise ValueError("indices and values must have the same length")
            if ix.size and (ix.min() < 0 or ix.max() >= dim):
                raise ValueError(f"a feature index is outside [0, {dim})")
            if not np.all(np.isfinite(vs)):
                raise ValueError("a feature value is not finite")
            ip, ix, vs = canonical_rows(ip, ix, vs)
        return cls(ip, ix, vs, int(dim))

    @classmethod
    def coerce(cls, X: Any, name: str = "X") -> Batch:
        """``X`` as a Batch: a Batch as is, a ``scipy.sparse`` matrix (any format) by its
        CSR arrays, a 2-d array dense (zeros dropped). What scikit-learn's model selection
        passes a model after slicing its rows."""
        if isinstance(X, cls):
            return X
        if hasattr(X, "tocsr") and hasattr(X, "shape"):
            m = X.tocsr()
            return cls.from_csr(m.indptr, m.indices, m.data, int(m.shape[1]))
        a = np.asarray(X, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"{name}: must be a Batch, a scipy.sparse matrix or a 2-d array")
        return cls.from_dense(a)

    def to_dense(self, dtype: Any = np.float64) -> np.ndarray:
        out = np.zeros((self.n_rows, self.dim), dtype=dtype)
        rows = np.repeat(np.arange(self.n_rows), np.diff(self.indptr))
        out[rows, self.indices] = self.values
        return out

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.indices[a:b], self.values[a:b]

    def take(self, rows: Sequence[int] | np.ndarray) -> Batch:
        """A new batch with the given rows, in the given order."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        counts = ends - starts
        indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        if counts.sum() == 0:
            sel = np.zeros(0, dtype=np.int64)
        else:
            sel = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
        return Batch(indptr, self.indices[sel], self.values[sel], self.dim)


def canonical_rows(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort each row by index and sum duplicates (deterministically, in sorted order)."""
    n = indptr.shape[0] - 1
    if indices.size == 0:
        return indptr, indices, values
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    # Usually no row repeats an index: one stable sort by (row, index) then gives the
    # same arrays as the three-key sort below (whose value key only orders duplicates).
    key = rows * (int(indices.max()) + 1) + indices
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    if sorted_key.size < 2 or bool((sorted_key[1:] != sorted_key[:-1]).all()):
        return indptr, indices[order], values[order]
    # lexsort by (row, index, value): identical input multisets give identical sums.
    order = np.lexsort((values, indices, rows))
    r, ix, vs = rows[order], indices[order], values[order]
    new = np.ones(ix.shape[0], dtype=bool)
    new[1:] = (r[1:] != r[:-1]) | (ix[1:] != ix[:-1])
    if new.all():
        return indptr, ix, vs
    starts = np.flatnonzero(new)
    summed = np.add.reduceat(vs, starts)
    r2 = r[starts]
    counts = np.bincount(r2, minlength=n)
    ip = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ip[1:])
    return ip, ix[starts], summed


def concat(batches: Iterable[Batch]) -> Batch:
    """Stack batches of the same dimension into one."""
    bs = list(batches)
    if not bs:
        raise ValueError("no batches to concatenate")
    dim = bs[0].dim
    if any(b.dim != dim for b in bs):
        raise ValueError("batches have different dimensions")
    offsets = np.cumsum([0] + [b.nnz for b in bs[:-1]])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + o for b, o in zip(bs, offsets, strict=True)])
    return Batch(
        indptr.astype(np.int64),
        np.concatenate([b.indices for b in bs]),
        np.concatenate([b.values for b in bs]),
        dim,
    )
