"""SQLiteStore writes a checkpoint as chunks (rows of ``checkpoint_chunk_bytes``), then
switches to them in one transaction: a model's state may exceed SQLite's limit on one
value (1e9 bytes) while the service admits models up to 4 GiB. A small chunk size here
stands in for the 16 MB default; a checkpoint written whole by schema 1 is still read."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from service.store.sqlite import SQLiteStore

CFG = {"kind": "arow"}


def run(path: Path, fn: Any, **kw: Any) -> Any:
    async def main() -> Any:
        s = SQLiteStore(path, **kw)
        await s.open()
        try:
            return await fn(s)
        finally:
            await s.close()

    return asyncio.run(main())


def blob(seed: int, size: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def rows(path: Path, sql: str) -> list[Any]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


def test_chunks_round_trip_and_only_the_current_ones_remain(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"

    async def t(s: SQLiteStore) -> None:
        await s.create_model("m", CFG)
        for pos, size in ((3, 3000 + 5), (4, 1000), (5, 0), (9, 2000), (9, 7777)):
            data = blob(pos, size)
            await s.put_checkpoint("m", pos, memoryview(np.frombuffer(data, np.uint8)))
            c = await s.get_checkpoint("m")
            assert c is not None and (c.position, c.blob) == (pos, data)
            chunks = rows(path, "SELECT token, idx, length(data) FROM checkpoint_chunks")
            assert len(chunks) == -(-size // 1000), chunks  # this checkpoint's chunks only
            assert sorted(i for _, i, _ in chunks) == list(range(len(chunks)))
            assert len({t for t, _, _ in chunks}) <= 1
            assert all(n <= 1000 for _, _, n in chunks)
        # refused writes (older position, another generation, no model) leave nothing
        await s.put_checkpoint("m", 2, blob(2, 5000))
        await s.put_checkpoint("m", 12, blob(12, 5000), generation="not-this-one")
        await s.put_checkpoint("ghost", 1, blob(1, 5000))
        assert len(rows(path, "SELECT idx FROM checkpoint_chunks")) == 8
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (9, blob(9, 7777))
        # concurrent writers: the newest wins, whole, and the losers' chunks are gone
        sizes = {p: 1500 + 37 * p for p in range(10, 30)}
        await asyncio.gather(*(s.put_checkpoint("m", p, blob(p, n)) for p, n in sizes.items()))
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (29, blob(29, sizes[29]))
        assert len(rows(path, "SELECT idx FROM checkpoint_chunks")) == 3
        assert await s.delete_model("m")
        assert rows(path, "SELECT COUNT(*) FROM checkpoint_chunks") == [(0,)]

    run(path, t, checkpoint_chunk_bytes=1000)


def test_a_dead_writers_chunks_are_swept_by_the_next_switch(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"

    async def t(s: SQLiteStore) -> None:
        await s.create_model("m", CFG)
        # a worker wrote chunks for position 4 and died before switching to them;
        # another is writing position 50 (its chunks must stay)
        await s._run(s._put_chunk, "m", 4, "4.dead", 0, memoryview(b"x" * 10))
        await s._run(s._put_chunk, "m", 50, "50.busy", 0, memoryview(b"y" * 10))
        await s.put_checkpoint("m", 7, blob(7, 2500))
        tokens = {t for (t,) in rows(path, "SELECT token FROM checkpoint_chunks")}
        assert "4.dead" not in tokens and "50.busy" in tokens and len(tokens) == 2
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (7, blob(7, 2500))

    run(path, t, checkpoint_chunk_bytes=1000)


def test_a_schema_1_checkpoint_is_read_then_replaced(tmp_path: Path) -> None:
    """A file written by the previous learnserve: one blob per checkpoint."""
    path = tmp_path / "old.sqlite3"
    old = blob(1, 5000)
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE models (name TEXT PRIMARY KEY, config TEXT NOT NULL,
                last_pos INTEGER NOT NULL DEFAULT 0, art_last INTEGER NOT NULL DEFAULT 0,
                active_version INTEGER, created_at REAL NOT NULL,
                generation TEXT NOT NULL DEFAULT '');
            CREATE TABLE checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL,
                created_at REAL NOT NULL, blob BLOB NOT NULL);
            PRAGMA user_version = 1;
            """
        )
        db.execute("INSERT INTO models VALUES ('m', '{\"kind\":\"arow\"}', 6, 0, NULL, 1.0, 'g')")
        db.execute("INSERT INTO checkpoints VALUES ('m', 6, 123.5, ?)", (old,))

    async def t(s: SQLiteStore) -> None:
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob, c.created_at) == (6, old, 123.5)
        await s.put_checkpoint("m", 6, blob(2, 2100), generation="g")
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (6, blob(2, 2100))

    run(path, t, checkpoint_chunk_bytes=1000)
    # the old blob is gone (an empty one left in its place), the schema is 2
    assert rows(path, "SELECT length(blob), chunks FROM checkpoints") == [(0, 3)]
    assert rows(path, "PRAGMA user_version") == [(2,)]


def test_a_checkpoint_over_the_value_limit_is_written_in_chunks(tmp_path: Path) -> None:
    """The limit on one value, lowered on the store's connection (as SQLITE_MAX_LENGTH
    is 1e9 bytes for real): a checkpoint 20x over it goes in and comes back whole."""
    path = tmp_path / "s.sqlite3"
    data = blob(3, 20_000)

    async def t(s: SQLiteStore) -> None:
        assert s._db is not None
        db = s._db
        await s._run(db.setlimit, sqlite3.SQLITE_LIMIT_LENGTH, 1500)
        await s.create_model("m", CFG)
        await s.put_checkpoint("m", 2, data)
        c = await s.get_checkpoint("m")
        assert c is not None and c.blob == data

    run(path, t, checkpoint_chunk_bytes=1000)
