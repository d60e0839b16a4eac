"""Locally linear SVM classifiers (batch): label and per-class scores, like online models."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from learners.features import Batch
from service.models.batch import BatchAdapter


class LLSVMAdapter(BatchAdapter):
    kind: ClassVar[str] = "llsvm"

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        scores = self.model.decision_function(batch)
        classes = self.model.classes_.tolist()  # ints or strings, as trained
        best = np.argmax(scores, axis=1)
        return [
            {
                "label": classes[int(j)],
                "score": float(row[j]),
                "scores": {c: float(v) for c, v in zip(classes, row, strict=True)},
            }
            for j, row in zip(best, scores, strict=True)
        ]
