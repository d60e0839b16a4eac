"""WAIT / WAITAOF before acknowledging, on a real master + replica (``replicaof``).

``wait_replicas=N``: an append is acknowledged only once N replicas have it (so a
failover to one keeps it); not reached within ``wait_timeout`` -> StoreUnavailable,
although the entry is stored on the master (the API's 503 says "may be stored", and
an idempotency key makes the retry safe). WAITAOF needs Redis >= 7.2.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.store import StoreUnavailable
from service.store.redis import RedisStore
from tests.service.procs import RedisServer, find_redis_server

CFG = {"kind": "arow"}


@pytest.fixture
def master_and_replica(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server binary found")
    master = RedisServer(binary, tmp_path / "master")
    master.start()
    replica = RedisServer(
        binary, tmp_path / "replica", extra_args=["--replicaof", "127.0.0.1", str(master.port)]
    )
    try:
        replica.start()
        for _ in range(300):  # until the initial sync is done
            with replica.client() as c:
                if c.info("replication").get("master_link_status") == "up":
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("replica never synced")
        yield master, replica
    finally:
        replica.kill()
        master.kill()


def test_wait_replicas_acknowledges_only_what_a_replica_has(
    master_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = master_and_replica

    async def t() -> None:
        s = RedisStore(master.url, wait_replicas=1, wait_timeout=1.0)
        await s.open()
        try:
            await s.create_model("m", CFG)
            positions = await asyncio.gather(*(s.append("m", b"%d" % i) for i in range(50)))
            assert sorted(positions) == list(range(1, 51))
            # Acknowledged => on the replica already (no waiting, no polling here).
            with replica.client() as c:
                assert c.xlen("ls:{m}:log") == 50
            assert await s.append_once("m", b"k", "key", "h", 1, 60) == (51, 1, False)
            with replica.client() as c:
                assert c.xlen("ls:{m}:log") == 51

            # No replica: not acknowledged, but the master did store it.
            replica.stop()
            s.wait_timeout = 0.2
            with pytest.raises(StoreUnavailable, match=r"WAIT.*may be stored"):
                await s.append("m", b"unreplicated")
            with pytest.raises(StoreUnavailable, match="WAIT"):
                await s.append_once("m", b"once", "key2", "h2", 1, 60)
            assert [e.payload for e in await s.read_log("m", 50)] == [
                b"k",
                b"unreplicated",
                b"once",
            ]
            # The retry with the same idempotency key is answered from the stored entry.
            s.wait_replicas = 0
            assert await s.append_once("m", b"once", "key2", "h2", 1, 60) == (53, 1, True)
        finally:
            await s.close()

    asyncio.run(t())


def test_more_replicas_than_exist_is_never_acknowledged(
    master_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    master, _ = master_and_replica

    async def t() -> None:
        s = RedisStore(master.url, wait_replicas=2, wait_timeout=0.2)
        await s.open()
        try:
            await s.create_model("m", CFG)
            with pytest.raises(StoreUnavailable, match="on 2 replica"):
                await s.append("m", b"x")
        finally:
            await s.close()

    asyncio.run(t())


def test_waitaof_with_a_replica(master_and_replica: tuple[RedisServer, RedisServer]) -> None:
    master, replica = master_and_replica

    async def t() -> None:
        s = RedisStore(master.url, waitaof=True, wait_replicas=1, wait_timeout=2.0)
        await s.open()
        try:
            assert s.server_version is not None
            if s.server_version < (7, 2):
                assert s.waitaof is False  # warned at open; WAIT 1 still applies
                assert s._ack_commands()[0][0] == "WAIT"
            else:
                assert s._ack_commands()[0][0] == "WAITAOF"
            await s.create_model("m", CFG)
            assert await s.append("m", b"x") == 1
            with replica.client() as c:
                assert c.xlen("ls:{m}:log") == 1
        finally:
            await s.close()

    asyncio.run(t())
