"""L1-regularised logistic regression (newGLMNET), the separator FastXML learns at a node.

Minimises ``||w||_1 + sum_i C_i log(1 + exp(-y_i (w^T x_i + b * bias)))`` where
the bias feature (a constant ``bias`` appended to every example, as LIBLINEAR and
the released FastXML code do) is regularised like every other weight. The kernel
is :func:`learners.xml._l1_kernels.l1lr_solve`.

>>> import numpy as np
>>> from learners.features import Batch
>>> X = Batch.from_dense(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.1, 1.0]]))
>>> fit = fit_l1_logistic(X, np.array([1, -1, 1, -1]), C=10.0)
>>> bool(fit.coef[0] > 0 > fit.coef[1])
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from learners.features import Batch
from learners.xml._l1_kernels import l1lr_objective, l1lr_solve

__all__ = ["L1LogisticFit", "csc_with_bias", "fit_l1_logistic", "l1_logistic_objective"]


@dataclass(frozen=True)
class L1LogisticFit:
    coef: np.ndarray  # (dim,) float64, sparse in value
    intercept: float  # weight of the bias feature times ``bias``
    n_iter: int  # Newton steps taken
    objective: float


def csc_with_bias(X: Batch, bias: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-major copy of ``X`` with a last column of constant ``bias`` (if > 0)."""
    n, d = X.n_rows, X.dim
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(X.indptr))
    order = np.argsort(X.indices, kind="stable")
    counts = np.bincount(X.indices, minlength=d).astype(np.int64)
    n_cols = d + 1 if bias > 0 else d
    col_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(counts, out=col_ptr[1 : d + 1])
    row_idx = rows[order]
    vals = X.values[order]
    if bias > 0:
        col_ptr[d + 1] = col_ptr[d] + n
        row_idx = np.concatenate([row_idx, np.arange(n, dtype=np.int64)])
        vals = np.concatenate([vals, np.full(n, float(bias))])
    return col_ptr, row_idx, vals


def _check(X: Batch, y: np.ndarray, C: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(X, Batch):
        raise TypeError(f"X must be a learners.features.Batch, got {type(X).__name__}")
    yy = np.asarray(y, dtype=np.float64)
    if yy.shape != (X.n_rows,):
        raise ValueError(f"y must have shape ({X.n_rows},), got {yy.shape}")
    if not np.all((yy == 1.0) | (yy == -1.0)):
        raise ValueError("y must hold only +1 and -1")
    cc = np.broadcast_to(np.asarray(C, dtype=np.float64), (X.n_rows,)).copy()
    if not np.all(np.isfinite(cc)) or np.any(cc <= 0):
        raise ValueError("C must be positive and finite")
    return yy, cc


def l1_logistic_objective(
    X: Batch,
    y: np.ndarray,
    coef: np.ndarray,
    intercept: float,
    *,
    C: float | np.ndarray = 1.0,
    bias: float = 1.0,
) -> float:
    """The objective value of ``(coef, intercept)`` (intercept = bias weight * bias)."""
    yy, cc = _check(X, y, C)
    col_ptr, row_idx, vals = csc_with_bias(X, bias)
    w = np.asarray(coef, dtype=np.float64)
    if bias > 0:
        w = np.concatenate([w, [intercept / bias]])
    return float(l1lr_objective(col_ptr, row_idx, vals, yy, cc, w))


def fit_l1_logistic(
    X: Batch,
    y: np.ndarray,
    *,
    C: float | np.ndarray = 1.0,
    bias: float = 1.0,
    tol: float = 0.01,
    max_newton_iter: int = 10,
    max_inner_iter: int = 10,
    seed: int = 0,
) -> L1LogisticFit:
    """Fit on labels ``y`` in {+1, -1}. ``C`` is a scalar or one weight per example.

    The defaults (``tol=0.01``, 10 Newton steps, 10 inner passes) are those of
    the released FastXML code; tighten them for a near-exact solution.
    """
    yy, cc = _check(X, y, C)
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    if max_newton_iter < 1 or max_inner_iter < 1:
        raise ValueError("max_newton_iter and max_inner_iter must be >= 1")
    col_ptr, row_idx, vals = csc_with_bias(X, bias)
    w = np.zeros(col_ptr.shape[0] - 1)
    rng = np.array([np.uint64(seed)], dtype=np.uint64)
    margins = np.zeros(X.n_rows)
    n_iter = l1lr_solve(
        col_ptr, row_idx, vals, yy, cc, w, tol, max_newton_iter, max_inner_iter, rng, margins
    )
    obj = float(l1lr_objective(col_ptr, row_idx, vals, yy, cc, w))
    if bias > 0:
        return L1LogisticFit(w[:-1].copy(), float(w[-1] * bias), int(n_iter), obj)
    return L1LogisticFit(w, 0.0, int(n_iter), obj)
