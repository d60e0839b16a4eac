"""Locally linear SVM classifiers (batch): label and per-class scores, like online models.

``GET /models/{name}`` shows, under ``training``, the training error and hinge loss of
the last SGD pass (``final_pass``, from the artifact's per-pass history) and the number
of training examples when ``learnserve train llsvm`` recorded it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from learners.features import Batch
from service.models.batch import BatchAdapter


class LLSVMAdapter(BatchAdapter):
    kind: ClassVar[str] = "llsvm"
    tensor_task: ClassVar[str | None] = "classify"
    HIDDEN_PARAMS: ClassVar[frozenset[str]] = frozenset({"classes"})
    TRAINING_FACTS: ClassVar[tuple[str, ...]] = ("train_file", "train_seconds", "input_scale")

    def classes(self) -> list[Any]:
        return list(self.model.classes_.tolist()) if self.model is not None else []

    def data_shape(self, params: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        shape: dict[str, Any] = {"d": self.n_features, "classes": len(self.model.classes_)}
        n = meta.get("train_examples")
        if isinstance(n, int) and not isinstance(n, bool):
            shape["n"] = n
        return shape

    def training_facts(self, meta: dict[str, Any]) -> dict[str, Any]:
        facts = super().training_facts(meta)
        history = meta.get("history")
        if isinstance(history, list) and history and isinstance(history[-1], dict):
            facts["final_pass"] = history[-1]  # the CLI's per-pass train error / hinge loss
        return facts

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
