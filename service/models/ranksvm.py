"""Adapter for the online pairwise ranker (RankSVM, :mod:`learners.ranking.ranksvm`).

Config (``PUT /models/{name}``); ``features`` are the same kinds as for classifiers::

    {"algorithm": "ranksvm", "params": {"lam": 0.01, "pairs_per_group": 100, "seed": 0},
     "features": {"kind": "sparse", "dim": 300}}

``POST /update`` learns from query groups (relevance: integers in [0, 30])::

    {"model": "web", "queries": [{"qid": "q1", "items": [
        {"x": {"3": 0.5, "17": 1.0}, "relevance": 2}, {"x": {"3": 0.1}, "relevance": 0}]}]}

and answers ``{"model", "applied": <items>, "version"}``. ``POST /predict`` takes
the same ``queries`` (``relevance`` not needed) and answers, per query,
``{"qid", "scores": [one per item, in the order sent], "order": [item indices,
best first; ties keep the order sent]}``; or ``instances`` (``[{"x": ...}]``),
answered with ``{"score": s}`` per instance.

Each update reports its progressive NDCG@10 (every group scored before the model
learns from it): ``online_metrics.ndcg_at_10`` of ``GET /models/{name}`` and the
``learnserve_online_ndcg_at_10`` gauge.

The log entry is the encoded batch (:mod:`service.models.payload`) with the
relevance labels as ``y`` and the group sizes as ``g``; replay never re-parses JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from learners.base import UpdateResult
from learners.features import FeatureSpec
from service.limits import items_field, require_list
from service.models.base import ModelAdapter
from service.models.linear import online_model_config
from service.models.payload import decode_payload, encode_payload
from service.models.queries import (
    encode_rows,
    parse_queries,
    ranked,
    ranking_or_instances,
    scored,
)

if TYPE_CHECKING:
    from service.settings import Settings


class RankSVMAdapter(ModelAdapter):
    kind: ClassVar[str] = "ranksvm"

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        super().__init__(config, model)
        self.spec = FeatureSpec.from_config(config["features"])

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        from learners.ranking.ranksvm import make_ranker

        return online_model_config(
            cls.kind, body, settings, ("ranksvm",), lambda _, spec, p: make_ranker(spec.dim, p)
        )

    @classmethod
    def create(cls, config: dict[str, Any]) -> RankSVMAdapter:
        from learners.ranking.ranksvm import make_ranker

        spec = FeatureSpec.from_config(config["features"])
        return cls(config, make_ranker(spec.dim, dict(config["params"])))

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> RankSVMAdapter:
        from learners.ranking.ranksvm import RankSVM

        return cls(config, RankSVM.from_bytes(blob))

    @classmethod
    def warmup(cls) -> None:
        from learners.ranking.ranksvm import RankSVM

        batch = FeatureSpec.sparse(4).encode([{"0": 1.0}, {"1": 1.0, "3": -1.0}, {"2": 0.5}])
        for pairs in (None, 1):  # all pairs, and sampled pairs
            m = RankSVM(dim=4, pairs_per_group=pairs)
            m.update(batch, [2, 0, 1], groups=[3])
            m.decision_function(batch)

    # ------------------------------------------------------------ write path
    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]:
        q = parse_queries(body, settings, relevance=True)
        batch, X = encode_rows(self.spec, q.xs, settings, raw, q.locate())
        dense = self.spec.kind == "dense"
        payload = encode_payload(batch, q.relevance, dense=dense, matrix=X, g=q.sizes)
        return payload, len(q.xs)

    def apply(self, payload: bytes) -> UpdateResult:
        batch, meta = decode_payload(payload, self.spec.dim)
        result: UpdateResult = self.model.update(batch, meta["y"], groups=meta["g"])
        return result

    # ------------------------------------------------------------ read path
    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        if ranking_or_instances(body):
            q = parse_queries(body, settings, relevance=False)
            batch, _ = encode_rows(self.spec, q.xs, settings, raw, q.locate())
            return ranked(self._scores(batch), q.qids, q.sizes)
        rows = require_list(body, "instances", settings.max_batch_examples)
        xs = items_field(rows, "instances", "x")
        batch, _ = encode_rows(self.spec, xs, settings, raw, lambda i: f"instances[{i}]")
        return scored(self._scores(batch))

    def _scores(self, batch: Any) -> np.ndarray:
        s: np.ndarray = self.model.decision_function(batch)
        return s

    def describe(self) -> dict[str, Any]:
        return {"dim": self.spec.dim}
