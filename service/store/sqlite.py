"""SQLiteStore: the embedded default store, one file under the data directory.

stdlib ``sqlite3`` on one connection per store, driven by a dedicated single-thread
executor, so calls are serialised and never block the event loop. The file is in WAL
mode with ``synchronous=FULL`` (a commit is fsynced before ``append`` returns) and a
busy timeout, so several processes (``uvicorn --workers N``) can share one file: each
write is one ``BEGIN IMMEDIATE`` transaction and waits its turn for the write lock.

Concurrent appends from one process are group-committed: whatever is queued when the
writer thread gets to it goes into one transaction and one fsync, which keeps
``/update`` throughput up without weakening durability.

Checkpoints are written as chunks (``checkpoint_chunk_bytes``, 16 MB: one value may not
exceed 1e9 bytes, a model's state may) in a transaction each, under a token of the
write, then switched to in one transaction that also drops the replaced chunks; a
checkpoint written whole by schema 1 is still read.

The class is put together from one module per responsibility, each a base class
over ``SQLiteConnection`` (``sqlite_connection``: the thread, transactions, open and
close; ``sqlite_schema``: tables and migrations)::

    sqlite_log           append (group commit), read_log, trim_log, wait_for_changes
    sqlite_idempotency   append_once, record_outcome, key_recorded, get_outcome
    sqlite_checkpoints   put_checkpoint, get_checkpoint (in chunks), try_lease
    sqlite_catalog       create_model(_from_checkpoint), delete_model, list_models, ...
    sqlite_artifacts     add/put/delete/list/get_artifact, get/set_active_version
    sqlite_feedback      delayed labels (functions; the methods below delegate)

Example::

    import asyncio
    from service.store.sqlite import SQLiteStore

    async def main():
        store = SQLiteStore("/tmp/demo.sqlite3")
        await store.open()
        await store.create_model("m", {"kind": "arow"})
        pos = await store.append("m", b"payload")
        print(pos, await store.read_log("m", after=0))
        await store.close()

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from service.store import sqlite_feedback
from service.store.base import (
    Feedback,
    KeyGuard,
    check_feedback_labels,
    check_feedback_records,
    check_payload,
    check_ttl,
)
from service.store.sqlite_artifacts import SQLiteArtifacts
from service.store.sqlite_checkpoints import CHECKPOINT_CHUNK
from service.store.sqlite_followers import SQLiteFollowers
from service.store.sqlite_idempotency import SQLiteIdempotency
from service.store.sqlite_log import _Pending
from service.store.sqlite_schema import SCHEMA_VERSION

__all__ = ["CHECKPOINT_CHUNK", "SCHEMA_VERSION", "SQLiteStore"]


class SQLiteStore(SQLiteFollowers, SQLiteIdempotency, SQLiteArtifacts):
    name = "sqlite"
    wakes_complete = True  # each poll reads every position

    def __init__(
        self,
        path: str | Path,
        busy_timeout: float = 10.0,
        poll_interval: float = 0.05,
        checkpoint_chunk_bytes: int = CHECKPOINT_CHUNK,
    ) -> None:
        if busy_timeout <= 0 or poll_interval <= 0:
            raise ValueError("busy_timeout and poll_interval must be > 0 seconds")
        if checkpoint_chunk_bytes < 1:
            raise ValueError("checkpoint_chunk_bytes must be >= 1")
        self.checkpoint_chunk_bytes = checkpoint_chunk_bytes
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        # Other processes' appends are noticed by polling at this interval.
        self.poll_interval = poll_interval
        self._ex: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._flush_scheduled = False
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    # ------------------------------------------------------------------ delayed labels
    async def put_feedback(
        self,
        name: str,
        records: list[tuple[str, bytes]],
        ttl_seconds: float,
        replace: bool = True,
    ) -> int | None:
        check_ttl(ttl_seconds)
        check_feedback_records(records)
        if not records:
            return None
        return await self._run(sqlite_feedback.put, self._tx, name, records, ttl_seconds, replace)

    async def get_feedback(self, name: str, ids: list[str]) -> list[Feedback | None]:
        return await self._run(sqlite_feedback.get, self._db, name, list(ids))

    async def append_labelled(
        self,
        name: str,
        payload: bytes,
        labels: list[tuple[str, str, str]],
        once: KeyGuard | None = None,
        keep_seconds: float = 0.0,
    ) -> tuple[int, str]:
        """One transaction of its own (not group-committed), as ``append_once``."""
        check_payload(payload)
        check_feedback_labels(labels)
        done = await self._run(
            sqlite_feedback.append,
            self._tx,
            self._append_row,
            name,
            bytes(payload),
            labels,
            once,
            max(0.0, keep_seconds),
        )
        self._wake_waiters()
        return done

    async def due_feedback(self, name: str, within_seconds: float, limit: int) -> list[str]:
        return await self._run(sqlite_feedback.due, self._db, name, within_seconds, limit)

    async def sweep_feedback(self) -> int:
        return await self._run(sqlite_feedback.sweep, self._tx, 10_000)
