"""Adapter for the online pairwise ranker (RankSVM, :mod:`learners.ranking.ranksvm`).

Config (``PUT /models/{name}``); ``features`` are the same kinds as for classifiers::

    {"algorithm": "ranksvm", "params": {"lam": 0.01, "pairs_per_group": 100, "seed": 0},
     "features": {"kind": "sparse", "dim": 300}}

``POST /update`` learns from query groups; ``relevance`` is any finite real number
(pairwise learning reads only the order of the items within a query, so
disease-progression scores 25..346 or negative values serve as well as graded 0..4)::

    {"model": "web", "queries": [{"qid": "q1", "items": [
        {"x": {"3": 0.5, "17": 1.0}, "relevance": 2}, {"x": {"3": 0.1}, "relevance": 0}]}]}

and answers ``{"model", "applied": <items>, "version"}``. ``POST /predict`` takes
the same ``queries`` (``relevance`` not needed) and answers, per query,
``{"qid", "scores": [one per item, in the order sent], "order": [item indices,
best first; ties keep the order sent]}``; or ``instances`` (``[{"x": ...}]``),
answered with ``{"score": s}`` per instance.

Each update reports its progressive NDCG@10 (every group scored before the model
learns from it): ``online_metrics.ndcg_at_10`` of ``GET /models/{name}`` and the
``learnserve_online_ndcg_at_10`` gauge. Its gain is LightGBM's ``2**rel - 1`` for a
query whose relevances are all integers in [0, 30], else the linear ``rel - min(rel
of the query)`` (``2**346`` would overflow); ``online_metrics.ndcg_gain`` says so.

A batch whose values are finite but would make the weights non-finite (e.g. 1e308
features) is refused before it is appended (``check_update``, a dry run on a copy),
naming ``queries[q].items[j].x``.

The log entry is the encoded batch (:mod:`service.models.payload`) with the
relevance labels as ``y`` and the group sizes as ``g``; replay never re-parses JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from learners.base import UpdateResult
from learners.features import Batch, FeatureSpec
from service.api.errors import invalid
from service.limits import items_field, require_list
from service.models.base import ModelAdapter
from service.models.linear import online_model_config, overflow_problem
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

    def check_update(self, payload: bytes) -> None:
        batch, meta = decode_payload(payload, self.spec.dim)
        q = self.model.first_nonfinite_group(batch, meta["y"], groups=meta["g"])
        if q is not None:
            loc, problem = self._overflow(batch, meta["g"], q)
            raise invalid(f"{loc}: {problem}", loc)

    def apply(self, payload: bytes) -> UpdateResult:
        batch, meta = decode_payload(payload, self.spec.dim)
        try:
            result: UpdateResult = self.model.update(batch, meta["y"], groups=meta["g"])
        except FloatingPointError:  # appended by a worker behind this state; unchanged
            q = self.model.first_nonfinite_group(batch, meta["y"], groups=meta["g"])
            loc, problem = self._overflow(batch, meta["g"], q or 0)
            raise ValueError(f"{loc}: {problem}") from None
        return result

    @staticmethod
    def _overflow(batch: Batch, sizes: list[int], q: int) -> tuple[str, str]:
        """``queries[q].items[j].x`` of the query's item with the largest value (the pair
        steps of a query mix its items; the largest value is what overflows)."""
        start = int(sum(sizes[:q]))
        rows = range(start, start + sizes[q])
        peak = [
            float(np.abs(batch.values[batch.indptr[r] : batch.indptr[r + 1]]).max(initial=0.0))
            for r in rows
        ]
        j = int(np.argmax(peak))
        return f"queries[{q}].items[{j}].x", overflow_problem(batch, [start + j])

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
