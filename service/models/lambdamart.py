"""LambdaMART rankers (batch): a relevance score per instance, plus the ranking.

Answer: ``predictions[i] = {"score": s_i}``; the route adds nothing else, so a
client ranks a query's candidates by sending them as one request and sorting by
score (higher = more relevant).
"""

from __future__ import annotations

from typing import Any, ClassVar

from learners.features import Batch
from service.models.batch import BatchAdapter


class LambdaMARTAdapter(BatchAdapter):
    kind: ClassVar[str] = "lambdamart"

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"score": float(s)} for s in self.model.predict(batch)]
