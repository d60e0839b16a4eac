"""Batch models: trained offline, deployed as artifacts, scored by ``/predict``.

A batch kind plugs in as one small subclass of :class:`BatchAdapter` that turns
the model's output into JSON (``answer``); loading, versions, atomic swaps and
the common wire format of instances are handled here and in the registry.

Instances are ``{"x": [v0, v1, ...]}`` (exactly ``n_features`` values) or
``{"x": {"index": value, ...}}`` with 0-based feature indices below ``n_features``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, ClassVar

from learners import artifact
from learners.base import UpdateResult
from learners.features import Batch, FeatureSpec
from learners.registry import class_for
from service.errors import Kind, ServiceError
from service.models.base import ModelAdapter
from service.models.json_fields import items_field, require_list
from service.models.online_config import encode_features

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.settings import Settings


_STORED = 1 << 62  # the memory limit for loading an artifact already admitted to the store


class BatchAdapter(ModelAdapter):
    online: ClassVar[bool] = False

    def __init__(
        self,
        config: dict[str, Any],
        model: Any,
        digest: str = "",
        header: dict[str, Any] | None = None,
        size: int = 0,
    ) -> None:
        super().__init__(config, model)
        self.digest = digest
        # The artifact's JSON header (params, meta, created_at...), for describe().
        self.header = header or {}
        self.size = size
        n = getattr(model, "n_features_", None)
        self.n_features = int(n) if n is not None else None

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        return {"kind": cls.kind}

    @classmethod
    def create(cls, config: dict[str, Any]) -> BatchAdapter:
        return cls(config, None)  # created, no artifact deployed yet

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> BatchAdapter:
        # A stored version passed max_model_bytes when it was deployed; a limit lowered
        # since must not make it unloadable at restart or rollback (no limit here).
        return cls.from_artifact(config, blob, max_bytes=_STORED)

    @classmethod
    def from_artifact(
        cls, config: dict[str, Any], blob: bytes, max_bytes: int | None = None
    ) -> BatchAdapter:
        """Load an artifact fully (validated: container, structure, finite scores; the
        memory loading takes is checked against ``max_bytes`` before it is allocated)."""
        model = class_for(cls.kind).from_bytes(blob, max_bytes=max_bytes)
        header = artifact.read_header(blob)  # validated by from_bytes: only parsed again
        return cls(config, model, hashlib.sha256(blob).hexdigest(), header, len(blob))

    # ------------------------------------------------------------ write path
    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]:
        raise ServiceError(
            Kind.CONFLICT, "not_online", f"a {self.kind} model is a batch model; it cannot learn"
        )

    def apply(self, payload: bytes) -> UpdateResult:
        raise RuntimeError("batch models have no update log")

    # ------------------------------------------------------------ read path
    def instances(self, body: dict[str, Any], settings: Settings) -> Batch:
        if self.model is None or self.n_features is None:
            raise ServiceError(
                Kind.CONFLICT, "no_artifact", "no artifact is deployed for this model yet"
            )
        rows = require_list(body, "instances", settings.max_batch_examples)
        xs = items_field(rows, "instances", "x")
        spec = FeatureSpec.dense(self.n_features)
        if not isinstance(xs[0], list):
            spec = FeatureSpec.sparse(self.n_features)
        batch: Batch = encode_features(spec, xs, "instances", settings)
        return batch

    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        return self.answer(self.instances(body, settings), body)

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        return self.answer(batch, {})

    def tensor_width(self) -> int | None:
        if self.model is None or self.n_features is None:
            raise ServiceError(
                Kind.CONFLICT, "no_artifact", "no artifact is deployed for this model yet"
            )
        return self.n_features if self.tensor_task else None

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    # ------------------------------------------------------------ state
    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], bytes]:
        raise RuntimeError("batch models are not checkpointed (their artifacts are stored)")

    def state_digest(self) -> str:
        return self.digest

    def describe(self) -> dict[str, Any]:
        if self.model is None:
            return {"n_features": None}
        h = self.header
        return {
            "n_features": self.n_features,
            "artifact": {
                "checksum": self.digest,
                "size": self.size,
                "created_at": h.get("created_at"),
                "format_version": h.get("format_version"),
            },
            "training": training_summary(self, h.get("params", {}), h.get("meta", {})),
        }

    # ------------------------------------------------------------ training facts
    # Params shown by training_summary are the artifact's, minus per-label lists (a
    # FastXML model can have hundreds of thousands of label names): their count is in
    # "data".
    HIDDEN_PARAMS: ClassVar[frozenset[str]] = frozenset()
    # Facts of the training run kept from the artifact's meta when present.
    TRAINING_FACTS: ClassVar[tuple[str, ...]] = ("train_file", "train_seconds")

    def data_shape(self, params: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        """The shape of the training data known from the model itself (per kind)."""
        return {"d": self.n_features}

    def training_facts(self, meta: dict[str, Any]) -> dict[str, Any]:
        return {k: meta[k] for k in self.TRAINING_FACTS if _scalar(meta.get(k))}


def training_summary(
    adapter: BatchAdapter, params: dict[str, Any], meta: dict[str, Any]
) -> dict[str, Any]:
    """``GET /models/{name}``'s ``training`` of a batch model: the hyperparameters, the
    training data's shape (``n`` rows, ``d`` features, labels/queries/classes) and the
    validation metrics recorded by ``learnserve train`` (absent when the artifact has
    none: trained before they were recorded, or without a validation set)."""
    recorded = meta.get("data")
    data = {k: v for k, v in recorded.items() if _scalar(v)} if isinstance(recorded, dict) else {}
    data.update(adapter.data_shape(params, meta))
    out: dict[str, Any] = {
        "params": {k: v for k, v in params.items() if k not in adapter.HIDDEN_PARAMS},
        "data": data,
    }
    out.update(adapter.training_facts(meta))
    validation = meta.get("validation")
    if isinstance(validation, dict):
        out["validation"] = validation
    return out


def _scalar(v: Any) -> bool:
    return isinstance(v, str | int | float | bool)
