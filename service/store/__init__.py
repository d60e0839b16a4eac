"""Stores: where models' configs, update logs, checkpoints and artifacts live.

``open_store`` picks the implementation: Redis when a URL is configured (production,
shared by all workers), else the embedded SQLite file under the data directory.
Every implementation passes the same contract tests (``tests/service/test_store_contract.py``).

May import: the leaves (``service.errors``, ``service.settings``,
``service.observability``). Knows nothing of models, the engine or HTTP.

Example::

    store = open_store(None, Path("./data"))   # SQLiteStore(./data/learnserve.sqlite3)
    await store.open()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.store.base import (
    ArtifactActive,
    ArtifactVersion,
    Checkpoint,
    ConfigConflict,
    Feedback,
    FeedbackConflict,
    LogDiverged,
    LogEntry,
    ModelNotFound,
    Store,
    StoreUnavailable,
    ValueTooLarge,
    canonical_config,
    chain_head,
    validate_name,
)

SQLITE_FILENAME = "learnserve.sqlite3"

__all__ = [
    "SQLITE_FILENAME",
    "ArtifactActive",
    "ArtifactVersion",
    "Checkpoint",
    "ConfigConflict",
    "Feedback",
    "FeedbackConflict",
    "LogDiverged",
    "LogEntry",
    "ModelNotFound",
    "Store",
    "StoreUnavailable",
    "ValueTooLarge",
    "canonical_config",
    "chain_head",
    "open_store",
    "validate_name",
]


def open_store(redis_url: str | None, data_dir: str | Path, **opts: Any) -> Store:
    """A not-yet-opened store (``await store.open()`` next).

    ``opts`` go to the constructor: for Redis ``socket_timeout``, ``connect_timeout``,
    ``max_connections``, ``health_check_interval``, ``waitaof``, ``wait_replicas``,
    ``wait_timeout``, and ``cluster`` (a Redis Cluster: ``RedisClusterStore``);
    for SQLite ``busy_timeout``, ``poll_interval``, ``checkpoint_chunk_bytes``. Options
    meant for the other store are ignored, so callers can pass one settings-derived dict
    either way.
    """
    if redis_url:
        from service.store.redis import RedisStore
        from service.store.redis_cluster import RedisClusterStore

        keys = ("socket_timeout", "connect_timeout", "max_connections",
                "health_check_interval", "waitaof", "wait_replicas", "wait_timeout")  # fmt: skip
        cls = RedisClusterStore if opts.get("cluster") else RedisStore
        return cls(redis_url, **{k: v for k, v in opts.items() if k in keys})
    from service.store.sqlite import SQLiteStore

    d = Path(data_dir)
    d.mkdir(parents=True, exist_ok=True)
    skeys = ("busy_timeout", "poll_interval", "checkpoint_chunk_bytes")
    return SQLiteStore(d / SQLITE_FILENAME, **{k: v for k, v in opts.items() if k in skeys})
