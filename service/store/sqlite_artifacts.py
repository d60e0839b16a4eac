"""The SQLite store's artifacts: a batch model's stored versions and its active one.

One row per (model, version) in ``artifacts``; ``models.art_last`` is the last version
handed out and ``models.active_version`` the one served.
Every change of the active version bumps the catalog epoch, so workers switch.
"""

from __future__ import annotations

import sqlite3
import time

from service.store.base import ActiveVersionChanged, ArtifactActive, ArtifactVersion, ModelNotFound
from service.store.sqlite_connection import SQLiteConnection


class SQLiteArtifacts(SQLiteConnection):
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

    @staticmethod
    def _active_version(db: sqlite3.Connection, name: str) -> int | None:
        """Inside a transaction: the model's active version (None before its first)."""
        row = db.execute("SELECT active_version FROM models WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ModelNotFound(name)
        return None if row[0] is None else int(row[0])

    async def put_artifact(
        self, name: str, blob: bytes, kind: str, checksum: str
    ) -> tuple[int, bool]:
        def q() -> tuple[int, bool]:
            with self._tx() as db:  # the lookup and the insert/switch in one transaction
                active = self._active_version(db, name)
                same = db.execute(
                    "SELECT version FROM artifacts WHERE name = ? AND checksum = ? "
                    "ORDER BY version DESC LIMIT 1",
                    (name, checksum),
                ).fetchone()
                if same is None:
                    return self._insert_artifact(db, name, blob, kind, checksum), True
                if active != same[0]:
                    db.execute(
                        "UPDATE models SET active_version = ? WHERE name = ?", (same[0], name)
                    )
                    self._bump_epoch(db)
                return int(same[0]), False

        return await self._run(q)

    async def delete_artifact(self, name: str, version: int) -> bool:
        def q() -> bool:
            with self._tx() as db:
                active = self._active_version(db, name)
                if active == version:
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
                active = self._active_version(db, name)
                if expected is not None and active != expected:  # compare-and-set, in the tx
                    raise ActiveVersionChanged(name, expected, active)
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
