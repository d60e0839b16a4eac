"""The values a store takes and gives (log entries, feedback, checkpoints), the checks
every implementation makes of its arguments, and the digests of the log's chain
(re-exported by :mod:`service.store.base`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any


def validate_name(name: str) -> str:
    """Return ``name`` if a store can hold it, else raise ValueError saying why.

    Curly braces are refused because RedisStore puts the name in a ``{hash tag}``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("model name must be a non-empty string")
    if len(name) > 200:
        raise ValueError(f"model name is {len(name)} characters long; the limit is 200")
    if any(c in "{}" or ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"model name {name!r} must not contain braces or control characters")
    if name in (".", ".."):  # HTTP clients normalise /models/.. away: unreachable by URL
        raise ValueError(f"model name {name!r} is reserved (a path segment)")
    return name


def canonical_config(config: dict[str, Any]) -> str:
    """The JSON text that configs are stored and compared as (sorted keys, compact)."""
    import json

    if not isinstance(config, dict):
        raise ValueError("config must be a JSON object")
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)


def payload_digest(payload: bytes | memoryview) -> str:
    """SHA-1 (hex) of one log entry's payload: what the chain of heads is built from."""
    return hashlib.sha1(payload).hexdigest()


def chain_head(prev_head: str, payload: bytes | memoryview, digest: str | None = None) -> str:
    """The log's head after appending ``payload`` to a log whose head was ``prev_head``:
    ``sha1hex(prev_head ‖ sha1hex(payload))`` ("" before the first entry).

    Every store computes it inside the append's atomic step (Redis in its Lua script,
    which has ``redis.sha1hex``; SQLite in the append transaction) and keeps it beside
    the entry and the model's ``seq``. A worker recomputes it from the entries it
    applies: a position that comes back holding another entry (the log lost its tail
    in a failover and was appended to again) gives another head, so the worker
    reloads instead of answering a version it did not apply. Integrity against
    accidents, not an adversary: SHA-1 is what Redis's Lua offers.

    ``digest``: ``payload_digest(payload)`` when the caller has it already (the
    appending worker hashes its entry once, for the store and for its own check)."""
    if digest is None:
        digest = payload_digest(payload)
    return hashlib.sha1((prev_head + digest).encode()).hexdigest()


@dataclass(frozen=True)
class LogEntry:
    position: int
    payload: bytes
    # The log's chain head after this entry ("" for an entry written before chains
    # existed: nothing to check it against).
    head: str = ""
    # payload_digest(payload) as its appender computed it, when the store kept it (Redis):
    # a worker applying the entry checks the chain without hashing the payload again.
    digest: str | None = None


@dataclass(frozen=True)
class Feedback:
    """What the store holds for one (model, id) given to a prediction (delayed labels):
    the service's ``record`` (the features as learned, the prediction served) until the
    id is labelled; then the label's ``mark`` (opaque text) and the ``position`` of the
    log entry that learned it, and no record."""

    record: bytes | None
    mark: str | None = None
    position: int = 0


def record_digest(record: bytes) -> str:
    """SHA-1 (hex) of a feedback record: ``append_labelled`` checks that the record it
    marks is the one the caller read (Redis's Lua has ``redis.sha1hex``)."""
    return hashlib.sha1(record).hexdigest()


def check_feedback_records(records: list[tuple[str, bytes]]) -> None:
    """``put_feedback``'s ``records``: distinct non-empty ids, non-empty byte records."""
    if len({i for i, _ in records}) != len(records):
        raise ValueError("ids must be distinct")
    for i, rec in records:
        if not isinstance(i, str) or not i:
            raise ValueError("an id must be a non-empty string")
        if not isinstance(rec, bytes | bytearray) or not rec:
            raise ValueError("a record must be non-empty bytes")


def check_payload(payload: object) -> None:
    """An entry's payload for the log: bytes, bytearray or memoryview."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise TypeError(f"payload must be bytes, got {type(payload).__name__}")


def check_ttl(ttl_seconds: float) -> None:
    """How long a store keeps an idempotency key or a feedback record: > 0 seconds."""
    if ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be > 0")


def check_feedback_labels(labels: list[tuple[str, str, str]]) -> None:
    """``append_labelled``'s ``labels``: distinct non-empty ids, non-empty marks."""
    if len({i for i, _, _ in labels}) != len(labels):
        raise ValueError("ids must be distinct")
    if any(not i or not m for i, _, m in labels):
        raise ValueError("ids and marks must be non-empty")


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


@dataclass(frozen=True)
class KeyGuard:
    """An idempotency key guarding ``append_labelled`` as ``append_once``'s key guards
    an append: recorded in the same atomic step, ``(position, payload_hash, n)``."""

    key: str
    payload_hash: str
    n: int
    ttl_seconds: float

    def __post_init__(self) -> None:
        check_ttl(self.ttl_seconds)
        if not self.key or not self.payload_hash or " " in self.payload_hash:
            raise ValueError("the key and payload_hash must be non-empty, the hash without spaces")
