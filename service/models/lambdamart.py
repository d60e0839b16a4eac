"""LambdaMART rankers (batch): deployed with ``PUT /models/{name}/artifact``.

``POST /predict`` takes either

- ``queries`` (as for RankSVM, see :mod:`service.models.queries`)::

      {"model": "web", "queries": [{"qid": "q1", "items": [{"x": {"1": 0.5}}, {"x": {"7": 1.0}}]}]}

  answered per query with ``{"qid", "scores": [one per item, in the order sent],
  "order": [item indices, best first; ties keep the order sent]}``; or
- ``instances`` (``[{"x": ...}, ...]``), answered with ``{"score": s}`` per
  instance (higher = more relevant). A binary model imported from LightGBM
  (``learnserve import lightgbm``) adds ``"probability"``, LightGBM's
  ``1 / (1 + exp(-sigmoid * score))``; ``score`` is LightGBM's raw score.

Features: a dense list has exactly ``n_features`` values (column ``j`` is the
model's feature ``j``). Sparse keys are feature indices *as written in the
training file*: when the artifact's meta has ``index_base`` 1 (``learnserve train
lambdamart`` on the usual 1-based SVMlight/LETOR files), ``{"1": 0.5}`` is the
file's feature 1 (dense column 0) and keys run from 1 to ``n_features``; without
``index_base`` (or 0, e.g. a model fitted on a numpy matrix), keys are 0-based
columns ``0 .. n_features - 1``. ``GET /models/{name}`` shows both figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from learners.features import Batch, FeatureSpec
from service.errors import Kind, ServiceError
from service.models.batch import BatchAdapter
from service.models.json_fields import items_field, require_list
from service.models.queries import (
    encode_rows,
    parse_queries,
    ranked,
    ranking_or_instances,
    scored,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.settings import Settings


class LambdaMARTAdapter(BatchAdapter):
    kind: ClassVar[str] = "lambdamart"

    def __init__(self, config: dict[str, Any], model: Any, *args: Any) -> None:
        super().__init__(config, model, *args)
        meta = getattr(model, "meta_", None) or {}
        self.index_base = 1 if meta.get("index_base", 0) == 1 else 0
        # imported LightGBM models: the objective, and binary's sigmoid (checked at load)
        self.objective: str | None = meta.get("objective")
        self.sigmoid = float(meta.get("sigmoid", 1.0))

    def encode(
        self, xs: list[Any], settings: Settings, raw: bytes, locate: Callable[[int], str]
    ) -> Batch:
        assert self.n_features is not None
        if isinstance(xs[0], list):
            spec = FeatureSpec.dense(self.n_features)
            base = 0
        else:  # sparse keys from index_base to n_features - 1 + index_base
            spec = FeatureSpec.sparse(self.n_features + self.index_base)
            base = self.index_base
        batch, _ = encode_rows(spec, xs, settings, raw, locate, index_base=base)
        return batch

    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        if self.model is None or self.n_features is None:
            raise ServiceError(
                Kind.CONFLICT, "no_artifact", "no artifact is deployed for this model yet"
            )
        if ranking_or_instances(body):
            q = parse_queries(body, settings, relevance=False)
            batch = self.encode(q.xs, settings, raw, q.locate())
            return ranked(self._scores(batch), q.qids, q.sizes)
        rows = require_list(body, "instances", settings.max_batch_examples)
        xs = items_field(rows, "instances", "x")
        return self.answer(self.encode(xs, settings, raw, lambda i: f"instances[{i}]"), body)

    tensor_task: ClassVar[str | None] = "rank"

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        s = self._scores(batch)
        out = scored(s)
        if self.objective == "binary":  # LightGBM's ConvertOutput: 1 / (1 + exp(-sigmoid * s))
            for o, p in zip(out, (1.0 / (1.0 + np.exp(-self.sigmoid * s))).tolist(), strict=True):
                o["probability"] = p
        return out

    def _scores(self, batch: Batch) -> np.ndarray:
        s: np.ndarray = self.model.predict(batch)
        return s

    TRAINING_FACTS: ClassVar[tuple[str, ...]] = (
        "train_file", "train_seconds", "best_iteration", "index_base",
    )  # fmt: skip

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {**super().describe(), "index_base": self.index_base}
        if self.objective is not None:
            out["objective"] = self.objective
        return out
