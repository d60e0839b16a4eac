"""Adapter for the online pairwise ranker (RankSVM, :mod:`learners.ranking.ranksvm`).

Config (``PUT /models/{name}``); ``features`` are the same kinds as for classifiers::

    {"algorithm": "ranksvm", "params": {"lam": 0.01, "pairs_per_group": 100, "seed": 0},
     "features": {"kind": "sparse", "dim": 300}}

``POST /update`` learns from query groups; ``relevance`` is any finite real number
(pairwise learning reads only the order of the items within a query, so
disease-progression scores 25..346 or negative values serve as well as graded 0..4)::

    {"model": "web", "queries": [{"qid": "q1", "items": [
        {"x": {"3": 0.5, "17": 1.0}, "relevance": 2}, {"x": {"3": 0.1}, "relevance": 0}]}]}

and answers ``{"model", "applied": <items>, "version"}``. A query may carry an
importance ``"weight"`` (finite, > 0): its pairs' Pegasos steps are that many times
as long (:mod:`learners.ranking.ranksvm`). ``POST /predict`` takes
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
from service.errors import invalid
from service.models import feature_names as names
from service.models.base import ModelAdapter
from service.models.example_weights import entry_weights, weights_meta
from service.models.json_fields import items_field, require_list
from service.models.linear_inputs import overflow_problem
from service.models.online_config import online_model_config
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
        # 1-based sparse keys: read against a 0-based spec one wider, then shifted down
        # (queries.encode_rows, as LambdaMART reads its 1-based artifacts' keys).
        self.rows_base = self.spec.index_base if self.spec.kind == "sparse" else 0
        self.rows_spec = (
            FeatureSpec.sparse(self.spec.dim + self.rows_base) if self.rows_base else self.spec
        )
        names.attach(model, self.spec)

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        from learners.ranking.ranksvm import make_ranker

        config = online_model_config(
            cls.kind, body, settings, ("ranksvm",), lambda _, spec, p: make_ranker(spec.dim, p)
        )
        if config["features"].get("intercept") and config["features"]["kind"] != "records":
            raise invalid(
                "features.intercept: a ranker learns from differences of rows, in which a "
                "constant feature cancels out",
                "features.intercept",
            )
        if FeatureSpec.from_config(config["features"]).stateful:
            raise invalid(
                "features: standardize and idf (statistics learned in log order) are for "
                "classifiers; a ranker's records take bins, log1p and tf weighting",
                "features",
            )
        return config

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
        batch, X = encode_rows(self.rows_spec, q.xs, settings, raw, q.locate(), self.rows_base)
        dense = self.spec.kind == "dense"
        known = names.wanted(self.model, settings)
        new = names.new_names(known, q.xs, settings) if known is not None else []
        extra: dict[str, Any] = {"n": new} if new else {}
        extra.update(weights_meta(q.weights))
        payload = encode_payload(batch, q.relevance, dense=dense, matrix=X, g=q.sizes, **extra)
        return payload, len(q.xs)

    def check_update(self, payload: bytes) -> None:
        batch, meta = decode_payload(payload, self.spec.dim)
        gw = entry_weights(meta)
        q = self.model.first_nonfinite_group(batch, meta["y"], meta["g"], gw)
        if q is not None:
            loc, problem = self._overflow(batch, meta["g"], q)
            if gw is not None and gw[q] > 1.0:
                # the query's weight lengthens its steps: is it the culprit?
                unit = [*gw[:q], 1.0, *gw[q + 1 :]]
                if self.model.first_nonfinite_group(batch, meta["y"], meta["g"], unit) != q:
                    loc = f"queries[{q}].weight"
                    problem = (
                        f"weight {gw[q]!r} makes this query's steps overflow the model's "
                        "weights; the update was refused and the model is unchanged"
                    )
            raise invalid(f"{loc}: {problem}", loc)

    def apply(self, payload: bytes) -> UpdateResult:
        batch, meta = decode_payload(payload, self.spec.dim)
        gw = entry_weights(meta)
        try:
            result: UpdateResult = self.model.update(batch, meta["y"], meta["g"], gw)
        except FloatingPointError:  # appended by a worker behind this state; unchanged
            q = self.model.first_nonfinite_group(batch, meta["y"], meta["g"], gw)
            loc, problem = self._overflow(batch, meta["g"], q or 0)
            raise ValueError(f"{loc}: {problem}") from None
        names.record(self.model, meta)
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
            batch, _ = encode_rows(self.rows_spec, q.xs, settings, raw, q.locate(), self.rows_base)
            return ranked(self._scores(batch), q.qids, q.sizes)
        rows = require_list(body, "instances", settings.max_batch_examples)
        xs = items_field(rows, "instances", "x")
        batch, _ = encode_rows(
            self.rows_spec, xs, settings, raw, lambda i: f"instances[{i}]", self.rows_base
        )
        return self.predict_batch(batch)

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        return scored(self._scores(batch))

    tensor_task: ClassVar[str | None] = "rank"

    def tensor_width(self) -> int | None:
        return self.spec.dim if self.spec.kind == "dense" else None

    def _scores(self, batch: Any) -> np.ndarray:
        s: np.ndarray = self.model.decision_function(batch)
        return s

    def weights(self, top: int, label: str | None) -> dict[str, Any]:
        from service.models.weights import ranker_weights

        return ranker_weights(self.model, self.spec, top, label)

    def describe(self) -> dict[str, Any]:
        return {"dim": self.spec.dim}
