"""FastXML extreme multi-label models (batch): the top-``k`` labels of each instance.

``/predict`` accepts ``"k"`` (default 5, at most 100); each prediction is
``{"labels": [...], "ids": [id, ...], "scores": [s, ...]}``, best first. ``labels``
are the label names stored in the artifact (``learnserve train fastxml
--label-names FILE``), or the label ids when it has none; ``ids`` are always the
0-based label ids (the XC file's).
"""

from __future__ import annotations

from typing import Any, ClassVar

from learners.features import Batch
from service.errors import invalid
from service.models.batch import BatchAdapter


class FastXMLAdapter(BatchAdapter):
    kind: ClassVar[str] = "fastxml"
    HIDDEN_PARAMS: ClassVar[frozenset[str]] = frozenset({"label_names"})

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        k = body.get("k", 5)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise invalid(f"k: must be an integer in [1, 100], got {k!r}", "k")
        labels, scores = self.model.predict_topk(batch, k=k)
        names = self.model.label_names
        out = []
        for ls, ss in zip(labels.tolist(), scores.tolist(), strict=True):
            keep = [i for i, label in enumerate(ls) if label >= 0]  # -1 pads short lists
            ids = [ls[i] for i in keep]
            out.append(
                {
                    "labels": ids if names is None else [names[j] for j in ids],
                    "ids": ids,
                    "scores": [ss[i] for i in keep],
                }
            )
        return out

    def data_shape(self, params: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "d": self.n_features,
            "labels": int(self.model.n_labels_),
            "label_names": self.model.label_names is not None,
        }
