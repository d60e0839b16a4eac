"""Delayed labels on SQLite: the bodies of ``SQLiteStore.put_feedback`` /
``get_feedback`` / ``append_labelled`` / ``sweep_feedback``, run on the store's
thread (``tx`` is the store's write transaction, ``BEGIN IMMEDIATE``).

One row per (model, id) in the ``feedback`` table: the record until the id is
labelled, then its mark and the position of the entry that learned it (the record
is dropped; the mark is kept ``keep`` seconds from the label, or until the
prediction's expiry if later: ``Store.append_labelled``). A row is alive while
``expires_at`` is in the future and its ``generation`` is the model's (a row of a
model deleted by a learnserve that did not know this table never answers for the
model created again). Expired rows are swept by ``put`` (a few more than it adds) and
by ``sweep``, which the service calls now and then, so a model that stops predicting
with ids does not keep them on disk.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from service.store.base import (
    Feedback,
    FeedbackConflict,
    KeyGuard,
    KeyReplayed,
    ModelNotFound,
    record_digest,
)
from service.store.sqlite_idempotency import record_key, replayed_key

Tx = Callable[[], AbstractContextManager[sqlite3.Connection]]
_CHUNK = 500  # ids per IN (...): far below SQLite's bound-variable limit


def _sweep(db: sqlite3.Connection, now: float, limit: int) -> int:
    return db.execute(
        "DELETE FROM feedback WHERE rowid IN "
        "(SELECT rowid FROM feedback WHERE expires_at <= ? LIMIT ?)",
        (now, limit),
    ).rowcount


def sweep(tx: Tx, limit: int) -> int:
    with tx() as db:
        return _sweep(db, time.time(), limit)


def _generation(db: sqlite3.Connection, name: str) -> str:
    row = db.execute("SELECT generation FROM models WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise ModelNotFound(name)
    return str(row[0])


def _rows(
    db: sqlite3.Connection, name: str, gen: str, ids: list[str], now: float
) -> dict[str, tuple[bytes | None, str | None, int]]:
    """The live rows of ``ids``: id -> (record, mark, position)."""
    out: dict[str, tuple[bytes | None, str | None, int]] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for fid, rec, mark, pos in db.execute(
            f"SELECT id, record, mark, position FROM feedback WHERE name = ? AND generation = ?"
            f" AND expires_at > ? AND id IN ({marks})",
            (name, gen, now, *chunk),
        ):
            out[fid] = (None if rec is None else bytes(rec), mark, int(pos))
    return out


def put(
    tx: Tx, name: str, records: list[tuple[str, bytes]], ttl: float, replace: bool = True
) -> int | None:
    now = time.time()
    with tx() as db:
        gen = _generation(db, name)
        _sweep(db, now, 100 + 2 * len(records))
        live = _rows(db, name, gen, [i for i, _ in records], now)
        for j, (fid, _) in enumerate(records):
            if fid in live and (live[fid][1] is not None or not replace):
                return j  # labelled already (or kept, and not to be replaced): nothing stored
        db.executemany(
            "INSERT OR REPLACE INTO feedback (name, id, generation, expires_at, position, mark,"
            " record) VALUES (?, ?, ?, ?, 0, NULL, ?)",
            [(name, fid, gen, now + ttl, bytes(rec)) for fid, rec in records],
        )
        return None


def get(db: sqlite3.Connection | None, name: str, ids: list[str]) -> list[Feedback | None]:
    assert db is not None
    row = db.execute("SELECT generation FROM models WHERE name = ?", (name,)).fetchone()
    if row is None or not ids:
        return [None] * len(ids)
    live = _rows(db, name, str(row[0]), ids, time.time())
    out: list[Feedback | None] = []
    for fid in ids:
        found = live.get(fid)
        out.append(None if found is None else Feedback(*found))
    return out


def due(db: sqlite3.Connection | None, name: str, within: float, limit: int) -> list[str]:
    assert db is not None
    row = db.execute("SELECT generation FROM models WHERE name = ?", (name,)).fetchone()
    if row is None:
        return []
    now = time.time()
    return [
        str(fid)
        for (fid,) in db.execute(
            "SELECT id FROM feedback WHERE name = ? AND generation = ? AND mark IS NULL"
            " AND record IS NOT NULL AND expires_at > ? AND expires_at <= ?"
            " ORDER BY expires_at LIMIT ?",
            (name, str(row[0]), now, now + within, int(limit)),
        )
    ]


def append(
    tx: Tx,
    append_row: Callable[[sqlite3.Connection, str, bytes], Any],
    name: str,
    payload: bytes,
    labels: list[tuple[str, str, str]],
    once: KeyGuard | None = None,
    keep: float = 0.0,
) -> tuple[int, str]:
    now = time.time()
    with tx() as db:
        gen = _generation(db, name)
        if once is not None:
            found = replayed_key(db, name, once.key, once.payload_hash, gen, now)
            if found is not None:
                raise KeyReplayed(*found)
        live = _rows(db, name, gen, [i for i, _, _ in labels], now)
        for j, (fid, digest, _) in enumerate(labels):
            rec, mark, _pos = live.get(fid, (None, None, 0))
            if mark is not None:
                raise FeedbackConflict(j, "labelled")
            if rec is None:
                raise FeedbackConflict(j, "missing")
            if record_digest(rec) != digest:
                raise FeedbackConflict(j, "changed")
        done = append_row(db, name, payload)
        if done is None:
            raise ModelNotFound(name)
        pos, head = int(done[0]), str(done[1])
        db.executemany(
            "UPDATE feedback SET mark = ?, position = ?, record = NULL,"
            " expires_at = max(expires_at, ?) WHERE name = ? AND id = ?",
            [(mark, pos, now + keep, name, fid) for fid, _, mark in labels],
        )
        if once is not None:
            record_key(db, name, once.key, pos, int(once.n), once.payload_hash, gen, now,
                       once.ttl_seconds)  # fmt: skip
        return pos, head
