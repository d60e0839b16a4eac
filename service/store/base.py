"""The store interface: configs, an append-only update log, checkpoints, artifacts.

Two implementations pass one contract suite (``tests/service/test_store_contract.py``):
``RedisStore`` (production) and ``SQLiteStore`` (the embedded default).

Log positions are integers starting at 1, contiguous per model; the position of
the last applied entry is the model's version. ``append`` returns only after the
entry is durable (as durable as the store is configured to be).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


class StoreUnavailable(RuntimeError):
    """The store cannot be reached; the caller answers 503 and retries later."""


class ConfigConflict(RuntimeError):
    """A model of that name already exists with a different configuration."""


@dataclass(frozen=True)
class LogEntry:
    position: int
    payload: bytes


@dataclass(frozen=True)
class Checkpoint:
    position: int  # the last log position the state includes
    blob: bytes  # learner artifact bytes
    created_at: float


@dataclass(frozen=True)
class ArtifactVersion:
    version: int
    size: int
    checksum: str
    created_at: float
    kind: str


class Store(ABC):
    name: str = "store"

    # -------------------------------------------------------------- lifecycle
    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def ping(self) -> bool:
        """True when the store answers now."""

    # -------------------------------------------------------------- configs
    @abstractmethod
    async def create_model(self, name: str, config: dict[str, Any]) -> bool:
        """Create atomically. True if created, False if an equal config exists;
        raises ConfigConflict if a different one exists."""

    @abstractmethod
    async def get_config(self, name: str) -> dict[str, Any] | None: ...

    @abstractmethod
    async def list_models(self) -> dict[str, dict[str, Any]]:
        """Every model's config, by name."""

    @abstractmethod
    async def delete_model(self, name: str) -> bool:
        """Remove the model and everything stored for it. False if it did not exist."""

    @abstractmethod
    async def catalog_epoch(self) -> int:
        """A counter bumped by every create/delete of a model and every artifact
        add/activate, so other workers notice catalog changes cheaply."""

    # -------------------------------------------------------------- update log
    @abstractmethod
    async def append(self, name: str, payload: bytes) -> int:
        """Append one entry; returns its position (1, 2, ...) once durable."""

    @abstractmethod
    async def read_log(self, name: str, after: int, limit: int = 1000) -> list[LogEntry]:
        """Entries with position > ``after``, in order (at most ``limit``)."""

    @abstractmethod
    async def last_position(self, name: str) -> int:
        """Position of the newest entry ever appended (0 if none); survives trimming."""

    @abstractmethod
    async def trim_log(self, name: str, upto: int) -> None:
        """Drop entries with position <= ``upto`` (they are covered by a checkpoint)."""

    async def wait_for_entries(self, after: dict[str, int], timeout: float) -> None:
        """Return when any model in ``after`` may have entries past its position, or
        after ``timeout`` seconds. The default polls; RedisStore blocks on XREAD."""
        import asyncio

        await asyncio.sleep(min(timeout, 0.05))

    # -------------------------------------------------------------- checkpoints
    @abstractmethod
    async def put_checkpoint(self, name: str, position: int, blob: bytes) -> None:
        """Write state + position atomically; an older position never replaces a newer one."""

    @abstractmethod
    async def get_checkpoint(self, name: str) -> Checkpoint | None: ...

    # -------------------------------------------------------------- batch-model artifacts
    @abstractmethod
    async def add_artifact(self, name: str, blob: bytes, kind: str, checksum: str) -> int:
        """Store a new artifact version (1, 2, ...) and make it active; returns the version."""

    @abstractmethod
    async def list_artifacts(self, name: str) -> list[ArtifactVersion]: ...

    @abstractmethod
    async def get_artifact(self, name: str, version: int) -> bytes | None: ...

    @abstractmethod
    async def get_active_version(self, name: str) -> int | None: ...

    @abstractmethod
    async def set_active_version(self, name: str, version: int) -> None: ...
