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
import contextlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from service.store import sqlite_feedback
from service.store.base import (
    ActiveVersionChanged,
    ArtifactActive,
    ArtifactVersion,
    Checkpoint,
    ConfigConflict,
    Feedback,
    IdempotencyKeyReused,
    LogEntry,
    ModelNotFound,
    Store,
    StoreUnavailable,
    ValueTooLarge,
    canonical_config,
    chain_head,
    check_feedback_labels,
    check_feedback_records,
    validate_name,
)

T = TypeVar("T")

# 2: checkpoints in chunks (an older learnserve would read a chunked one as empty)
SCHEMA_VERSION = 2
_MAX_GROUP = 1000  # appends per group commit

# Blob columns come last: SQLite then reads the other columns without walking the
# blob's overflow pages (list_artifacts, last_position stay cheap with big blobs).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    last_pos INTEGER NOT NULL DEFAULT 0,   -- survives trim_log
    art_last INTEGER NOT NULL DEFAULT 0,
    active_version INTEGER,
    created_at REAL NOT NULL,
    generation TEXT NOT NULL DEFAULT '',   -- new random id at every create
    head TEXT NOT NULL DEFAULT ''          -- the log's chain head at last_pos
);
CREATE TABLE IF NOT EXISTS log (
    name TEXT NOT NULL,
    position INTEGER NOT NULL,
    head TEXT NOT NULL DEFAULT '',         -- chain head after this entry
    payload BLOB NOT NULL,
    PRIMARY KEY (name, position)
);
-- token: the checkpoint's chunks in checkpoint_chunks (NULL: written whole in blob,
-- by schema 1), switched to in one transaction once all of them are written.
CREATE TABLE IF NOT EXISTS checkpoints (
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    created_at REAL NOT NULL,
    token TEXT,
    chunks INTEGER,
    blob BLOB NOT NULL
);
-- position: that of the write the chunk belongs to (chunks of abandoned writes of an
-- older position are swept by the next switch).
CREATE TABLE IF NOT EXISTS checkpoint_chunks (
    name TEXT NOT NULL,
    token TEXT NOT NULL,
    idx INTEGER NOT NULL,
    position INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (name, token, idx)
);
CREATE TABLE IF NOT EXISTS artifacts (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at REAL NOT NULL,
    blob BLOB NOT NULL,
    PRIMARY KEY (name, version)
);
-- Idempotency keys (append_once): the position an (model, key) was appended at.
-- generation: a row of a model deleted by a learnserve that did not know this table
-- never answers for the model created again under the same name.
CREATE TABLE IF NOT EXISTS idempotency (
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    position INTEGER NOT NULL,
    n INTEGER NOT NULL,
    payload_hash TEXT NOT NULL,
    generation TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    outcome TEXT,                          -- record_outcome: the entry could not be applied
    PRIMARY KEY (name, key)
);
CREATE INDEX IF NOT EXISTS idempotency_expiry ON idempotency (expires_at);
-- Leases (try_lease): who may do a model's ``purpose`` (e.g. write its checkpoints).
CREATE TABLE IF NOT EXISTS leases (
    name TEXT NOT NULL,
    purpose TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (name, purpose)
);
CREATE INDEX IF NOT EXISTS idempotency_position ON idempotency (name, position);
-- Delayed labels (service.store.sqlite_feedback): the record of a prediction served with
-- an id until the id is labelled, then the label's mark and the position that learned it.
CREATE TABLE IF NOT EXISTS feedback (
    name TEXT NOT NULL,
    id TEXT NOT NULL,
    generation TEXT NOT NULL,
    expires_at REAL NOT NULL,
    position INTEGER NOT NULL DEFAULT 0,
    mark TEXT,
    record BLOB,
    PRIMARY KEY (name, id)
);
CREATE INDEX IF NOT EXISTS feedback_expiry ON feedback (expires_at);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('epoch', 0);
"""

# (name, payload, payload_digest(payload) if the caller gave it, future, the caller's loop)
_Pending = tuple[str, bytes, str | None, asyncio.Future[tuple[int, str]], asyncio.AbstractEventLoop]


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the caller was cancelled; the entry is stored all the same
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


_BLOB_SLICE = 1 << 20  # bytes per checkpoint blob write (each releases the GIL)
# Bytes per checkpoint chunk (one row, one transaction each): far below SQLite's 1e9
# byte limit on one value, which a model's state may exceed (max_model_bytes is 4 GiB),
# and short enough that appends of other workers get the write lock in between.
CHECKPOINT_CHUNK = 16 << 20


class SQLiteStore(Store):
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

    # ------------------------------------------------------------------ plumbing
    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._ex is None:
            raise RuntimeError("SQLiteStore is not open (call await store.open())")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._ex, fn, *args)
        except sqlite3.OperationalError as e:  # locked past busy_timeout, disk I/O, ...
            raise StoreUnavailable(f"sqlite {self.path}: {e}") from e
        except sqlite3.DataError as e:  # "string or blob too big"
            raise ValueTooLarge(f"sqlite {self.path}: {e}") from e

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE takes the write lock up front, so two
        processes never both read-then-write and deadlock on the upgrade."""
        db = self._db
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            # Also after a failed COMMIT (disk full, I/O error): a transaction left open
            # would make every later BEGIN fail. SQLite may have rolled back already.
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    @staticmethod
    def _bump_epoch(db: sqlite3.Connection) -> None:
        db.execute("UPDATE meta SET value = value + 1 WHERE key = 'epoch'")

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        if self._ex is not None:
            return
        self._ex = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        try:
            await self._run(self._open_sync)
        except BaseException:
            self._ex.shutdown(wait=False)
            self._ex = None
            raise

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        self._enable_wal(db)
        db.execute("PRAGMA synchronous = FULL")  # fsync the WAL at every commit
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            db.close()
            raise RuntimeError(
                f"{self.path} has store schema {version}; this learnserve knows {SCHEMA_VERSION}"
            )
        self._db = db
        with self._tx():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            cols = {row[1] for row in db.execute("PRAGMA table_info(models)")}
            if "generation" not in cols:  # a file written before generations existed
                db.execute("ALTER TABLE models ADD COLUMN generation TEXT NOT NULL DEFAULT ''")
            if "head" not in cols:  # ... or before log chains existed
                db.execute("ALTER TABLE models ADD COLUMN head TEXT NOT NULL DEFAULT ''")
            if "head" not in {row[1] for row in db.execute("PRAGMA table_info(log)")}:
                db.execute("ALTER TABLE log ADD COLUMN head TEXT NOT NULL DEFAULT ''")
            ccols = {row[1] for row in db.execute("PRAGMA table_info(checkpoints)")}
            if "token" not in ccols:  # schema 1: every checkpoint one blob
                db.execute("ALTER TABLE checkpoints ADD COLUMN token TEXT")
                db.execute("ALTER TABLE checkpoints ADD COLUMN chunks INTEGER")
            icols = {row[1] for row in db.execute("PRAGMA table_info(idempotency)")}
            if "outcome" not in icols:  # a file written before outcomes were recorded
                db.execute("ALTER TABLE idempotency ADD COLUMN outcome TEXT")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _enable_wal(self, db: sqlite3.Connection) -> None:
        """``journal_mode = WAL`` (persistent: readers never block the writer).

        Switching the journal mode needs an exclusive lock and SQLite answers
        "database is locked" at once, without its busy handler, while another
        process holds the file, as two workers starting together on a new file
        do. So retry for up to ``busy_timeout``."""
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    async def close(self) -> None:
        if self._ex is None:
            return
        ex = self._ex
        with contextlib.suppress(Exception):
            await self._run(self._close_sync)
        self._ex = None
        ex.shutdown(wait=True)

    def _close_sync(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def ping(self) -> bool:
        try:
            return await self._run(lambda: self._db is not None and bool(self._q1("SELECT 1")))
        except Exception:
            return False

    def _q1(self, sql: str, *args: Any) -> Any:
        assert self._db is not None
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else row[0]

    # ------------------------------------------------------------------ configs
    async def create_model(self, name: str, config: dict[str, Any]) -> bool:
        text = canonical_config(config)
        return await self._run(self._create_sync, validate_name(name), text)

    def _create_sync(self, name: str, text: str) -> bool:
        with self._tx() as db:
            cur = self._q1("SELECT config FROM models WHERE name = ?", name)
            if cur is None:
                db.execute(
                    "INSERT INTO models (name, config, created_at, generation) VALUES (?, ?, ?, ?)",
                    (name, text, time.time(), secrets.token_hex(8)),
                )
                self._bump_epoch(db)
                return True
        if cur == text:
            return False
        raise ConfigConflict(f"model {name!r} exists with a different config: {cur}")

    async def create_model_from_checkpoint(
        self, name: str, config: dict[str, Any], blob: bytes | memoryview
    ) -> bool:
        text = canonical_config(config)
        validate_name(name)
        data = memoryview(blob).cast("B")
        size = self.checkpoint_chunk_bytes
        token = f"0.{secrets.token_hex(6)}"  # position 0: a later switch sweeps it if left
        n = -(-data.nbytes // size)
        created: bool | None = None
        try:
            for i in range(n):
                await self._run(self._put_chunk, name, 0, token, i, data[i * size : (i + 1) * size])
            created = await self._run(self._create_from_chunks, name, text, token, n)
        finally:
            if not created and n:
                with contextlib.suppress(Exception):  # best effort, as put_checkpoint
                    await self._run(self._drop_chunks, name, token)
        return bool(created)

    def _create_from_chunks(self, name: str, text: str, token: str, n: int) -> bool:
        with self._tx() as db:
            cur = self._q1("SELECT config FROM models WHERE name = ?", name)
            if cur is None:
                db.execute(
                    "INSERT INTO models (name, config, created_at, generation) VALUES (?, ?, ?, ?)",
                    (name, text, time.time(), secrets.token_hex(8)),
                )
                db.execute(
                    "INSERT OR REPLACE INTO checkpoints (name, position, created_at, token, "
                    "chunks, blob) VALUES (?, 0, ?, ?, ?, x'')",
                    (name, time.time(), token, n),
                )
                self._bump_epoch(db)
                return True
        if cur == text:
            return False
        raise ConfigConflict(f"model {name!r} exists with a different config: {cur}")

    async def get_config(self, name: str) -> dict[str, Any] | None:
        text = await self._run(self._q1, "SELECT config FROM models WHERE name = ?", name)
        return None if text is None else json.loads(text)

    async def list_models(self) -> dict[str, dict[str, Any]]:
        def q() -> list[tuple[str, str]]:
            assert self._db is not None
            return self._db.execute("SELECT name, config FROM models ORDER BY name").fetchall()

        return {n: json.loads(c) for n, c in await self._run(q)}

    async def get_generation(self, name: str) -> str | None:
        gen = await self._run(self._q1, "SELECT generation FROM models WHERE name = ?", name)
        return None if gen is None else str(gen)

    async def list_generations(self) -> dict[str, str]:
        def q() -> list[tuple[str, str]]:
            assert self._db is not None
            return self._db.execute("SELECT name, generation FROM models").fetchall()

        return {n: str(g) for n, g in await self._run(q)}

    async def delete_model(self, name: str) -> bool:
        return await self._run(self._delete_sync, name)

    def _delete_sync(self, name: str) -> bool:
        with self._tx() as db:
            if db.execute("DELETE FROM models WHERE name = ?", (name,)).rowcount == 0:
                return False
            tables = ("log", "checkpoints", "checkpoint_chunks", "artifacts", "idempotency")
            for table in (*tables, "leases", "feedback"):
                db.execute(f"DELETE FROM {table} WHERE name = ?", (name,))
            self._bump_epoch(db)
        return True

    async def catalog_epoch(self) -> int:
        return int(await self._run(self._q1, "SELECT value FROM meta WHERE key = 'epoch'"))

    # ------------------------------------------------------------------ update log
    async def append_entry(
        self, name: str, payload: bytes, digest: str | None = None
    ) -> tuple[int, str]:
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        if self._ex is None:
            raise RuntimeError("SQLiteStore is not open (call await store.open())")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[int, str]] = loop.create_future()
        with self._lock:
            self._pending.append((name, bytes(payload), digest, fut, loop))
            schedule = not self._flush_scheduled
            self._flush_scheduled = True
        if schedule:
            self._ex.submit(self._flush_appends)
        return await fut

    def _flush_appends(self) -> None:
        """Runs on the store thread: commit everything queued, in as few transactions
        (and fsyncs) as possible, then settle each caller's future."""
        while True:
            with self._lock:
                batch, self._pending = self._pending[:_MAX_GROUP], self._pending[_MAX_GROUP:]
                if not batch:
                    self._flush_scheduled = False
                    return
            results: list[tuple[tuple[int, str] | None, BaseException | None]] = []
            try:
                with self._tx() as db:
                    for name, payload, digest, _, _ in batch:
                        done = self._append_row(db, name, payload, digest)
                        if done is None:
                            results.append((None, ModelNotFound(name)))
                            continue
                        results.append((done, None))
            except Exception as e:
                err: BaseException = e
                if isinstance(e, sqlite3.OperationalError):
                    err = StoreUnavailable(f"sqlite {self.path}: {e}")
                results = [(None, err)] * len(batch)
            for (_, _, _, fut, loop), (pos, exc) in zip(batch, results, strict=True):
                with contextlib.suppress(RuntimeError):  # that loop has closed
                    loop.call_soon_threadsafe(_settle, fut, pos, exc)
            if any(exc is None for _, exc in results):
                self._wake_waiters()

    @staticmethod
    def _append_row(
        db: sqlite3.Connection, name: str, payload: bytes, digest: str | None = None
    ) -> tuple[int, str] | None:
        """Inside a write transaction: the next position and chain head, the entry
        inserted; None if the model does not exist. ``digest``: ``payload_digest``."""
        row = db.execute("SELECT last_pos, head FROM models WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        pos, head = int(row[0]) + 1, chain_head(row[1], payload, digest)
        db.execute("UPDATE models SET last_pos = ?, head = ? WHERE name = ?", (pos, head, name))
        db.execute(
            "INSERT INTO log (name, position, head, payload) VALUES (?, ?, ?, ?)",
            (name, pos, head, payload),
        )
        return pos, head

    async def append_once(
        self, name: str, payload: bytes, key: str, payload_hash: str, n: int, ttl_seconds: float
    ) -> tuple[int, int, bool]:
        """One transaction of its own (not group-committed): purge expired keys, look
        the key up, else append and record it."""
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be > 0")
        res = await self._run(
            self._append_once_sync, name, bytes(payload), key, payload_hash, int(n), ttl_seconds
        )
        if not res[2]:
            self._wake_waiters()
        return res

    def _append_once_sync(
        self, name: str, payload: bytes, key: str, payload_hash: str, n: int, ttl: float
    ) -> tuple[int, int, bool]:
        now = time.time()
        with self._tx() as db:
            db.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,))
            gen = self._q1("SELECT generation FROM models WHERE name = ?", name)
            if gen is None:
                raise ModelNotFound(name)
            row = db.execute(
                "SELECT position, n, payload_hash, generation FROM idempotency "
                "WHERE name = ? AND key = ?",
                (name, key),
            ).fetchone()
            if row is not None and row[3] == gen:
                if row[2] != payload_hash:
                    raise IdempotencyKeyReused(
                        f"idempotency key {key!r} was used for model {name!r} with another payload"
                    )
                return int(row[0]), int(row[1]), True
            done = self._append_row(db, name, payload)
            if done is None:
                raise ModelNotFound(name)
            pos = done[0]
            db.execute(
                "INSERT OR REPLACE INTO idempotency (name, key, position, n, payload_hash, "
                "generation, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name, key, pos, n, payload_hash, gen, now, now + ttl),
            )
            return int(pos), n, False

    async def record_outcome(
        self, name: str, position: int, outcome: str, generation: str | None = None
    ) -> bool:
        def q() -> bool:
            with self._tx() as db:
                # The row's generation must be the model's (positions restart at 1 when
                # a model is created again), and the caller's if it gave one.
                cur = db.execute(
                    "UPDATE idempotency SET outcome = ? WHERE name = ? AND position = ? "
                    "AND outcome IS NULL AND expires_at > ? AND generation = "
                    "(SELECT generation FROM models WHERE name = ? AND (? IS NULL OR "
                    "generation = ?))",
                    (outcome, name, int(position), time.time(), name, generation, generation),
                )
                return cur.rowcount > 0

        return await self._run(q)

    async def key_recorded(self, name: str, key: str) -> bool:
        found = await self._run(
            self._q1,
            "SELECT 1 FROM idempotency i JOIN models m "
            "ON m.name = i.name AND m.generation = i.generation "
            "WHERE i.name = ? AND i.key = ? AND i.expires_at > ?",
            name,
            key,
            time.time(),
        )
        return found is not None

    async def get_outcome(self, name: str, key: str) -> str | None:
        out = await self._run(
            self._q1,
            "SELECT i.outcome FROM idempotency i JOIN models m "
            "ON m.name = i.name AND m.generation = i.generation "
            "WHERE i.name = ? AND i.key = ? AND i.expires_at > ?",
            name,
            key,
            time.time(),
        )
        return None if out is None else str(out)

    # ------------------------------------------------------------------ delayed labels
    async def put_feedback(
        self, name: str, records: list[tuple[str, bytes]], ttl_seconds: float
    ) -> int | None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be > 0")
        check_feedback_records(records)
        if not records:
            return None
        return await self._run(sqlite_feedback.put, self._tx, name, records, ttl_seconds)

    async def get_feedback(self, name: str, ids: list[str]) -> list[Feedback | None]:
        return await self._run(sqlite_feedback.get, self._db, name, list(ids))

    async def append_labelled(
        self, name: str, payload: bytes, labels: list[tuple[str, str, str]]
    ) -> tuple[int, str]:
        """One transaction of its own (not group-committed), as ``append_once``."""
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        check_feedback_labels(labels)
        done = await self._run(
            sqlite_feedback.append, self._tx, self._append_row, name, bytes(payload), labels
        )
        self._wake_waiters()
        return done

    async def sweep_feedback(self) -> int:
        return await self._run(sqlite_feedback.sweep, self._tx, 10_000)

    def _wake_waiters(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, ev in waiters:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(ev.set)

    async def read_log(self, name: str, after: int, limit: int = 1000) -> list[LogEntry]:
        if limit <= 0:
            return []

        def q() -> list[tuple[int, bytes, str]]:
            assert self._db is not None
            return self._db.execute(
                "SELECT position, payload, head FROM log WHERE name = ? AND position > ? "
                "ORDER BY position LIMIT ?",
                (name, after, limit),
            ).fetchall()

        return [LogEntry(p, bytes(b), h) for p, b, h in await self._run(q)]

    async def last_position(self, name: str) -> int:
        pos = await self._run(self._q1, "SELECT last_pos FROM models WHERE name = ?", name)
        return int(pos or 0)

    async def trim_log(self, name: str, upto: int) -> None:
        def q() -> None:
            with self._tx() as db:
                db.execute("DELETE FROM log WHERE name = ? AND position <= ?", (name, upto))

        await self._run(q)

    async def wait_for_entries(self, after: dict[str, int], timeout: float) -> None:
        await self.wait_for_changes(after, timeout)

    async def wait_for_changes(
        self, after: dict[str, int], timeout: float
    ) -> dict[str, int] | None:
        """Returns at once if models already have entries past ``after`` (those models);
        otherwise wakes on this process's appends immediately and on other processes'
        by polling (one indexed read of the models table per poll)."""
        if not after:
            await asyncio.sleep(max(timeout, 0.0))
            return {}
        deadline = time.monotonic() + timeout
        ev = asyncio.Event()
        waiter = (asyncio.get_running_loop(), ev)
        with self._lock:
            self._waiters.add(waiter)
        try:
            while True:
                ev.clear()  # cleared before the check, so an append after it still wakes us
                changed = await self._run(self._beyond, dict(after))
                if changed:
                    return changed
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return {}
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ev.wait(), min(remaining, self.poll_interval))
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    def _beyond(self, after: dict[str, int]) -> dict[str, int]:
        return {n: p for n, p in self._positions(list(after)).items() if p > after[n]}

    def _positions(self, names: list[str]) -> dict[str, int]:
        assert self._db is not None
        out: dict[str, int] = {}
        for i in range(0, len(names), 500):  # stay far below SQLite's bound-variable limit
            chunk = names[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT name, last_pos FROM models WHERE name IN ({marks})", chunk
            ).fetchall()
            out.update((n, int(p)) for n, p in rows)
        return out

    async def last_positions(self, names: list[str]) -> dict[str, int]:
        found = await self._run(self._positions, list(names))
        return {n: found.get(n, 0) for n in names}

    # ------------------------------------------------------------------ leases
    async def try_lease(self, name: str, purpose: str, holder: str, ttl_seconds: float) -> bool:
        def q() -> bool:
            now = time.time()
            with self._tx() as db:
                if db.execute("SELECT 1 FROM models WHERE name = ?", (name,)).fetchone() is None:
                    return False
                row = db.execute(
                    "INSERT INTO leases (name, purpose, holder, expires_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (name, purpose) DO UPDATE SET holder = excluded.holder, "
                    "expires_at = excluded.expires_at "
                    "WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
                    "RETURNING holder",
                    (name, purpose, holder, now + ttl_seconds, now),
                ).fetchone()
                return row is not None

        return await self._run(q)

    # ------------------------------------------------------------------ checkpoints
    async def put_checkpoint(
        self,
        name: str,
        position: int,
        blob: bytes | memoryview,
        generation: str | None = None,
        head: str | None = None,  # unchecked: a committed SQLite log never loses its tail
    ) -> None:
        """Chunks first, one transaction each (appends, this process's and others', get
        the write lock in between), under a token of this write; then one transaction
        switches the checkpoint to them and sweeps the replaced chunks."""
        data = memoryview(blob).cast("B")
        position = int(position)
        if not await self._run(self._checkpoint_wanted, name, position, generation):
            return  # would be refused: do not write gigabytes for nothing
        size = self.checkpoint_chunk_bytes
        token = f"{position}.{secrets.token_hex(6)}"
        n = -(-data.nbytes // size)
        switched = False
        try:
            for i in range(n):
                chunk = data[i * size : (i + 1) * size]
                await self._run(self._put_chunk, name, position, token, i, chunk)
            switched = await self._run(
                self._switch_checkpoint, name, position, token, n, generation
            )
        finally:
            if not switched and n:
                with contextlib.suppress(Exception):  # best effort: the next switch sweeps
                    await self._run(self._drop_chunks, name, token)

    def _checkpoint_wanted(self, name: str, position: int, generation: str | None) -> bool:
        gen = self._q1("SELECT generation FROM models WHERE name = ?", name)
        cur = self._q1("SELECT position FROM checkpoints WHERE name = ?", name)
        if gen is None or (generation is not None and gen != generation):
            return False
        return cur is None or int(cur) <= position

    def _put_chunk(self, name: str, position: int, token: str, i: int, chunk: memoryview) -> None:
        with self._tx() as db:
            rowid = db.execute(
                "INSERT INTO checkpoint_chunks (name, token, idx, position, data) "
                "VALUES (?, ?, ?, ?, zeroblob(?)) RETURNING rowid",
                (name, token, i, position, chunk.nbytes),
            ).fetchone()[0]
            # Written in slices through the blob handle, which releases the GIL per
            # write: binding the whole chunk would copy it with the GIL held, stalling
            # the event loop meanwhile.
            with db.blobopen("checkpoint_chunks", "data", rowid) as handle:
                for off in range(0, chunk.nbytes, _BLOB_SLICE):
                    handle.write(chunk[off : off + _BLOB_SLICE])

    def _switch_checkpoint(
        self, name: str, position: int, token: str, n: int, generation: str | None
    ) -> bool:
        with self._tx() as db:
            have = self._q1(
                "SELECT COUNT(*) FROM checkpoint_chunks WHERE name = ? AND token = ?", name, token
            )
            if have != n:  # swept by the switch of a newer one meanwhile
                return False
            # The WHERE clauses give both guards in one statement: the model must
            # exist, and an older position never overwrites a newer checkpoint.
            row = db.execute(
                "INSERT INTO checkpoints (name, position, created_at, token, chunks, blob) "
                "SELECT ?, ?, ?, ?, ?, x'' "
                "WHERE EXISTS (SELECT 1 FROM models WHERE name = ? "
                "AND (? IS NULL OR generation = ?)) "
                "ON CONFLICT (name) DO UPDATE SET position = excluded.position, "
                "created_at = excluded.created_at, token = excluded.token, "
                "chunks = excluded.chunks, blob = excluded.blob "
                "WHERE excluded.position >= checkpoints.position RETURNING rowid",
                (name, position, time.time(), token, n, name, generation, generation),
            ).fetchone()
            if row is None:
                return False
            # The replaced checkpoint's chunks, and those of writers of this or an older
            # position that died before switching (a newer one's are still wanted).
            db.execute(
                "DELETE FROM checkpoint_chunks WHERE name = ? AND token != ? AND position <= ?",
                (name, token, position),
            )
            return True

    def _drop_chunks(self, name: str, token: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM checkpoint_chunks WHERE name = ? AND token = ?", (name, token))

    async def get_checkpoint(self, name: str) -> Checkpoint | None:
        def q() -> Checkpoint | None:
            db = self._db
            assert db is not None
            # One read transaction: the row and its chunks from one snapshot, whatever
            # other processes switch meanwhile.
            db.execute("BEGIN")
            try:
                row = db.execute(
                    "SELECT position, created_at, token, chunks FROM checkpoints WHERE name = ?",
                    (name,),
                ).fetchone()
                if row is None:
                    return None
                position, created_at, token, n = int(row[0]), float(row[1]), row[2], row[3]
                if token is None:  # written whole, by schema 1
                    blob = self._q1("SELECT blob FROM checkpoints WHERE name = ?", name)
                    return Checkpoint(position, bytes(blob), created_at)
                parts = db.execute(
                    "SELECT data FROM checkpoint_chunks WHERE name = ? AND token = ? ORDER BY idx",
                    (name, token),
                ).fetchall()
                if len(parts) != int(n):
                    raise RuntimeError(f"checkpoint of {name!r} has {len(parts)} of its {n} chunks")
                return Checkpoint(position, b"".join(p[0] for p in parts), created_at)
            finally:
                db.execute("COMMIT")

        return await self._run(q)

    # ------------------------------------------------------------------ artifacts
    async def add_artifact(self, name: str, blob: bytes, kind: str, checksum: str) -> int:
        def q() -> int:
            with self._tx() as db:
                return self._insert_artifact(db, name, blob, kind, checksum)

        return await self._run(q)

    def _insert_artifact(
        self, db: sqlite3.Connection, name: str, blob: bytes, kind: str, checksum: str
    ) -> int:
        # active_version = art_last + 1 reads the pre-update art_last: both columns end
        # up at the new version.
        row = db.execute(
            "UPDATE models SET art_last = art_last + 1, active_version = art_last + 1 "
            "WHERE name = ? RETURNING art_last",
            (name,),
        ).fetchone()
        if row is None:
            raise ModelNotFound(name)
        db.execute(
            "INSERT INTO artifacts (name, version, kind, checksum, size, created_at, blob)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, row[0], kind, checksum, len(blob), time.time(), bytes(blob)),
        )
        self._bump_epoch(db)
        return int(row[0])

    async def put_artifact(
        self, name: str, blob: bytes, kind: str, checksum: str
    ) -> tuple[int, bool]:
        def q() -> tuple[int, bool]:
            with self._tx() as db:  # the lookup and the insert/switch in one transaction
                row = db.execute(
                    "SELECT active_version FROM models WHERE name = ?", (name,)
                ).fetchone()
                if row is None:
                    raise ModelNotFound(name)
                same = db.execute(
                    "SELECT version FROM artifacts WHERE name = ? AND checksum = ? "
                    "ORDER BY version DESC LIMIT 1",
                    (name, checksum),
                ).fetchone()
                if same is None:
                    return self._insert_artifact(db, name, blob, kind, checksum), True
                if row[0] != same[0]:
                    db.execute(
                        "UPDATE models SET active_version = ? WHERE name = ?", (same[0], name)
                    )
                    self._bump_epoch(db)
                return int(same[0]), False

        return await self._run(q)

    async def delete_artifact(self, name: str, version: int) -> bool:
        def q() -> bool:
            with self._tx() as db:
                row = db.execute(
                    "SELECT active_version FROM models WHERE name = ?", (name,)
                ).fetchone()
                if row is None:
                    raise ModelNotFound(name)
                if row[0] == version:
                    raise ArtifactActive(name, version)
                cur = db.execute(
                    "DELETE FROM artifacts WHERE name = ? AND version = ?", (name, int(version))
                )
                return cur.rowcount > 0

        return await self._run(q)

    async def list_artifacts(self, name: str) -> list[ArtifactVersion]:
        def q() -> list[tuple[int, int, str, float, str]]:
            assert self._db is not None
            return self._db.execute(
                "SELECT version, size, checksum, created_at, kind FROM artifacts "
                "WHERE name = ? ORDER BY version",
                (name,),
            ).fetchall()

        return [ArtifactVersion(*row) for row in await self._run(q)]

    async def get_artifact(self, name: str, version: int) -> bytes | None:
        blob = await self._run(
            self._q1, "SELECT blob FROM artifacts WHERE name = ? AND version = ?", name, version
        )
        return None if blob is None else bytes(blob)

    async def get_active_version(self, name: str) -> int | None:
        v = await self._run(self._q1, "SELECT active_version FROM models WHERE name = ?", name)
        return None if v is None else int(v)

    async def set_active_version(
        self, name: str, version: int, *, expected: int | None = None
    ) -> None:
        def q() -> None:
            with self._tx() as db:
                row = db.execute(
                    "SELECT active_version FROM models WHERE name = ?", (name,)
                ).fetchone()
                if row is None:
                    raise ModelNotFound(name)
                if expected is not None and row[0] != expected:  # compare-and-set, in the tx
                    raise ActiveVersionChanged(name, expected, row[0])
                if (
                    self._q1(
                        "SELECT 1 FROM artifacts WHERE name = ? AND version = ?", name, version
                    )
                    is None
                ):
                    raise ValueError(f"model {name!r} has no artifact version {version}")
                db.execute(
                    "UPDATE models SET active_version = ? WHERE name = ?", (int(version), name)
                )
                self._bump_epoch(db)

        await self._run(q)
