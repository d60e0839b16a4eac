"""The read path of :class:`service.models.linear.LinearAdapter`: ``/predict`` of the
online linear classifiers, from a parsed body, straight from the body's bytes (dense
rows: :mod:`service.models.fast_json_dense_instances` and one kernel call,
:mod:`learners.linear.serving`; records: the compiled records scanner), from an
encoded batch (v2 tensors, batch scans), and with the records delayed labels keep.

A mixin over the adapter's ``spec``, ``model`` and ``calibration``: the write path and
the lifecycle stay in :mod:`service.models.linear`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from learners.features import Batch, FeatureSpec
from learners.intercept import with_ones_column
from learners.linear import NotFittedError
from learners.linear.serving import dense_answers
from service.errors import Kind, ServiceError
from service.models import probability
from service.models.fast_json_dense_instances import scan_dense_instances
from service.models.feedback_rows import encode_record
from service.models.json_fields import items_field, require_list
from service.models.kernel_families import usable
from service.models.linear_inputs import dense_matrix, encode_fast, records_instances_raw

if TYPE_CHECKING:
    from learners.linear.probability_map import ProbabilityMap
    from service.settings import Settings


class LinearReadPath:
    """Scoring for :class:`~service.models.linear.LinearAdapter`."""

    spec: FeatureSpec
    model: Any
    calibration: ProbabilityMap

    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        instances = require_list(body, "instances", settings.max_batch_examples)
        if self.spec.kind == "dense":  # dense rows of a CW-family model: one kernel call
            X = dense_matrix(self.spec, items_field(instances, "instances", "x"), raw)
            pmap = self.calibration
            answers = None if X is None else dense_answers(self.model, X, pmap.a, pmap.b)
            if answers is not None:
                return answers
        return self._predict(instances, settings, raw)[0]

    def predict_raw(self, raw: bytes, settings: Settings) -> tuple[str | None, list[Any]] | None:
        if self.spec.kind != "dense" or not usable("json"):
            return None
        scanned = scan_dense_instances(raw, self.spec.width, settings.max_batch_examples)
        if scanned is None:
            return None
        model, X = scanned
        X = with_ones_column(X) if self.spec.intercept else X
        pmap = self.calibration
        answers = dense_answers(self.model, X, pmap.a, pmap.b)
        return None if answers is None else (model, answers)

    def _predict(
        self, instances: list[Any], settings: Settings, raw: bytes
    ) -> tuple[list[dict[str, Any]], Any]:
        batch = records_instances_raw(raw, self.spec, settings, len(instances))
        if batch is None:
            xs = items_field(instances, "instances", "x")
            batch = encode_fast(self.spec, xs, "instances", settings, raw)
        return self.predict_batch(batch), batch

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        # a v2 tensor's rows (dense) come without the intercept; a hashed spec's width is
        # its dim, so its batches (which have the intercept) must not get a second one
        if self.spec.kind == "dense" and self.spec.intercept and batch.dim == self.spec.width:
            batch = self.spec.add_intercept(batch)
        try:
            answers = self._answers(self.model, batch)
        except NotFittedError:
            raise ServiceError(
                Kind.CONFLICT,
                "not_fitted",
                "the model has not learned any label yet; send /update first",
            ) from None
        probability.add_probabilities(self.model, self.calibration, batch, answers)
        return answers

    @staticmethod
    def _answers(model: Any, batch: Batch) -> list[dict[str, Any]]:
        return [
            {"label": p.label, "score": p.score, "scores": p.scores, "confidence": p.confidence}
            for p in model.predict_details(batch)
        ]

    # ------------------------------------------------------------ delayed labels
    def predict_tracked(
        self, instances: list[Any], ids: list[str | None], settings: Settings, raw: bytes
    ) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
        """``predict`` of ``instances`` (their ``id`` fields taken out, in ``ids``), and a
        record (``feedback_rows.encode_record``) for each instance that had an id."""
        predictions, batch = self._predict(instances, settings, raw)
        records = [
            (i, encode_record(batch, k, predictions[k])) for k, i in enumerate(ids) if i is not None
        ]
        return predictions, records
