"""Adapter for the online linear regressors (PA, PA-I, PA-II with the ε-insensitive loss;
AROW regression with a predictive variance): models that learn a number.

Config (``PUT /models/{name}``)::

    {"algorithm": "arow_regression", "params": {"r": 1.0},
     "features": {"kind": "dense", "dim": 8}}

The algorithms are ``pa_regression``, ``pa1_regression``, ``pa2_regression`` and
``arow_regression`` (``learners.regression``: the same name without the suffix). An
intercept is on by default (``features.intercept``; raw records always have one). The
target's scale is learned with the model (an online standardisation of ``y`` in log
order, in the learner's state), so ``y`` may be a price in dollars or a rate near 0.

Update examples are ``{"x": <features>, "y": <finite number>}`` plus an optional
importance ``"weight"``; any other ``y`` is a 422 naming ``examples[i].y``.
Predictions are ``{"value": ŷ}`` and, for AROW, ``"variance"`` (the predictive
variance in the target's squared units) and ``"interval"``: the central 90 % interval
``[ŷ − 1.645σ, ŷ + 1.645σ]``.

The write path (dense matrices, sparse, hashed, raw records, feature names, the dry
run, the checked entries kept for ``apply``) is the linear classifiers' own
(:class:`service.models.linear.LinearAdapter`); this module changes what is
label-specific: targets, predictions, the progressive figures, delayed labels.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from learners.base import UpdateResult
from learners.features import Batch, FeatureSpec
from service.errors import invalid
from service.models import feature_names as names
from service.models import record_entries
from service.models.base import ModelAdapter
from service.models.feedback_rows import Record
from service.models.linear import LinearAdapter
from service.models.online_config import online_model_config
from service.models.payload import encode_payload
from service.models.regression_metrics import Z90

if TYPE_CHECKING:
    from service.settings import Settings

SUFFIX = "_regression"
ALGORITHMS: tuple[str, ...] = tuple(
    f"{a}{SUFFIX}" for a in ("pa", "pa1", "pa2", "arow", "sgd")
)  # the learners' names, suffixed: "arow" is the classifier


def learner_algorithm(algorithm: str) -> str:
    return algorithm.removesuffix(SUFFIX)


def check_target(y: Any, i: int) -> float:
    """A target as the model learns it: a finite JSON number (not a bool), as a float."""
    loc = f"examples[{i}].y"
    if type(y) is float:
        if math.isfinite(y):
            return y + 0.0  # -0.0 as 0.0: one entry whichever parser read the body
        raise invalid(f"{loc}: must be a finite number, got {y!r}", loc)
    if type(y) is int:
        try:
            return float(y)
        except OverflowError:  # an integer beyond the doubles' range
            raise invalid(f"{loc}: must be a finite number, got an integer of "
                          f"{len(str(abs(y)))} digits", loc) from None  # fmt: skip
    kind = "a bool" if isinstance(y, bool) else type(y).__name__
    raise invalid(f"{loc}: must be a finite number (a regression target), got {kind}", loc)


class RegressionAdapter(LinearAdapter):
    kind: ClassVar[str] = "regression"

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        # the classifier's setup, less its probability map (a regressor serves values)
        ModelAdapter.__init__(self, config, model)
        self.spec = FeatureSpec.from_config(config["features"])
        names.attach(model, self.spec)
        self._checked = {}
        self.calibration = None  # type: ignore[assignment]

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        from learners.regression import make_regressor

        features = body.get("features")
        if isinstance(features, dict) and features.get("kind") != "records":
            # an intercept unless the body says otherwise: a regressor without one is
            # pinned to 0 at x = 0, which no target's scale standardisation undoes
            body = {**body, "features": {"intercept": True, **features}}
        return online_model_config(
            cls.kind,
            body,
            settings,
            ALGORITHMS,
            lambda algorithm, spec, params: make_regressor(
                learner_algorithm(algorithm), spec.dim, params
            ),
        )

    @classmethod
    def create(cls, config: dict[str, Any]) -> RegressionAdapter:
        from learners.regression import make_regressor

        spec = FeatureSpec.from_config(config["features"])
        algorithm = learner_algorithm(config["algorithm"])
        return cls(config, make_regressor(algorithm, spec.dim, dict(config["params"])))

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> RegressionAdapter:
        from learners.artifact import read_header
        from learners.regression import LinearRegressor

        adapter = cls(config, LinearRegressor.from_bytes(blob))
        if adapter.spec.stateful:
            meta = read_header(blob).get("meta") or {}
            record_entries.restore_statistics(adapter.spec, meta)
        return adapter

    def load_calibration(self, meta: dict[str, Any]) -> None:
        return None  # a regressor serves its value, no probability map

    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], bytes | memoryview]:
        own = dict(meta or {})
        if self.spec.stateful:
            own.update(record_entries.snapshot_meta(self.spec.encoder))
        dump: Callable[[], bytes | memoryview] = self.model.snapshot(own, self.snapshot_arrays())
        return dump

    def snapshot_arrays(self) -> dict[str, np.ndarray] | None:
        """More arrays for the checkpoint, taken now (a decision model's candidates)."""
        return None

    @classmethod
    def warmup(cls) -> None:
        from learners.regression import warmup
        from service.models.regression_metrics import RegressionWindow

        warmup()  # every learner's kernels: update, dry run, scoring
        batch = FeatureSpec.sparse(4).encode([{"0": 1.0}, {"1": 1.0, "3": -1.0}, {"2": 0.5}])
        window = RegressionWindow(4)
        adapter = cls.create({"kind": "regression", "algorithm": "arow_regression",
                              "params": {}, "features": {"kind": "sparse", "dim": 4}})  # fmt: skip
        adapter.check_update(encode_payload(batch, [1.0, 2.0, 0.5]))
        window.add_result(adapter.apply(encode_payload(batch, [1.0, 2.0, 0.5])))
        adapter.predict_batch(batch)
        window.summary()

    # ------------------------------------------------------------ write path
    def target_check(self) -> Callable[[Any, int], Any] | None:
        return check_target

    def _takes_scanned(self, labels: list[Any]) -> bool:
        return True  # every number is a target; a string is refused by _check_labels

    def _check_labels(self, labels: list[Any], settings: Settings) -> None:
        # the scanners read numbers (integers as int) and strings: as the general path,
        # every target a float, and -0.0 as 0.0 (the scanner reads "-0.0" as the int 0)
        for i, y in enumerate(labels):
            labels[i] = y + 0.0 if type(y) is float else check_target(y, i)

    # the linear write path's hooks (service.models.linear)
    def _first_nonfinite_row(
        self, batch: Batch, y: list[Any], weights: list[float] | None, checked: Any
    ) -> int | None:
        row: int | None = self.model.first_nonfinite_row(batch, y, weights, checked)
        return row

    def _overflow_refusal(
        self, batch: Batch, y: list[Any], weights: list[float] | None, row: int
    ) -> tuple[str, str]:
        """The target when it alone is the cause: the same entry with that target at the
        model's running mean goes past the row (a dry run, on the refusal path only)."""
        ys = list(y)
        ys[row] = float(self.model.y_mean_)
        again = self.model.first_nonfinite_row(batch, ys, weights)
        if again is not None and again <= row:
            return super()._overflow_refusal(batch, y, weights, row)
        return f"examples[{row}].y", (
            f"the target {y[row]!r} would make the model's statistics non-finite; the "
            "update was refused and the model is unchanged"
        )

    def _refuse_clash(self, y: list[Any]) -> None:
        return None  # numbers: no labels whose JSON keys could clash

    def _update_entry(
        self, batch: Batch, meta: dict[str, Any], weights: list[float] | None, checked: Any
    ) -> UpdateResult:
        # rows of delayed targets ("fb") are learned as any: _learned scores them by
        # the value that was served
        result: UpdateResult = self.model.update(batch, meta["y"], weights, checked)
        return result

    def _learned(self, result: UpdateResult, meta: dict[str, Any]) -> UpdateResult:
        return _with_targets(result, meta["y"], meta.get("fb"), self.model.y_std_)

    # ------------------------------------------------------------ read path
    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        from service.models.json_fields import require_list

        instances = require_list(body, "instances", settings.max_batch_examples)
        return self._predict(instances, settings, raw)[0]

    def predict_raw(self, raw: bytes, settings: Settings) -> tuple[str | None, list[Any]] | None:
        return None  # the parsed path (no classifier's dense kernel)

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        # a v2 tensor's rows (dense) come without the intercept; a hashed spec's width is
        # its dim, so its batches (which have the intercept) must not get a second one
        if self.spec.kind == "dense" and self.spec.intercept and batch.dim == self.spec.width:
            batch = self.spec.add_intercept(batch)
        return self._answers(self.model, batch)

    @staticmethod
    def _answers(model: Any, batch: Batch) -> list[dict[str, Any]]:
        values, variances = model.predict_details(batch)
        if variances is None:
            return [{"value": float(v)} for v in values.tolist()]
        half = Z90 * np.sqrt(variances)
        return [
            {"value": v, "variance": s, "interval": [v - h, v + h]}
            for v, s, h in zip(values.tolist(), variances.tolist(), half.tolist(), strict=True)
        ]

    # ------------------------------------------------------------ delayed labels
    def predict_tracked(
        self, instances: list[Any], ids: list[str | None], settings: Settings, raw: bytes
    ) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
        """``predict``, and for each instance with an id a record of its features with
        the value served (as the record's label), learned when its target arrives."""
        predictions, batch = self._predict(instances, settings, raw)
        records = [
            (i, encode_payload(batch.take([k]), [predictions[k]["value"]], s=[[], []]))
            for k, i in enumerate(ids)
            if i is not None
        ]
        return predictions, records

    @staticmethod
    def served_outcome(rec: Record, y: Any) -> tuple[int, float]:
        """(0, the value served): the entry's ``fb`` row carries what was served, which
        the progressive figures take in place of the model's own prediction."""
        return 0, float(rec.label)

    # ------------------------------------------------------------ reading the model
    def zero_features(self) -> Any:
        return [0.0] * self.spec.width if self.spec.kind == "dense" else {}

    def weights(self, top: int, label: str | None) -> dict[str, Any]:
        """The weights in the target's units (``coef_``: what a unit of each feature adds
        to the value), with their variances in the target's squared units (AROW)."""
        from service.models.weights import report

        if label is not None:
            raise invalid("label: a regressor has no labels (one weight vector)", "label")
        m = self.model
        _, sigma = m.weights_view()
        var = None if sigma is None else sigma * (m.y_std_**2)
        return {"classes": report([(None, m.coef_, var)], self.spec, m.feature_names_, top)}

    tensor_task: ClassVar[str | None] = "regress"

    def classes(self) -> list[Any]:
        return []

    def has_confidence(self) -> bool:
        return getattr(self.model, "covariance", "none") != "none"

    def describe(self) -> dict[str, Any]:
        m = self.model
        return {
            "dim": self.spec.dim,
            "target": {"mean": m.y_mean_, "std": m.y_std_},
            "interval_level": 0.9 if self.has_confidence() else None,
        }


def _with_targets(
    result: UpdateResult, y: list[Any], fb: list[list[Any]] | None, scale: float
) -> UpdateResult:
    """``result`` with the entry's targets, and, for rows learned from a prediction
    served with an id (``fb``: ``[row, 0, value served]``), the value that was served
    in place of the model's own pre-update prediction (true online evaluation).

    ``errors`` (what the drift detector reads) become |y − ŷ| in units of the targets'
    standard deviation ``scale`` (the model's, after the entry): the detectors' bounds
    then mean the same for a price in dollars and a rate near 0."""
    targets = np.asarray(y, dtype=np.float64)
    predicted = result.predicted
    variance = result.variance
    if fb and predicted is not None:
        predicted = np.array(predicted, dtype=np.float64)
        for row, _, value in fb:
            predicted[int(row)] = float(value)
        variance = None  # a served value keeps no variance: no interval figures
    errors = None if predicted is None else np.abs(targets - predicted)
    loss_sum = result.loss_sum if errors is None else float(errors.sum())
    if errors is not None and scale > 0.0:
        errors = errors / scale
    return dataclasses.replace(
        result, targets=targets, predicted=predicted, variance=variance, errors=errors,
        loss_sum=loss_sum,
    )  # fmt: skip


def merge_results(results: list[UpdateResult]) -> UpdateResult:
    """The results of entries learned one after the other, as one."""
    first = results[0]
    if len(results) == 1:
        return first

    def cat(name: str) -> Any:
        parts = [getattr(r, name) for r in results]
        return None if any(v is None for v in parts) else np.concatenate(parts)

    return dataclasses.replace(
        first, applied=sum(r.applied for r in results), correct=sum(r.correct for r in results),
        loss_sum=sum(r.loss_sum for r in results), updates=sum(r.updates for r in results),
        predicted=cat("predicted"), variance=cat("variance"), errors=cat("errors"),
    )  # fmt: skip
