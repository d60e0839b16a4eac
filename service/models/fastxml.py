"""FastXML extreme multi-label models (batch): the top-``k`` labels of each instance.

``/predict`` accepts ``"k"`` (default 5, at most 100); each prediction is
``{"labels": [id, ...], "scores": [s, ...]}``, best first.
"""

from __future__ import annotations

from typing import Any, ClassVar

from learners.features import Batch
from service.api.errors import invalid
from service.models.batch import BatchAdapter


class FastXMLAdapter(BatchAdapter):
    kind: ClassVar[str] = "fastxml"

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        k = body.get("k", 5)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise invalid(f"k: must be an integer in [1, 100], got {k!r}", "k")
        labels, scores = self.model.predict_topk(batch, k=k)
        out = []
        for ls, ss in zip(labels.tolist(), scores.tolist(), strict=True):
            keep = [i for i, label in enumerate(ls) if label >= 0]  # -1 pads short lists
            out.append({"labels": [ls[i] for i in keep], "scores": [ss[i] for i in keep]})
        return out
