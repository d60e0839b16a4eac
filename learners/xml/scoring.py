"""A P@k scorer for scikit-learn's model selection (``GridSearchCV(FastXML(), ...,
scoring=PrecisionAtK(3))``), without importing scikit-learn.

A scorer is any callable ``scorer(estimator, X, Y) -> float`` (greater is better):
``X`` is the held-out rows as scikit-learn sliced them (a ``scipy.sparse`` matrix or
an array), ``Y`` their label sets (a list of label lists slices as a list).
"""

from __future__ import annotations

from typing import Any

from learners.features import Batch
from learners.xml.metrics import precision_at_k

__all__ = ["PrecisionAtK"]


class PrecisionAtK:
    """Mean P@k of ``estimator.predict_topk`` on held-out rows."""

    def __init__(self, k: int = 1) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        self.k = k

    def __call__(self, estimator: Any, X: Any, Y: Any) -> float:
        labels, _ = estimator.predict_topk(Batch.coerce(X), self.k)
        return precision_at_k(labels, list(Y), self.k)

    def __repr__(self) -> str:
        return f"PrecisionAtK(k={self.k})"
