"""The SQLite store's update log: appends (group-committed), reads, trims, waits.

Concurrent appends from one process are group-committed: whatever is queued when the
store's thread gets to it goes into one transaction and one fsync, which keeps
``/update`` throughput up without weakening durability. Other processes' appends are
noticed by polling ``models.last_pos`` every ``poll_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from typing import Any

from service.store.base import LogEntry, ModelNotFound, StoreUnavailable, chain_head, check_payload
from service.store.sqlite_connection import SQLiteConnection

_MAX_GROUP = 1000  # appends per group commit

# (name, payload, payload_digest(payload) if the caller gave it, future, the caller's loop)
_Pending = tuple[str, bytes, str | None, asyncio.Future[tuple[int, str]], asyncio.AbstractEventLoop]


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the caller was cancelled; the entry is stored all the same
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


class SQLiteLog(SQLiteConnection):
    poll_interval: float  # seconds between looks for other processes' appends
    _lock: threading.Lock  # guards _pending, _flush_scheduled and _waiters
    _pending: list[_Pending]  # appends queued for the next group commit
    _flush_scheduled: bool
    _waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]

    async def append_entry(
        self, name: str, payload: bytes, digest: str | None = None
    ) -> tuple[int, str]:
        check_payload(payload)
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
        inserted; None if the model does not exist."""
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
