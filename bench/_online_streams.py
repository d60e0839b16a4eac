"""The streams ``bench/online.py`` times learners on, built once before any timing: LIBSVM
a9a (from the shared data directory), a synthetic sparse stream and a synthetic dense
one; and the row slices its chunked runs feed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from learners.features import Batch
from learners.io.svmlight import read_svmlight


@dataclass(frozen=True)
class Stream:
    name: str
    description: str
    X: Batch
    y: np.ndarray  # int64 labels in {-1, +1}
    X_test: Batch | None = None
    y_test: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.X.n_rows


def synthetic_sparse(
    n: int, dim: int = 2**20, nnz: int = 20, *, seed: int = 0, noise: float = 0.25
) -> Stream:
    """``n`` rows with ``nnz`` distinct random indices each; labels from a hidden model.

    ``noise`` is the std of Gaussian noise added to the margin, relative to the
    margin's std, so about ``atan(noise)/pi`` (~8 %) of the labels disagree with ``w``.
    """
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, dim, size=(n, nnz), dtype=np.int64), axis=1)
    # Rows with a repeated index (rare: ~nnz^2/(2 dim) of them) are redrawn so every
    # row has exactly nnz distinct, sorted indices, as a Batch requires.
    for i in np.flatnonzero((idx[:, 1:] == idx[:, :-1]).any(axis=1)):
        idx[i] = np.sort(rng.choice(dim, size=nnz, replace=False))
    vals = rng.standard_normal((n, nnz))
    w = rng.standard_normal(dim)
    margin = (vals * w[idx]).sum(axis=1)
    margin += noise * margin.std() * rng.standard_normal(n)
    y = np.where(margin >= 0.0, 1, -1).astype(np.int64)
    indptr = np.arange(0, n * nnz + 1, nnz, dtype=np.int64)
    X = Batch(indptr, idx.ravel(), vals.ravel(), dim)
    desc = f"synthetic sparse: {n:,} rows, dim 2^{dim.bit_length() - 1}, {nnz} nnz/row, seed {seed}"
    return Stream("sparse", desc, X, y)


def synthetic_dense(n: int, d: int = 100, *, seed: int = 1, noise: float = 0.25) -> Stream:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    margin = X @ rng.standard_normal(d)
    margin += noise * margin.std() * rng.standard_normal(n)
    y = np.where(margin >= 0.0, 1, -1).astype(np.int64)
    desc = f"synthetic dense: {n:,} rows, {d} features, seed {seed}"
    return Stream("dense", desc, Batch.from_dense(X, keep_zeros=True), y)


def load_a9a(data_dir: Path) -> Stream | str:
    """The a9a stream, or a message saying why it is skipped."""
    train, test = data_dir / "a9a" / "a9a", data_dir / "a9a" / "a9a.t"
    if not train.exists() or not test.exists():
        return f"a9a skipped: {train} or {test} is absent (set LEARNSERVE_SHARED_DATA)"
    tr = read_svmlight(train, n_features=123)
    te = read_svmlight(test, n_features=123)
    desc = f"a9a: {tr.X.n_rows:,} train rows, 123 features; accuracy on a9a.t ({te.X.n_rows:,})"
    return Stream("a9a", desc, tr.X, tr.y.astype(np.int64), te.X, te.y.astype(np.int64))


def slice_batch(X: Batch, a: int, b: int) -> Batch:
    """Rows ``a:b`` as a view-backed Batch (contiguous, so no per-row gather)."""
    s, e = int(X.indptr[a]), int(X.indptr[b])
    return Batch(X.indptr[a : b + 1] - s, X.indices[s:e], X.values[s:e], X.dim)


def chunked(X: Batch, labels: Any, size: int) -> list[tuple[Batch, Any]]:
    return [
        (slice_batch(X, a, min(a + size, X.n_rows)), labels[a : a + size])
        for a in range(0, X.n_rows, size)
    ]
