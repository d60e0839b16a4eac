"""scikit-learn estimators around the online linear classifiers (optional module).

This module and ``learners.records.sklearn`` are the ones of ``learners`` that import
scikit-learn; nothing else imports them, so the core stays numpy/numba only. The
estimators follow the scikit-learn conventions: hyperparameters in ``__init__``
(stored as given), ``fit`` (reset, then ``epochs`` passes in the given order),
``partial_fit`` (one more pass, labels may appear at any time), ``predict``,
``decision_function`` (binary: one column, positive = ``classes_[1]``), fitted
attributes with a trailing underscore (``classes_``, ``n_features_in_``, ``model_``).

>>> import numpy as np
>>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.2], [0.1, 1.0]])
>>> clf = AROWClassifier(r=1.0).fit(X, ["a", "b", "a", "b"])
>>> clf.predict(X).tolist(), clf.classes_.tolist()
(['a', 'b', 'a', 'b'], ['a', 'b'])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from learners.features import Batch
from learners.linear import LinearClassifier, make_classifier
from learners.weights import check_sample_weight

__all__ = [
    "AROWClassifier",
    "CWClassifier",
    "OnlineLinearClassifier",
    "PA1Classifier",
    "PA2Classifier",
    "PAClassifier",
    "SCW1Classifier",
    "SCW2Classifier",
]


def _to_batch(X: Any) -> Batch:
    if hasattr(X, "tocsr"):
        X = X.tocsr()
        X.sort_indices()
        return Batch.from_csr(X.indptr, X.indices, X.data, X.shape[1])
    return Batch.from_dense(np.asarray(X, dtype=np.float64))


def _weights(sample_weight: Any, X: Any) -> np.ndarray:
    """scikit-learn's reading of ``sample_weight`` (array-likes, a scalar for all), then
    the learners' rule: every weight finite and > 0 (``ValueError`` naming it)."""
    if sample_weight is None:
        return check_sample_weight(None, X.shape[0])
    return check_sample_weight(_check_sample_weight(sample_weight, X, dtype=np.float64), X.shape[0])


class OnlineLinearClassifier(ClassifierMixin, BaseEstimator):
    """Base estimator; use a subclass (``AROWClassifier``...) for named hyperparameters."""

    _algorithm = ""
    _hyper: tuple[str, ...] = ()

    def _new_model(self, dim: int) -> LinearClassifier:
        params = {name: getattr(self, name) for name in self._hyper}
        return make_classifier(self._algorithm, dim, params)

    def _check_epochs(self) -> int:
        epochs = getattr(self, "epochs", 1)
        if isinstance(epochs, bool) or not isinstance(epochs, int | np.integer) or epochs < 1:
            raise ValueError(f"epochs: must be an integer >= 1, got {epochs!r}")
        return int(epochs)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> OnlineLinearClassifier:
        """Forget everything, then learn ``epochs`` passes over (X, y) in order
        (``sample_weight``: importance weights, see :mod:`learners.weights`)."""
        epochs = self._check_epochs()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        sw = _weights(sample_weight, X)
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.shape[0] < 2:
            raise ValueError(
                f"The number of classes has to be greater than one; got {classes.shape[0]} class"
            )
        self.model_ = self._new_model(X.shape[1])
        self._seen: list[Any] = []  # original labels in the model's (first-seen) order
        self.classes_ = classes
        for _ in range(epochs):
            self._learn(X, y, sw)
        return self

    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None
    ) -> OnlineLinearClassifier:
        """One more pass over (X, y); ``classes`` may announce labels not seen yet;
        ``sample_weight`` gives each example an importance weight (finite, > 0)."""
        first = not hasattr(self, "model_")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        check_classification_targets(y)
        sw = _weights(sample_weight, X)
        if first:
            self._check_epochs()
            self.model_ = self._new_model(X.shape[1])
            self._seen = []
            self.classes_ = np.unique(y if classes is None else np.concatenate([classes, y]))
        else:
            self.classes_ = np.unique(np.concatenate([self.classes_, y]))
        self._learn(X, y, sw)
        return self

    def _learn(self, X: Any, y: np.ndarray, sw: np.ndarray) -> None:
        codes = {lab: i for i, lab in enumerate(self._seen)}
        for lab in y.tolist():
            if lab not in codes:
                codes[lab] = len(self._seen)
                self._seen.append(lab)
        ids = np.fromiter((codes[lab] for lab in y.tolist()), dtype=np.int64, count=len(y))
        self.model_.update(_to_batch(X), ids, None if sw.size == 0 else sw)
        self.n_iter_ = getattr(self, "n_iter_", 0) + 1

    def decision_function(self, X: Any) -> np.ndarray:
        """(n,) for two classes (positive = ``classes_[1]``), else (n, n_classes)."""
        check_is_fitted(self, "model_")
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        raw = self.model_.decision_function(_to_batch(X))  # columns: model labels 0..k-1
        seen = [self._seen[k] for k in self.model_.labels_]  # type: ignore[index]
        if raw.shape[1] == 1:  # one label seen: its score vs the (future) other side
            raw = np.column_stack([raw[:, 0], -raw[:, 0]])
            seen = [*seen, next(c for c in self.classes_.tolist() if c != seen[0])]
        col = {lab: j for j, lab in enumerate(seen)}
        out = np.full((raw.shape[0], self.classes_.shape[0]), -np.inf)
        for j, c in enumerate(self.classes_.tolist()):
            if c in col:
                out[:, j] = raw[:, col[c]]
        if self.classes_.shape[0] == 2:
            return out[:, 1] if np.all(np.isfinite(out)) else out[:, 1] - out[:, 0]
        return out

    @property
    def coef_(self) -> np.ndarray:
        """The weights, as scikit-learn's linear classifiers shape them: ``(1, n_features)``
        for two classes (``decision_function = X @ coef_[0]``, positive = ``classes_[1]``),
        ``(n_classes, n_features)`` otherwise (row ``j`` scores ``classes_[j]``; zeros for
        a class announced to ``partial_fit`` but never seen). A copy of the model's
        mean vector(s) μ; no bias feature (see ``intercept_``)."""
        check_is_fitted(self, "model_")
        mu = self.model_.state().mu  # (1, d) while binary, else one row per label
        seen = [self._seen[k] for k in self.model_.labels_]  # type: ignore[index]
        rows = {lab: (mu[0] if j == 0 else -mu[0]) for j, lab in enumerate(seen[:2])}
        if mu.shape[0] > 1:
            rows = {lab: mu[j] for j, lab in enumerate(seen)}
        classes = self.classes_.tolist()
        if len(classes) == 2:
            pos = classes[1]
            w = rows[pos] if pos in rows else -rows[classes[0]]
            return np.asarray(w, dtype=np.float64).reshape(1, -1).copy()
        zero = np.zeros(mu.shape[1])
        return np.stack([rows.get(c, zero) for c in classes]).astype(np.float64)

    @property
    def intercept_(self) -> np.ndarray:
        """Zeros, ``(1,)`` for two classes else ``(n_classes,)``: the learners have no
        bias term. For one, add a constant feature (a column of ones) to ``X``; its
        weight in ``coef_`` is then the bias."""
        check_is_fitted(self, "model_")
        k = self.classes_.shape[0]
        return np.zeros(1 if k == 2 else k)

    def predict(self, X: Any) -> np.ndarray:
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.int64)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class PAClassifier(OnlineLinearClassifier):
    """Passive-Aggressive (no hyperparameter besides ``epochs``)."""

    _algorithm = "pa"

    def __init__(self, epochs: int = 1) -> None:
        self.epochs = epochs


class PA1Classifier(OnlineLinearClassifier):
    _algorithm = "pa1"
    _hyper = ("C",)

    def __init__(self, C: float = 1.0, epochs: int = 1) -> None:
        self.C = C
        self.epochs = epochs


class PA2Classifier(PA1Classifier):
    _algorithm = "pa2"


class CWClassifier(OnlineLinearClassifier):
    _algorithm = "cw"
    _hyper = ("eta", "covariance")

    def __init__(self, eta: float = 0.9, covariance: str = "diagonal", epochs: int = 1) -> None:
        self.eta = eta
        self.covariance = covariance
        self.epochs = epochs


class AROWClassifier(OnlineLinearClassifier):
    _algorithm = "arow"
    _hyper = ("r", "covariance")

    def __init__(self, r: float = 1.0, covariance: str = "diagonal", epochs: int = 1) -> None:
        self.r = r
        self.covariance = covariance
        self.epochs = epochs


class SCW1Classifier(OnlineLinearClassifier):
    _algorithm = "scw1"
    _hyper = ("C", "eta", "covariance")

    def __init__(
        self, C: float = 0.01, eta: float = 0.75, covariance: str = "diagonal", epochs: int = 1
    ) -> None:
        self.C = C
        self.eta = eta
        self.covariance = covariance
        self.epochs = epochs


class SCW2Classifier(SCW1Classifier):
    _algorithm = "scw2"
