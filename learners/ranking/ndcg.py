"""NDCG@k exactly as LightGBM's ``ndcg`` metric defines it.

- gain of a document with relevance ``r``: ``2**r - 1``;
- discount of position ``i`` (0-based): ``1 / log2(i + 2)``;
- per query: ``NDCG@k = DCG@k / ideal DCG@k`` (``k`` truncated to the query size);
- a query whose ideal DCG is 0 (all labels 0) counts as 1, as in LightGBM;
- the mean is taken over queries (each query weighs the same).

Ties in the scores are broken by a *stable* sort on descending score: among
equal scores the document that comes first in the input is ranked first.
LightGBM's ``DCGCalculator::CalDCG`` uses ``std::stable_sort`` with the same
comparator, so both give identical figures on tied scores.

>>> import numpy as np
>>> ndcg_at_k(np.array([0.2, 0.9, 0.1]), np.array([1, 2, 0]), np.array([3]), 3)
1.0
>>> round(ndcg_at_k(np.array([0.9, 0.2]), np.array([0, 1]), np.array([2]), 1), 4)
0.0
"""

from __future__ import annotations

import numpy as np

from learners.ranking._ndcg_kernels import per_query_ndcg

__all__ = ["check_groups", "groups_from_qid", "ndcg_at_k", "ndcg_by_qid", "ndcg_per_query"]


def check_groups(group_sizes: object, n_rows: int, name: str = "group_sizes") -> np.ndarray:
    """Validate query group sizes: positive integers summing to ``n_rows``."""
    g = np.asarray(group_sizes)
    if g.ndim != 1 or g.shape[0] == 0:
        raise ValueError(f"{name}: must be a non-empty 1-d sequence of group sizes")
    if g.dtype.kind not in "iu":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise ValueError(f"{name}: group sizes must be integers")
    g = g.astype(np.int64)
    if np.any(g <= 0):
        raise ValueError(f"{name}[{int(np.argmax(g <= 0))}]: group size must be positive")
    if int(g.sum()) != n_rows:
        raise ValueError(
            f"{name}: group sizes add up to {int(g.sum())}, but there are {n_rows} rows"
        )
    return g


def groups_from_qid(qid: object, n_rows: int, name: str = "qid") -> np.ndarray:
    """Group sizes from one query id per row; a query's rows must be consecutive (as in
    LightGBM and in SVMlight ``qid:`` files), so ``[7, 7, 3, 7]`` is refused."""
    q = np.asarray(qid)
    if q.shape != (n_rows,):
        raise ValueError(f"{name}: expected one query id per row ({n_rows}), got shape {q.shape}")
    if n_rows == 0:
        raise ValueError(f"{name}: there are no rows")
    starts = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]]))
    if np.unique(q[starts]).shape[0] != starts.shape[0]:
        _, first = np.unique(q[starts], return_index=True)
        again = int(starts[np.setdiff1d(np.arange(starts.shape[0]), first)[0]])
        raise ValueError(
            f"{name}[{again}]: query {q[again]!r} appears again after other queries; "
            "the rows of a query must be consecutive"
        )
    return np.diff(np.append(starts, n_rows)).astype(np.int64)


def ndcg_by_qid(y_true: object, y_score: object, *, qid: object, k: int = 10) -> float:
    """Mean NDCG@k with queries given as one id per row: the signature of a
    scikit-learn score function, e.g.
    ``make_scorer(ndcg_by_qid, k=10).set_score_request(qid=True)``."""
    s = np.asarray(y_score, dtype=np.float64)
    return ndcg_at_k(s, np.asarray(y_true, dtype=np.float64), groups_from_qid(qid, s.shape[0]), k)


def ndcg_per_query(
    scores: np.ndarray, labels: np.ndarray, group_sizes: np.ndarray, k: int
) -> np.ndarray:
    """NDCG@k of each query group, in order (float64 array of ``len(group_sizes)``)."""
    s = np.ascontiguousarray(scores, dtype=np.float64)
    y = np.ascontiguousarray(labels, dtype=np.float64)
    if s.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"scores and labels must be 1-d of equal length, got {s.shape}, {y.shape}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores: every score must be finite")
    if np.any(y < 0) or not np.all(np.isfinite(y)):
        raise ValueError("labels: relevance must be finite and >= 0")
    g = check_groups(group_sizes, s.shape[0])
    offsets = np.zeros(g.shape[0] + 1, dtype=np.int64)
    np.cumsum(g, out=offsets[1:])
    return per_query_ndcg(s, y, offsets, int(k))


def ndcg_at_k(scores: np.ndarray, labels: np.ndarray, group_sizes: np.ndarray, k: int) -> float:
    """Mean NDCG@k over query groups (LightGBM's definition; see the module docstring)."""
    return float(np.mean(ndcg_per_query(scores, labels, group_sizes, k)))
