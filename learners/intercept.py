"""The intercept of a linear model as one constant feature of value 1.0 in every row.

A linear learner with no bias term can only draw boundaries through the origin; a
constant feature gives it one (the way VW's ``constant`` and LIBLINEAR's ``-B 1`` do).
Every path that builds a batch for a model with an intercept (the general encoder and
the service's compiled scanners) appends the column with these functions, so the rows
are the same bytes whichever parser read the request.

- dense and sparse features: the column right after the input's, ``width`` (the
  model's dimension is ``width + 1``);
- hashed features: the name :data:`INTERCEPT_NAME` hashed like any other name (as the
  ``records`` kind does), summed with any feature that lands on the same column.

>>> from learners.csr_batch import Batch
>>> b = Batch(np.array([0, 1, 1]), np.array([2]), np.array([0.5]), 3)
>>> w = with_intercept(b, column=3, dim=4)
>>> w.indptr.tolist(), w.indices.tolist(), w.values.tolist(), w.dim
([0, 2, 3], [2, 3, 3], [0.5, 1.0, 1.0], 4)
"""

from __future__ import annotations

import numpy as np

from learners.csr_batch import Batch, canonical_rows

__all__ = ["INTERCEPT_NAME", "with_intercept", "with_ones_column"]

# "^" is refused in record field names, so no record feature can be called so.
INTERCEPT_NAME = "^constant"


def with_intercept(batch: Batch, column: int, dim: int) -> Batch:
    """``batch`` with 1.0 added at ``column`` of every row, as a batch of ``dim``
    columns (rows stay sorted with unique indices: a feature already at ``column`` is
    summed with it)."""
    n = batch.n_rows
    ends = batch.indptr[1:]
    indices = np.insert(batch.indices, ends, column)
    values = np.insert(batch.values, ends, 1.0)
    indptr = batch.indptr + np.arange(n + 1, dtype=np.int64)
    if batch.nnz and int(batch.indices.max()) >= column:  # not the last column: re-sort
        indptr, indices, values = canonical_rows(indptr, indices, values)
    return Batch(indptr, indices.astype(np.int64, copy=False), values, dim)


def with_ones_column(X: np.ndarray) -> np.ndarray:
    """A dense float64 matrix with a column of ones appended (the dense rows' intercept)."""
    out = np.empty((X.shape[0], X.shape[1] + 1), dtype=np.float64)
    out[:, :-1] = X
    out[:, -1] = 1.0
    return out
