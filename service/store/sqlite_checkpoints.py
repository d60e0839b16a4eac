"""The SQLite store's checkpoints (written in chunks) and leases.

Checkpoints are written as chunks (``checkpoint_chunk_bytes``, 16 MB: one value may not
exceed 1e9 bytes, a model's state may) in a transaction each, under a token of the
write, then switched to in one transaction that also drops the replaced chunks; a
checkpoint written whole by schema 1 is still read.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable

from service.store.base import Checkpoint
from service.store.sqlite_connection import SQLiteConnection

_BLOB_SLICE = 1 << 20  # bytes per checkpoint blob write (each releases the GIL)
# Bytes per checkpoint chunk (one row, one transaction each): far below SQLite's 1e9
# byte limit on one value, which a model's state may exceed (max_model_bytes is 4 GiB),
# and short enough that appends of other workers get the write lock in between.
CHECKPOINT_CHUNK = 16 << 20


class SQLiteCheckpoints(SQLiteConnection):
    checkpoint_chunk_bytes: int

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
        """Written by ``_write_chunked``; not at all if the switch would refuse it."""
        data = memoryview(blob).cast("B")
        position = int(position)
        if not await self._run(self._checkpoint_wanted, name, position, generation):
            return  # would be refused: do not write gigabytes for nothing
        token = f"{position}.{secrets.token_hex(6)}"
        await self._write_chunked(
            name,
            position,
            token,
            data,
            lambda n: self._switch_checkpoint(name, position, token, n, generation),
        )

    async def _write_chunked(
        self, name: str, position: int, token: str, data: memoryview, switch: Callable[[int], bool]
    ) -> bool:
        """Chunks first, one transaction each (appends, this process's and others', get
        the write lock in between), under a token of this write; then ``switch(n)``, on
        the store's thread, makes them the checkpoint in one transaction (and sweeps the
        replaced chunks). Chunks it did not switch to are dropped; returns its answer."""
        size = self.checkpoint_chunk_bytes
        n = -(-data.nbytes // size)
        switched = False
        try:
            for i in range(n):
                chunk = data[i * size : (i + 1) * size]
                await self._run(self._put_chunk, name, position, token, i, chunk)
            switched = await self._run(switch, n)
        finally:
            if not switched and n:
                with contextlib.suppress(Exception):  # best effort: the next switch sweeps
                    await self._run(self._drop_chunks, name, token)
        return switched

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
