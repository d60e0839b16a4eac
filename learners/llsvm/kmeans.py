"""Seeded k-means (k-means++ seeding, then Lloyd iterations) on CSR rows.

Used to place the anchor points of :class:`learners.llsvm.LLSVM`; the hot loops
(assignment, seeding distances, centre sums) are numba kernels in ``_kernels``.

>>> import numpy as np
>>> from learners.features import Batch
>>> X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
>>> centres = kmeans(Batch.from_dense(X), 2, seed=0)
>>> sorted(np.round(centres[:, 0], 2).tolist())
[0.05, 5.05]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from learners.features import Batch
from learners.llsvm import _kernels as K

__all__ = ["assign", "kmeans"]


def assign(X: Batch, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest centre of every row, and the squared distance to it."""
    c = np.ascontiguousarray(centres, dtype=np.float64)
    return K.kmeans_assign(
        X.indptr, X.indices, X.values, np.ascontiguousarray(c.T), np.einsum("ij,ij->i", c, c)
    )


def _plusplus(X: Batch, n_clusters: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: each new centre drawn with probability proportional to D(x)^2."""
    n = X.n_rows
    centres = np.zeros((n_clusters, X.dim), dtype=np.float64)
    first = int(rng.integers(n))
    centres[0] = X.take([first]).to_dense()[0]
    mind = np.full(n, np.inf)
    for j in range(1, n_clusters + 1):
        c = centres[j - 1]
        K.min_sq_dist_update(X.indptr, X.indices, X.values, c, float(c @ c), mind)
        if j == n_clusters:
            break
        total = float(mind.sum())
        if total <= 0.0:  # fewer distinct points than clusters: duplicate a centre
            pick = int(rng.integers(n))
        else:
            cum = np.cumsum(mind)
            pick = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
            pick = min(pick, n - 1)
        centres[j] = X.take([pick]).to_dense()[0]
    return centres


def kmeans(
    X: Batch,
    n_clusters: int,
    *,
    seed: int | np.random.Generator = 0,
    max_iter: int = 20,
    tol: float = 1e-4,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Cluster centres ``(n_clusters, dim)`` of the rows of ``X``.

    Lloyd iterations stop after ``max_iter`` or when no centre moves by more than
    ``tol`` times the mean squared norm of the data. An empty cluster is re-seeded
    at the row currently farthest from its centre, so every centre stays in use.

    ``progress(done, total)`` is called after the seeding (``done = 1``) and after
    every Lloyd iteration, ``total = max_iter + 1``; an early stop reports
    ``(total, total)`` so that a progress bar always ends full.
    """
    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
    if X.n_rows < n_clusters:
        raise ValueError(f"k-means needs at least {n_clusters} rows, got {X.n_rows}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    centres = _plusplus(X, n_clusters, rng)
    total = max_iter + 1
    if progress is not None:
        progress(1, total)
    scale = float(np.dot(X.values, X.values)) / max(X.n_rows, 1)
    for it in range(max_iter):
        labels, d2 = assign(X, centres)
        sums, counts = K.centre_sums(X.indptr, X.indices, X.values, labels, n_clusters, X.dim)
        new = centres.copy()
        filled = counts > 0
        new[filled] = sums[filled] / counts[filled, None]
        for c in np.flatnonzero(~filled):
            far = int(np.argmax(d2))
            new[c] = X.take([far]).to_dense()[0]
            d2[far] = 0.0
        shift = float(np.max(np.sum((new - centres) ** 2, axis=1)))
        centres = new
        converged = shift <= tol * scale
        if progress is not None:
            progress(total if converged else it + 2, total)
        if converged:
            break
    return centres
