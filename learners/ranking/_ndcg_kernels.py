"""numba kernels for NDCG (shared by the metric, RankSVM's progressive score and LambdaMART)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def group_ndcg(scores: np.ndarray, labels: np.ndarray, start: int, end: int, k: int) -> float:
    """NDCG@k of rows ``start:end``; stable sort by descending score; all-zero ideal -> 1."""
    n = end - start
    kk = min(k, n)
    s = scores[start:end]
    y = labels[start:end]
    # argsort of -s with a stable algorithm = descending score, ties in input order.
    order = np.argsort(-s, kind="mergesort")
    dcg = 0.0
    for i in range(kk):
        dcg += (2.0 ** y[order[i]] - 1.0) / np.log2(i + 2.0)
    ideal = np.sort(y)[::-1]
    idcg = 0.0
    for i in range(kk):
        idcg += (2.0 ** ideal[i] - 1.0) / np.log2(i + 2.0)
    if idcg <= 0.0:
        return 1.0
    return dcg / idcg


@njit(cache=True)
def per_query_ndcg(
    scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray, k: int
) -> np.ndarray:
    nq = offsets.shape[0] - 1
    out = np.empty(nq, dtype=np.float64)
    for q in range(nq):
        out[q] = group_ndcg(scores, labels, offsets[q], offsets[q + 1], k)
    return out
