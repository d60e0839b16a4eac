"""Extreme-classification metrics: P@k and nDCG@k as the XC Repository defines them.

For a point with true label set ``y`` and predicted ranking ``l_1, l_2, ...``:

- ``P@k = (1/k) sum_{j<=k} [l_j in y]``
- ``nDCG@k = DCG@k / IDCG@k`` with ``DCG@k = sum_{j<=k} [l_j in y] / log2(j + 1)`` and
  ``IDCG@k = sum_{j<=min(k, |y|)} 1 / log2(j + 1)``.

Both are averaged over all points; a point without labels scores 0 (it counts in
the mean). Padding (label ``-1``) never matches.

>>> import numpy as np
>>> pred = np.array([[3, 1, 2]])
>>> precision_at_k(pred, [[1, 3]], 3), round(ndcg_at_k(pred, [[1, 3]], 3), 4)
(0.6666666666666666, 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from learners.xml._io import LabelSets

__all__ = ["ndcg_at_k", "precision_at_k", "xml_metrics"]


def _hits(pred: np.ndarray, Y: LabelSets, k: int) -> np.ndarray:
    pred = np.asarray(pred)
    if pred.ndim != 2:
        raise ValueError(f"predictions must be a 2-d array (n, k), got shape {pred.shape}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if pred.shape[1] < k:
        raise ValueError(f"predictions have {pred.shape[1]} columns, fewer than k={k}")
    if len(Y) != pred.shape[0]:
        raise ValueError(f"{pred.shape[0]} predictions for {len(Y)} label sets")
    hits = np.zeros((pred.shape[0], k))
    for i, labs in enumerate(Y):
        truth = set(int(v) for v in labs)
        for j in range(k):
            hits[i, j] = pred[i, j] in truth
    return hits


def precision_at_k(pred: np.ndarray, Y: LabelSets, k: int) -> float:
    """Mean over points of the fraction of the top ``k`` predictions that are true."""
    return float(_hits(pred, Y, k).sum(axis=1).mean() / k)


def ndcg_at_k(pred: np.ndarray, Y: LabelSets, k: int) -> float:
    """Mean over points of DCG@k normalised by the ideal DCG over min(k, |y|) labels."""
    hits = _hits(pred, Y, k)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = hits @ disc
    counts = np.array([min(k, len(set(int(v) for v in labs))) for labs in Y], dtype=np.int64)
    ideal = np.concatenate([[0.0], np.cumsum(disc)])[counts]
    out = np.zeros_like(dcg)
    np.divide(dcg, ideal, out=out, where=ideal > 0)
    return float(out.mean())


def xml_metrics(pred: np.ndarray, Y: LabelSets, ks: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """``{"P@1": .., "P@3": .., "P@5": .., "nDCG@1": .., ...}``."""
    out = {f"P@{k}": precision_at_k(pred, Y, k) for k in ks}
    out.update({f"nDCG@{k}": ndcg_at_k(pred, Y, k) for k in ks})
    return out
