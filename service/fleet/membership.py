"""Fleet membership: one heartbeat lease per member, in the store the fleet shares.

A member renews its lease every ``lease / 3`` seconds; a renewal also returns the
members whose leases have not expired. A member that stops renewing (crashed,
partitioned, SIGKILLed) drops out of everyone's list within ``lease`` seconds plus
one heartbeat; a member that shuts down cleanly removes its lease at once.

- Redis: one sorted set ``ls:{members}:leases`` (member -> expiry in ms, by Redis's
  own clock, so hosts' clocks do not matter). One key, hence one hash-tag slot: the
  same script runs on a Redis Cluster. It reuses the store's connection pool.
- SQLite: a ``members`` table (member, expiry) in the store's file, by this
  machine's clock: every process on one SQLite file is on one machine.

Nothing here is consensus: members may briefly disagree on the list (one renewed
just before, another just after an expiry). The update log orders every write, so
two views only mean that a model is applied by one member more or fewer for a
heartbeat, never that a write is lost or reordered.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from service.store.base import Store, StoreUnavailable

LEASES_KEY = "ls:{members}:leases"

# Drop expired leases, renew ours (if a member is given), return the live ones.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] ~= '' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[2]))
end
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""


class Membership(ABC):
    @abstractmethod
    async def renew(self, member: str, lease_seconds: float) -> tuple[str, ...]:
        """Renew ``member``'s lease; the members alive now (``member`` included)."""

    @abstractmethod
    async def leave(self, member: str) -> None: ...

    async def close(self) -> None:
        return None


class RedisMembership(Membership):
    def __init__(self, client: Any) -> None:
        self.client = client
        self._script = client.register_script(_RENEW)

    async def renew(self, member: str, lease_seconds: float) -> tuple[str, ...]:
        try:
            raw = await self._script(keys=[LEASES_KEY], args=[member, int(lease_seconds * 1000)])
        except (ConnectionError, TimeoutError, OSError) as e:
            raise StoreUnavailable(str(e)) from e
        except Exception as e:  # redis-py's own connection/timeout errors
            if type(e).__module__.startswith("redis"):
                raise StoreUnavailable(str(e)) from e
            raise
        return tuple(sorted(m.decode() if isinstance(m, bytes) else str(m) for m in raw))

    async def leave(self, member: str) -> None:
        await self.client.zrem(LEASES_KEY, member)


class SQLiteMembership(Membership):
    """Its own connection to the store's file (the store's is busy with the log)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                                 check_same_thread=False)  # fmt: skip
            db.execute(
                "CREATE TABLE IF NOT EXISTS members "
                "(member TEXT PRIMARY KEY, expires REAL NOT NULL)"
            )
            self._db = db
        return self._db

    def _renew_sync(self, member: str, lease_seconds: float) -> tuple[str, ...]:
        db = self._conn()
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM members WHERE expires <= ?", (now,))
            db.execute(
                "INSERT INTO members (member, expires) VALUES (?, ?) "
                "ON CONFLICT(member) DO UPDATE SET expires = excluded.expires",
                (member, now + lease_seconds),
            )
            rows = db.execute("SELECT member FROM members ORDER BY member").fetchall()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return tuple(r[0] for r in rows)

    async def renew(self, member: str, lease_seconds: float) -> tuple[str, ...]:
        try:
            return await asyncio.to_thread(self._renew_sync, member, lease_seconds)
        except sqlite3.OperationalError as e:  # locked for longer than the busy timeout
            raise StoreUnavailable(str(e)) from e

    async def leave(self, member: str) -> None:
        def q() -> None:
            self._conn().execute("DELETE FROM members WHERE member = ?", (member,))

        await asyncio.to_thread(q)

    async def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def membership_for(store: Store) -> Membership:
    """The membership backend living in ``store`` (opened: it shares Redis's pool)."""
    path = getattr(store, "path", None)
    if path is not None:
        return SQLiteMembership(Path(path))
    client = store.redis_client() if hasattr(store, "redis_client") else None
    if client is None:
        raise RuntimeError(f"sharded ownership needs an opened Redis or SQLite store, not {store}")
    return RedisMembership(client)
