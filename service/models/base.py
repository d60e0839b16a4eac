"""The adapter interface: how one kind of model plugs into the service.

An adapter wraps one learner instance and knows the wire format of its kind:

- ``normalize_config(body, settings)`` (class method): validate a
  ``PUT /models/{name}`` body and return the canonical config that the store
  keeps (JSON, with ``"kind"`` set to the adapter's kind). Equal bodies must give
  equal configs (that is what makes PUT idempotent).
- ``create(config)`` / ``from_checkpoint(config, blob)``: a fresh model, or one
  restored from learner bytes (``to_bytes()``).
- ``parse_update(body, settings, raw) -> (payload, n_examples)``: validate an
  ``/update`` body completely and encode it as a compact log entry (see
  :mod:`service.models.payload`). Must not read or change mutable model state,
  so it runs outside the model lock. Raise :class:`~service.errors.ServiceError` (422/413) naming
  the field.
- ``parse_update_raw(raw, settings) -> FastUpdate | None`` (optional): the same,
  from the bytes alone, for bodies it can prove well-formed (e.g. dense rows
  scanned straight into a matrix); ``None`` sends the body to ``parse_update``.
- ``check_update(payload)`` (optional): a dry run of the entry on the current
  state, before it is appended: raise :class:`~service.errors.ServiceError` (invalid,
  naming the example) when learning it would make the weights non-finite, so a refused batch never
  reaches the log. Must not change the state.
- ``apply(payload) -> UpdateResult``: apply one log entry. Deterministic; on
  error raises and leaves the state unchanged (the entry is then skipped by every
  replica alike).
- ``predict(body, settings, raw) -> list[dict]``: answer a ``/predict`` body's
  ``instances``. (``raw`` is the request's bytes, for fast paths that can prove
  something from them, e.g. "no JSON booleans anywhere".)
- ``predict_batch(batch) -> list[dict]``: score an encoded batch, as ``predict``
  answers ``instances`` (``predict`` encodes, then calls it). With
  ``tensor_width()`` (the values of a dense row, ``None`` when the kind's input is
  no fixed-width row), ``classes()`` and ``has_confidence()``, it serves the Open
  Inference Protocol (:mod:`service.api.v2`), whose answers are then ``/predict``'s.
- ``snapshot() -> Callable[[], bytes | memoryview]``: a consistent copy taken
  quickly (called under the model lock), whose call serialises it (run in a
  thread, off-lock).
- ``state_digest()``, ``describe()`` (extra fields for ``GET /models/{name}``).
- ``weights(top, label)`` (online kinds): ``GET /models/{name}/weights``
  (:mod:`service.models.weights`).

To add a kind: write ``service/models/<kind>.py`` with a subclass, then add it
to ``ADAPTERS`` (and its algorithm names to ``ALGORITHMS``) in
``service/models/__init__.py``.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from learners.base import UpdateResult

if TYPE_CHECKING:
    from learners.features import Batch
    from service.settings import Settings


@dataclass(frozen=True)
class FastUpdate:
    """What ``parse_update_raw`` read: the body's model name, the log entry, its size."""

    model: str
    payload: bytes
    n: int


class ModelAdapter(ABC):
    kind: ClassVar[str]
    online: ClassVar[bool] = True  # False: a batch model (deployed artifacts, no /update)

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        self.config = config
        self.model = model

    # ------------------------------------------------------------ lifecycle
    @classmethod
    @abstractmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def create(cls, config: dict[str, Any]) -> ModelAdapter: ...

    @classmethod
    @abstractmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> ModelAdapter: ...

    # ------------------------------------------------------------ write path
    @abstractmethod
    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]: ...

    def ignored_fields(self, examples: list[Any]) -> dict[str, int]:
        """The fields of the examples' ``x`` this model does not read and ignores, each
        with how many examples hold it (a raw-records model with ``unknown_fields``
        ``"ignore"``); empty for every other kind (which refuses what it cannot read)."""
        return {}

    def parse_update_raw(self, raw: bytes, settings: Settings) -> FastUpdate | None:
        """``parse_update`` straight from the body's bytes, for the bodies a kind can
        prove well-formed without building Python objects; ``None`` for any other
        body (the caller then takes ``parse_update``, which names what is wrong)."""
        return None

    def check_update(self, payload: bytes) -> None:
        """Refuse (422, naming the example) an entry whose learning would make the
        weights non-finite on the current state; the state is not changed. Another
        worker may append before this one does, so ``apply`` still refuses such an
        entry whole (every replica skips it alike)."""
        return None  # kinds whose weights cannot overflow need no dry run

    def forget_checked(self, payload: bytes) -> None:
        """Drop what ``check_update`` kept of ``payload`` for ``apply`` (the caller
        is done with it: applied, or never to be applied by this very object)."""
        return None

    @abstractmethod
    def apply(self, payload: bytes) -> UpdateResult: ...

    # ------------------------------------------------------------ read path
    @abstractmethod
    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]: ...

    def predict_raw(self, raw: bytes, settings: Settings) -> tuple[str | None, list[Any]] | None:
        """``predict`` straight from the body's bytes (the body's model, None when it has
        none, and the answers), for the bodies a kind can prove well-formed without
        building Python objects; ``None`` for any other body (the caller then parses it
        and takes ``predict``)."""
        return None

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        """The predictions of an encoded batch (what ``predict`` answers for ``instances``)."""
        raise NotImplementedError(f"{self.kind} models do not score encoded batches")

    # ------------------------------------------------------------ tensors (/v2)
    # What the Open Inference Protocol routes (service.api.v2) serve: "classify" (label,
    # score, scores per class) or "rank" (a score per row); None: not served there.
    tensor_task: ClassVar[str | None] = None

    def tensor_width(self) -> int | None:
        """Values per row when the input is a fixed-width dense row, else ``None``
        (sparse or hashed features: a map per row, no tensor). May raise
        :class:`~service.errors.ServiceError` when the model cannot score yet (no
        artifact deployed)."""
        return None

    def classes(self) -> list[Any]:
        """A classifier's labels, in the order of each prediction's ``scores``."""
        return []

    def has_confidence(self) -> bool:
        """Whether predictions carry a ``confidence`` (CW, AROW, SCW)."""
        return False

    @classmethod
    def warmup(cls) -> None:
        """Compile/load this kind's kernels (runs in a thread before the service is
        ready, so the first request does not stall the event loop on a JIT compile)."""
        return None  # optional hook: nothing to warm up by default

    # ------------------------------------------------------------ state
    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], bytes | memoryview]:
        # Copying the arrays is a memcpy; serialising + hashing is the slow part
        # and runs on the copy in a worker thread while updates go on. A learner
        # with its own snapshot() copies only its weights (a deepcopy of a 2**20-dim
        # model also copies scratch buffers and takes tens of ms on the event loop);
        # the linear ones serialise into a buffer without holding the GIL and return
        # a memoryview of it (the stores write it without a copy).
        # ``meta``: extra JSON for the artifact's meta (an export says where it came from).
        own = getattr(self.model, "snapshot", None)
        if callable(own):
            fn: Callable[[], bytes | memoryview] = own(meta) if meta else own()
            return fn
        clone = copy.deepcopy(self.model)
        return clone.to_bytes

    def weights(self, top: int, label: str | None) -> dict[str, Any]:
        """``GET /models/{name}/weights``: the ``top`` largest positive and negative
        weights per label (all labels, or the one whose JSON key is ``label``)."""
        raise NotImplementedError(f"{self.kind} models have no weights to show")

    def state_digest(self) -> str:
        return str(self.model.state_digest())

    def describe(self) -> dict[str, Any]:
        return {}


def state_nbytes(obj: object, depth: int = 4) -> int:
    """Bytes of the numpy arrays a model holds (its learned state), ``depth`` levels of
    attributes, lists and dicts deep, each array once: the model's memory gauge and
    what a guest costs the fleet's LRU."""
    seen: set[int] = set()

    def walk(o: object, d: int) -> int:
        if id(o) in seen or d < 0:
            return 0
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            return int(o.nbytes)
        if isinstance(o, dict):
            return sum(walk(v, d - 1) for v in o.values())
        if isinstance(o, list | tuple):
            return sum(walk(v, d - 1) for v in o)
        fields = getattr(o, "__dict__", None)
        return sum(walk(v, d - 1) for v in fields.values()) if fields else 0

    return walk(obj, depth)
