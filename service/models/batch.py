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

from learners.base import UpdateResult
from learners.features import Batch, FeatureSpec
from learners.registry import class_for
from service.api.errors import ApiError
from service.limits import items_field, require_list
from service.models.base import ModelAdapter
from service.models.linear import encode_features

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.settings import Settings


_STORED = 1 << 62  # the memory limit for loading an artifact already admitted to the store


class BatchAdapter(ModelAdapter):
    online: ClassVar[bool] = False

    def __init__(self, config: dict[str, Any], model: Any, digest: str = "") -> None:
        super().__init__(config, model)
        self.digest = digest
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
        return cls(config, model, hashlib.sha256(blob).hexdigest())

    # ------------------------------------------------------------ write path
    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]:
        raise ApiError(409, "not_online", f"a {self.kind} model is a batch model; it cannot learn")

    def apply(self, payload: bytes) -> UpdateResult:
        raise RuntimeError("batch models have no update log")

    # ------------------------------------------------------------ read path
    def instances(self, body: dict[str, Any], settings: Settings) -> Batch:
        if self.model is None or self.n_features is None:
            raise ApiError(409, "no_artifact", "no artifact is deployed for this model yet")
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

    def answer(self, batch: Batch, body: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    # ------------------------------------------------------------ state
    def snapshot(self) -> Callable[[], bytes]:
        raise RuntimeError("batch models are not checkpointed (their artifacts are stored)")

    def state_digest(self) -> str:
        return self.digest

    def describe(self) -> dict[str, Any]:
        return {"n_features": self.n_features}
