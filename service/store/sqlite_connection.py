"""The SQLite store's connection: one ``sqlite3`` connection, its thread and transactions.

The connection is driven by a dedicated single-thread executor (``_run``), so calls
are serialised and never block the event loop; ``_tx`` is one write transaction
(``BEGIN IMMEDIATE``). The file is opened in WAL mode with ``synchronous=FULL`` and a
busy timeout, so several processes can share it. The base of
:class:`service.store.sqlite.SQLiteStore`, whose constructor sets the attributes
declared here.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from service.store.base import Store, StoreUnavailable, ValueTooLarge
from service.store.sqlite_schema import SCHEMA_VERSION, migrate

T = TypeVar("T")


class SQLiteConnection(Store):
    path: Path
    busy_timeout: float
    _ex: ThreadPoolExecutor | None  # the store's thread; None while closed
    _db: sqlite3.Connection | None

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
            migrate(db)

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
