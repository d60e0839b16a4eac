"""The SQLite store's catalog: models (configs and generations), created and deleted.

A model is its row in ``models``; the catalog epoch (``meta``) counts every change
of the catalog (and of a model's active artifact), so workers notice them cheaply.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from typing import Any

from service.store.base import ConfigConflict, canonical_config, validate_name
from service.store.sqlite_checkpoints import SQLiteCheckpoints


class SQLiteCatalog(SQLiteCheckpoints):
    """Also creates a model with its starting checkpoint (an import), whose chunks are
    written as the checkpoints' are."""

    async def create_model(self, name: str, config: dict[str, Any]) -> bool:
        text = canonical_config(config)
        return await self._run(self._create_sync, validate_name(name), text)

    def _create_sync(self, name: str, text: str, checkpoint: tuple[str, int] | None = None) -> bool:
        """``checkpoint``: the token and number of the chunks of its starting state
        (position 0), written already."""
        with self._tx() as db:
            cur = self._q1("SELECT config FROM models WHERE name = ?", name)
            if cur is None:
                db.execute(
                    "INSERT INTO models (name, config, created_at, generation) VALUES (?, ?, ?, ?)",
                    (name, text, time.time(), secrets.token_hex(8)),
                )
                if checkpoint is not None:
                    token, n = checkpoint
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

    async def create_model_from_checkpoint(
        self, name: str, config: dict[str, Any], blob: bytes | memoryview
    ) -> bool:
        text = canonical_config(config)
        validate_name(name)
        data = memoryview(blob).cast("B")
        token = f"0.{secrets.token_hex(6)}"  # position 0: a later switch sweeps it if left
        return await self._write_chunked(
            name, 0, token, data, lambda n: self._create_sync(name, text, (token, n))
        )

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
            return self._delete_rows(db, name)

    def _delete_rows(self, db: sqlite3.Connection, name: str) -> bool:
        """Inside a write transaction: the model's rows deleted; False if none."""
        if db.execute("DELETE FROM models WHERE name = ?", (name,)).rowcount == 0:
            return False
        tables = ("log", "checkpoints", "checkpoint_chunks", "artifacts", "idempotency")
        for table in (*tables, "leases", "feedback", "serving"):
            db.execute(f"DELETE FROM {table} WHERE name = ?", (name,))
        self._bump_epoch(db)
        return True

    async def catalog_epoch(self) -> int:
        return int(await self._run(self._q1, "SELECT value FROM meta WHERE key = 'epoch'"))
