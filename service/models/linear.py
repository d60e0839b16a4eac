"""Adapter for the online linear classifiers (PA, PA-I, PA-II, CW, AROW, SCW-I, SCW-II).

Config (``PUT /models/{name}``)::

    {"algorithm": "arow", "params": {"r": 1.0},
     "features": {"kind": "dense", "dim": 28}}

Update examples are ``{"x": <features>, "y": <label>}``; labels are strings or
integers and come back exactly as sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from learners.base import UpdateResult, check_label
from learners.features import FeatureError, FeatureSpec
from service.api.errors import ApiError, invalid
from service.limits import items_field, require_list, too_large, type_name
from service.models.base import ModelAdapter
from service.models.payload import decode_payload, encode_payload

if TYPE_CHECKING:
    from service.settings import Settings

CONFIG_KEYS = frozenset({"algorithm", "params", "features"})


def feature_spec(body: dict[str, Any], settings: Settings) -> FeatureSpec:
    features = body.get("features")
    if not isinstance(features, dict):
        raise invalid(
            f'features: must be an object like {{"kind": "dense", "dim": 28}}, '
            f"got {type_name(features)}",
            "features",
        )
    try:
        spec = FeatureSpec.from_config(features)
    except ValueError as e:
        raise invalid(f"features: {e}", "features") from None
    extra = set(features) - {"kind", "dim", "bits"}
    if extra:
        raise invalid(f"features: unknown field(s) {sorted(extra)}", "features")
    if spec.dim > settings.max_dim:
        raise invalid(
            f"features: dimension {spec.dim} exceeds the limit of {settings.max_dim}", "features"
        )
    return spec


def encode_features(spec: FeatureSpec, rows: list[Any], where: str, settings: Settings) -> Any:
    try:
        return spec.encode(
            rows, where=where, field="x", max_features=settings.max_features_per_example
        )
    except FeatureError as e:
        if "exceed the limit" in e.problem:
            raise too_large(str(e), e.location) from None
        raise invalid(str(e), e.location) from None


class LinearAdapter(ModelAdapter):
    kind: ClassVar[str] = "linear"

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        super().__init__(config, model)
        self.spec = FeatureSpec.from_config(config["features"])

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        from learners.linear import ALGORITHMS, make_classifier

        extra = set(body) - CONFIG_KEYS
        if extra:
            raise invalid(f"unknown field(s) {sorted(extra)}", sorted(extra)[0])
        algorithm = body.get("algorithm")
        if algorithm not in ALGORITHMS:
            raise invalid(
                f"algorithm: must be one of {list(ALGORITHMS)}, got {algorithm!r}", "algorithm"
            )
        params = body.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise invalid(f"params: must be an object, got {type_name(params)}", "params")
        spec = feature_spec(body, settings)
        try:
            make_classifier(algorithm, dim=spec.dim, params=dict(params))
        except (ValueError, TypeError) as e:
            msg = str(e)
            field = msg.split(":", 1)[0] if msg.startswith("params.") else "params"
            raise invalid(msg if msg.startswith("params") else f"params: {msg}", field) from None
        return {
            "kind": cls.kind,
            "algorithm": algorithm,
            "params": params,
            "features": spec.to_config(),
        }

    @classmethod
    def create(cls, config: dict[str, Any]) -> LinearAdapter:
        from learners.linear import make_classifier

        spec = FeatureSpec.from_config(config["features"])
        model = make_classifier(config["algorithm"], dim=spec.dim, params=dict(config["params"]))
        return cls(config, model)

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> LinearAdapter:
        from learners.linear import LinearClassifier

        return cls(config, LinearClassifier.from_bytes(blob))

    @classmethod
    def warmup(cls) -> None:
        from learners.linear import ALGORITHMS, make_classifier

        spec = FeatureSpec.sparse(4)
        batch = spec.encode([{"0": 1.0}, {"1": 1.0, "3": -1.0}, {"2": 0.5}])
        for algorithm in ALGORITHMS:
            clf = make_classifier(algorithm, dim=4, params={})
            clf.update(batch, ["a", "b", 1])
            clf.predict_details(batch)

    # ------------------------------------------------------------ write path
    def parse_update(self, body: dict[str, Any], settings: Settings) -> tuple[bytes, int]:
        examples = require_list(body, "examples", settings.max_batch_examples)
        xs = items_field(examples, "examples", "x")
        ys = items_field(examples, "examples", "y")
        labels = [check_label_api(y, i) for i, y in enumerate(ys)]
        batch = encode_features(self.spec, xs, "examples", settings)
        return encode_payload(batch, labels), len(labels)

    def apply(self, payload: bytes) -> UpdateResult:
        batch, meta = decode_payload(payload, self.spec.dim)
        return self.model.update(batch, meta["y"])

    # ------------------------------------------------------------ read path
    def predict(self, body: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
        from learners.linear import NotFittedError

        instances = require_list(body, "instances", settings.max_batch_examples)
        xs = items_field(instances, "instances", "x")
        batch = encode_features(self.spec, xs, "instances", settings)
        try:
            preds = self.model.predict_details(batch)
        except NotFittedError:
            raise ApiError(
                409, "not_fitted", "the model has not learned any label yet; send /update first"
            ) from None
        return [
            {"label": p.label, "score": p.score, "scores": p.scores, "confidence": p.confidence}
            for p in preds
        ]

    def describe(self) -> dict[str, Any]:
        labels = getattr(self.model, "labels_", None)
        return {"labels": list(labels) if labels is not None else [], "dim": self.spec.dim}


def check_label_api(y: Any, i: int) -> Any:
    try:
        return check_label(y, f"examples[{i}].y")
    except FeatureError as e:
        raise invalid(str(e), e.location) from None
