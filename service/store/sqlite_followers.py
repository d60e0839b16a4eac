"""The SQLite store's rules between leaders and followers (``Store.create_follower``).

Each rule is one write transaction that reads the other side: a follower is one whose
config's ``follows.model`` names the leader (``json_extract``), so creating one checks
its leader's row (and generation) in the transaction that inserts it; deleting a model
refuses a leader any row follows, and a follower the ``serving`` table names for its
leader; a promotion appends its control entry and records ``serving`` only while the
follower's row follows the leader; a trim never cuts past what a follower needs.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from service.store.base import (
    ConfigConflict,
    LeaderGone,
    ModelInUse,
    ModelNotFound,
    NotAFollower,
    canonical_config,
    check_payload,
    validate_name,
)
from service.store.sqlite_catalog import SQLiteCatalog
from service.store.sqlite_log import SQLiteLog

_FOLLOWERS = "SELECT name FROM models WHERE json_extract(config, '$.follows.model') = ?"


def _leader_of(text: str | None) -> str | None:
    f = None if text is None else json.loads(text).get("follows")
    return str(f["model"]) if isinstance(f, dict) else None


class SQLiteFollowers(SQLiteCatalog, SQLiteLog):
    async def create_follower(
        self, name: str, config: dict[str, Any], leader_generation: str
    ) -> bool:
        text = canonical_config(config)
        validate_name(name)
        lead, start = str(config["follows"]["model"]), int(config["follows"]["from_version"])

        def tx() -> bool:
            with self._tx() as db:
                row = db.execute(
                    "SELECT generation, last_pos FROM models WHERE name = ?", (lead,)
                ).fetchone()
                if row is None or row[0] != leader_generation:
                    raise LeaderGone(lead)
                cur = self._q1("SELECT config FROM models WHERE name = ?", name)
                if cur is None:
                    if int(row[1]) > start and not self._q1(
                        "SELECT 1 FROM log WHERE name = ? AND position = ?", lead, start + 1
                    ):
                        raise LeaderGone(lead, trimmed=True)
                    db.execute(
                        "INSERT INTO models (name, config, created_at, generation) "
                        "VALUES (?, ?, ?, ?)",
                        (name, text, time.time(), secrets.token_hex(8)),
                    )
                    self._bump_epoch(db)
                    return True
            if cur == text:
                return False
            raise ConfigConflict(f"model {name!r} exists with a different config: {cur}")

        return await self._run(tx)

    def _delete_sync(self, name: str) -> bool:
        with self._tx() as db:
            fs = sorted(r[0] for r in db.execute(_FOLLOWERS, (name,)))
            if fs:
                raise ModelInUse(name, "has_followers", fs)
            lead = _leader_of(self._q1("SELECT config FROM models WHERE name = ?", name))
            if lead is not None and self._q1(
                "SELECT 1 FROM serving WHERE name = ? AND follower = ?", lead, name
            ):
                raise ModelInUse(name, "promoted", [lead])
            return self._delete_rows(db, name)

    async def append_serving(
        self, name: str, payload: bytes, serving: str | None
    ) -> tuple[int, str]:
        check_payload(payload)

        def tx() -> tuple[int, str]:
            with self._tx() as db:
                if (
                    serving is not None
                    and _leader_of(self._q1("SELECT config FROM models WHERE name = ?", serving))
                    != name
                ):
                    raise NotAFollower(f"model {serving!r} does not follow {name!r}")
                done = self._append_row(db, name, bytes(payload))
                if done is None:
                    raise ModelNotFound(name)
                if serving is None:
                    db.execute("DELETE FROM serving WHERE name = ?", (name,))
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO serving (name, follower) VALUES (?, ?)",
                        (name, serving),
                    )
                return done

        done = await self._run(tx)
        self._wake_waiters()
        return done

    async def trim_log(self, name: str, upto: int) -> None:
        def tx() -> None:
            with self._tx() as db:
                bound = upto
                rows = db.execute(
                    "SELECT m.config, c.position FROM models m LEFT JOIN checkpoints c "
                    "ON c.name = m.name WHERE json_extract(m.config, '$.follows.model') = ?",
                    (name,),
                ).fetchall()
                for text, cp in rows:
                    need = int(json.loads(text)["follows"].get("from_version", 0))
                    bound = min(bound, max(need, -1 if cp is None else int(cp)))
                if bound >= 1:
                    db.execute("DELETE FROM log WHERE name = ? AND position <= ?", (name, bound))

        await self._run(tx)
