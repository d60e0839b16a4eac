"""The SQLite store's idempotency keys: ``append_once`` and the outcomes of keyed entries.

One row per (model, key) in the ``idempotency`` table: the position the key's entry
was appended at, its ``n`` and payload hash, until ``expires_at``; ``outcome`` once
the entry was found not to apply. A row answers only while its ``generation`` is the
model's (a model deleted and created again starts with no keys).
"""

from __future__ import annotations

import sqlite3
import time

from service.store.base import IdempotencyKeyReused, ModelNotFound, check_payload, check_ttl
from service.store.sqlite_log import SQLiteLog


def replayed_key(
    db: sqlite3.Connection, name: str, key: str, payload_hash: str, gen: str, now: float
) -> tuple[int, int] | None:
    """Expired keys purged; the live key's ``(position, n)`` if it was recorded with
    this ``payload_hash`` (``IdempotencyKeyReused`` if with another), else None."""
    db.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,))
    row = db.execute(
        "SELECT position, n, payload_hash, generation FROM idempotency WHERE name = ? AND key = ?",
        (name, key),
    ).fetchone()
    if row is None or row[3] != gen:
        return None
    if row[2] != payload_hash:
        raise IdempotencyKeyReused(
            f"idempotency key {key!r} was used for model {name!r} with another payload"
        )
    return int(row[0]), int(row[1])


def record_key(
    db: sqlite3.Connection, name: str, key: str, pos: int, n: int, payload_hash: str, gen: str,
    now: float, ttl: float,
) -> None:  # fmt: skip
    db.execute(
        "INSERT OR REPLACE INTO idempotency (name, key, position, n, payload_hash, "
        "generation, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (name, key, pos, n, payload_hash, gen, now, now + ttl),
    )


class SQLiteIdempotency(SQLiteLog):
    async def append_once(
        self, name: str, payload: bytes, key: str, payload_hash: str, n: int, ttl_seconds: float
    ) -> tuple[int, int, bool]:
        """One transaction of its own (not group-committed): purge expired keys, look
        the key up, else append and record it."""
        check_payload(payload)
        check_ttl(ttl_seconds)
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
            gen = self._q1("SELECT generation FROM models WHERE name = ?", name)
            if gen is None:
                raise ModelNotFound(name)
            found = replayed_key(db, name, key, payload_hash, gen, now)
            if found is not None:
                return found[0], found[1], True
            done = self._append_row(db, name, payload)
            if done is None:
                raise ModelNotFound(name)
            pos = int(done[0])
            record_key(db, name, key, pos, n, payload_hash, gen, now, ttl)
            return pos, n, False

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
        return await self.key_entry(name, key) is not None

    async def key_entry(self, name: str, key: str) -> tuple[int, int, str] | None:
        def q() -> tuple[int, int, str] | None:
            assert self._db is not None
            row = self._db.execute(
                "SELECT i.position, i.n, i.payload_hash FROM idempotency i JOIN models m "
                "ON m.name = i.name AND m.generation = i.generation "
                "WHERE i.name = ? AND i.key = ? AND i.expires_at > ?",
                (name, key, time.time()),
            ).fetchone()
            return None if row is None else (int(row[0]), int(row[1]), str(row[2]))

        return await self._run(q)

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
