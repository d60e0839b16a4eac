"""What an online linear classifier says of examples: scores, the predicted label, and
how sure it is that this label beats the runner-up."""

from __future__ import annotations

import math

import numpy as np

from learners.base import Label, Prediction
from learners.features import Batch
from learners.linear import _kernels as K
from learners.linear import _kernels_full as KF
from learners.linear._normal import normal_cdf
from learners.linear._state import LinearModel


class NotFittedError(ValueError):
    """Prediction was asked of a model that has not learned any label yet."""


class LinearScorer(LinearModel):
    """The scoring half of ``LinearClassifier``: predictions from the learned state."""

    def _fitted(self) -> None:
        if not self.labels_:
            raise NotFittedError("model has not learned any label yet")

    def decision_function(self, batch: Batch) -> np.ndarray:
        """(n, K) scores, columns in ``labels_`` order (binary: μ·x and −μ·x; one label: μ·x)."""
        self._fitted()
        return self._decision(*self._check_batch(batch))

    def _decision(self, ip: np.ndarray, ix: np.ndarray, vs: np.ndarray) -> np.ndarray:
        return K.scores(ip, ix, vs, self._mean, len(self.labels_) == 2)

    def predict(self, batch: Batch) -> list[Label]:
        s = self.decision_function(batch)
        labels = self.labels_
        return [labels[k] for k in np.argmax(s, axis=1).tolist()]

    def predict_details(self, batch: Batch) -> list[Prediction]:
        """Label, score, all scores and a confidence per example.

        ``confidence`` (CW, AROW, SCW) is Φ(m/√v): the probability, under the
        Gaussian weights, that the predicted label still beats the runner-up, with
        m = (μ_pred − μ_runner)·x and v = xᵀ(Σ_pred + Σ_runner)x. A binary model
        uses its own margin |μ·x| and variance xᵀΣx (the same pair figures the
        multiclass embedding preserves). ``None`` for PA, or while only one label
        is known (there is no runner-up).
        """
        self._fitted()
        ip, ix, vs = self._check_batch(batch)
        labels = self.labels_
        if self._has_cov and self.covariance != "full" and len(labels) >= 2:
            # the common serving case: one kernel call for scores, ranks and variances
            s, best, margin, var = K.details_diag(ip, ix, vs, self._w, len(labels))
            sqrt, cdf = math.sqrt, normal_cdf
            return [
                Prediction(
                    labels[b],
                    row[b],
                    dict(zip(labels, row, strict=True)),
                    cdf(m / sqrt(v)) if v > 0.0 else 0.5,
                )
                for row, b, m, v in zip(
                    s.tolist(), best.tolist(), margin.tolist(), var.tolist(), strict=True
                )
            ]
        s = self._decision(ip, ix, vs)
        n, k = s.shape
        best, second, margin = K.best_two(s, k == 2)
        conf: list[float | None] = [None] * n
        cov = self._cov
        if cov is not None and k >= 2:
            fn = KF.pair_variance_full if self.covariance == "full" else K.pair_variance_diag
            # a binary model keeps one Σ (row 0) for the pair; second is then -1
            ka = best if k > 2 else np.zeros(n, np.int64)
            var = fn(ip, ix, vs, cov, ka, second)
            conf = [
                normal_cdf(m / math.sqrt(v)) if v > 0.0 else 0.5
                for m, v in zip(margin.tolist(), var.tolist(), strict=True)
            ]
        return [
            Prediction(labels[b], row[b], dict(zip(labels, row, strict=True)), c)
            for row, b, c in zip(s.tolist(), best.tolist(), conf, strict=True)
        ]

    def label_weights(self, label: Label) -> tuple[np.ndarray, np.ndarray | None]:
        """``(w, var)``: the weights that score ``label`` (its score is ``w·x``) and
        their variances (the diagonal of Σ: how sure the model is of each weight;
        ``None`` for PA, which keeps no Σ). Copies. A binary model scores its first
        label with μ and its second with −μ, both with the one Σ; ``KeyError`` for a
        label the model does not know."""
        j = self._index[label]
        binary = len(self.labels_) <= 2
        row = 0 if binary else j
        w = np.array(self._mean[row], dtype=np.float64)
        if binary and j == 1:
            w = -w
        cov = self._cov
        if cov is None:
            return w, None
        var = np.diagonal(cov[row]) if self.covariance == "full" else cov[row]
        return w, np.array(var, dtype=np.float64)
