"""A scikit-learn transformer around the records encoder (optional module).

:class:`RecordTransformer` turns an iterable of raw records (``{field: number | string
| [strings] | null}``, :mod:`learners.records`) into a ``scipy.sparse`` CSR matrix of
``2**bits`` hashed columns, so the encoder can sit in a ``sklearn.pipeline.Pipeline``
before :mod:`learners.linear.sklearn`'s estimators or scikit-learn's own.

scikit-learn and scipy are imported here only: ``learners`` and ``learners.records``
never import this module, so they work without either (both are in the ``test`` extra).

Statistics (``standardize``, ``idf``): :meth:`RecordTransformer.fit` learns them from
the records in order (reset first), :meth:`~RecordTransformer.partial_fit` adds more,
:meth:`~RecordTransformer.transform` encodes with the statistics as they are and
changes nothing. So ``fit_transform`` encodes every training record with the final
statistics, as scikit-learn's ``TfidfVectorizer`` does; the online protocol (each
record with the statistics of the records before it, what the service and
``RecordEncoder.learn`` do) differs from it only for configs with such statistics.

>>> t = RecordTransformer({"kind": "records", "bits": 10,
...                        "fields": {"age": {"type": "numeric"}}})
>>> X = t.fit_transform([{"age": 39}, {"age": None}])
>>> X.shape, X.dtype.name, X.nnz  # the intercept in both rows, age in the first
((2, 1024), 'float64', 3)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from learners.records.encoder import RecordEncoder

__all__ = ["RecordTransformer"]


def _records(X: Iterable[Any]) -> list[Any]:
    # a pandas frame or an array of objects iterates differently: records are mappings
    if hasattr(X, "to_dict"):
        X = X.to_dict("records")
    return list(X)


class RecordTransformer(TransformerMixin, BaseEstimator):
    """Raw records to a CSR float64 matrix of shape ``(n, 2**bits)``.

    ``config`` is the records config (``{"kind": "records", "bits": ..., "fields":
    ...}``), checked when fitting (``learners.records.ConfigError``, a ``ValueError``
    naming the field). Fitted attributes: ``encoder_`` (the :class:`RecordEncoder`,
    holding the statistics) and ``n_features_out_``.
    """

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def fit(self, X: Iterable[Any], y: Any = None) -> RecordTransformer:
        """Learn the statistics of ``X``'s records, in order, from none."""
        del y
        self.encoder_ = RecordEncoder(self.config)
        self.n_features_out_ = int(self.encoder_.dim)
        self.encoder_.observe(_records(X))
        return self

    def partial_fit(self, X: Iterable[Any], y: Any = None) -> RecordTransformer:
        """Add ``X``'s records to the statistics (fits first if not fitted)."""
        del y
        if not hasattr(self, "encoder_"):
            return self.fit(X)
        self.encoder_.observe(_records(X))
        return self

    def transform(self, X: Iterable[Any]) -> sp.csr_matrix:
        """The rows of ``X``'s records with the current statistics (unchanged)."""
        check_is_fitted(self, "encoder_")
        rows = _records(X)
        if not rows:
            return sp.csr_matrix((0, self.n_features_out_), dtype=np.float64)
        b = self.encoder_.encode(rows)
        return sp.csr_matrix((b.values, b.indices, b.indptr), shape=(len(rows), b.dim))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # records, not a numeric matrix
        tags.input_tags.dict = True
        tags.input_tags.sparse = False
        return tags
