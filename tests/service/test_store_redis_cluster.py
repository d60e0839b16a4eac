"""RedisClusterStore on a real 3-master Redis Cluster (the ``redis_cluster`` fixture):
what the contract suite cannot show — a slow master fails only its own entries, a
moved slot is a 503 and then works, a cluster that is down is a 503, and a plain
RedisStore pointed at a cluster node says so instead of failing with a 500."""

from __future__ import annotations

import asyncio

import pytest

from service.store import StoreUnavailable
from service.store.redis import RedisStore
from service.store.redis_cluster import RedisClusterStore
from tests.service.cluster_procs import RedisClusterNodes
from tests.service.procs import RedisServer

CFG = {"kind": "arow"}
NAMES = [f"model-{i}" for i in range(12)]


def node_of(cluster: RedisClusterNodes, name: str) -> RedisServer:
    """The master that owns model ``name``'s slot, asked of the server itself."""
    with cluster.nodes[0].client() as c:
        slot = c.execute_command("CLUSTER", "KEYSLOT", f"ls:{{{name}}}:config")
        for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return next(n for n in cluster.nodes if n.port == int(master[1]))
    raise AssertionError(f"slot of {name} not covered")


def test_models_spread_over_every_master(redis_cluster: RedisClusterNodes) -> None:
    assert {node_of(redis_cluster, n).port for n in NAMES} == {n.port for n in redis_cluster.nodes}


def test_a_stuck_master_fails_only_its_own_entries(
    redis_cluster: RedisClusterNodes, redis_cluster_url: str
) -> None:
    """Group commit is per master: a master that does not answer (CLIENT PAUSE WRITE)
    fails its entries with StoreUnavailable; every other master's are acknowledged."""
    stuck = node_of(redis_cluster, NAMES[0])
    on_stuck = [n for n in NAMES if node_of(redis_cluster, n) is stuck]
    elsewhere = [n for n in NAMES if n not in on_stuck]
    assert on_stuck and elsewhere

    async def t() -> None:
        s = RedisClusterStore(redis_cluster_url, socket_timeout=0.5)
        await s.open()
        try:
            for n in NAMES:
                await s.create_model(n, CFG)
            with stuck.client() as c:
                c.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
            res = await asyncio.gather(
                *(s.append(n, b"x") for n in NAMES for _ in range(5)), return_exceptions=True
            )
            by_name = dict(zip([n for n in NAMES for _ in range(5)], res, strict=True))
            for n in on_stuck:
                assert isinstance(by_name[n], StoreUnavailable), by_name[n]
            for n in elsewhere:
                assert by_name[n] == 5, by_name[n]  # acknowledged although a master failed
            with stuck.client() as c:
                c.execute_command("CLIENT", "UNPAUSE")
            # The stuck master's entries may have been stored after the timeout (as with
            # any unanswered write); its positions stay contiguous either way.
            for n in on_stuck:
                p = await s.append(n, b"after")
                assert [e.position for e in await s.read_log(n, 0)] == list(range(1, p + 1))
        finally:
            await s.close()

    asyncio.run(t())


def _move_slot(cluster: RedisClusterNodes, name: str) -> RedisServer:
    """Migrate model ``name``'s slot, keys and all, to another master (as a reshard
    does); returns the new owner."""
    src = node_of(cluster, name)
    dst = next(n for n in cluster.nodes if n is not src)
    with src.client() as s, dst.client() as d:
        slot = s.execute_command("CLUSTER", "KEYSLOT", f"ls:{{{name}}}:config")
        src_id = s.execute_command("CLUSTER", "MYID").decode()
        dst_id = d.execute_command("CLUSTER", "MYID").decode()
        d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
        if keys:
            s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
        for n in cluster.nodes:
            with n.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    cluster.wait_ok()
    return dst


def test_a_moved_slot_is_a_503_then_the_new_owner_is_used(
    redis_cluster: RedisClusterNodes, redis_cluster_url: str
) -> None:
    name = NAMES[1]

    async def t() -> None:
        s = RedisClusterStore(redis_cluster_url, refresh_interval=0.0)
        await s.open()
        try:
            await s.create_model(name, CFG)
            assert await s.append(name, b"1") == 1
            _move_slot(redis_cluster, name)
            errors: list[BaseException] = []
            for _ in range(100):  # the first try meets the stale map; the refresh fixes it
                try:
                    pos = await s.append(name, b"2")
                    break
                except StoreUnavailable as e:
                    errors.append(e)
                    await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"never appended after the move: {errors[-1]}")
            assert errors and "moved" in str(errors[0]).lower()  # a 503 saying why, not a 500
            assert pos == 2
            assert [e.payload for e in await s.read_log(name, 0)] == [b"1", b"2"]
            assert await s.append_once(name, b"3", "k", "h", 1, 60) == (3, 1, False)
        finally:
            await s.close()

    asyncio.run(t())


def test_a_cluster_that_is_down_is_unavailable_then_back(
    redis_cluster: RedisClusterNodes, redis_cluster_url: str
) -> None:
    async def t() -> None:
        redis_cluster.stop()
        s = RedisClusterStore(redis_cluster_url, connect_timeout=0.5)
        await s.open()  # allowed: the service starts and reports not-ready
        try:
            assert await s.ping() is False
            for call in (s.create_model("m", CFG), s.catalog_epoch(), s.append("m", b"x")):
                with pytest.raises(StoreUnavailable):
                    await call
            with pytest.raises(StoreUnavailable):
                await s.wait_for_entries({"m": 0}, timeout=1)
            redis_cluster.start()
            assert await s.create_model("m", CFG) is True
            assert await s.append("m", b"x") == 1
        finally:
            await s.close()

    asyncio.run(t())


def test_plain_redis_store_on_a_cluster_node_says_to_use_cluster_mode(
    redis_cluster: RedisClusterNodes, redis_cluster_url: str
) -> None:
    """Pointed at one master, models on the others get MOVED: a 503 naming the setting."""

    async def t() -> None:
        s = RedisStore(redis_cluster_url)
        await s.open()
        try:
            first = redis_cluster.nodes[0]
            other = next(n for n in NAMES if node_of(redis_cluster, n) is not first)
            with pytest.raises(StoreUnavailable, match="LEARNSERVE_REDIS_CLUSTER=true"):
                await s.create_model(other, CFG)
            with pytest.raises(StoreUnavailable, match="LEARNSERVE_REDIS_CLUSTER=true"):
                await s.append(other, b"x")
        finally:
            await s.close()

    asyncio.run(t())


def test_cluster_client_on_a_plain_server_is_unavailable(redis_url: str) -> None:
    async def t() -> None:
        s = RedisClusterStore(redis_url)
        await s.open()
        try:
            with pytest.raises(StoreUnavailable, match=r"[Cc]luster"):
                await s.catalog_epoch()
        finally:
            await s.close()

    asyncio.run(t())


def test_wait_replicas_is_asked_of_each_master(redis_cluster_url: str) -> None:
    """The test cluster has no replicas: WAIT 1 fails on every master, for its own
    entries, and the entries are stored anyway (the documented "may be stored")."""

    async def t() -> None:
        s = RedisClusterStore(redis_cluster_url, wait_replicas=1, wait_timeout=0.1)
        await s.open()
        try:
            for n in NAMES:
                await s.create_model(n, CFG)
            res = await asyncio.gather(*(s.append(n, b"x") for n in NAMES), return_exceptions=True)
            assert all(isinstance(r, StoreUnavailable) and "WAIT" in str(r) for r in res), res
            with pytest.raises(StoreUnavailable, match="WAIT"):
                await s.append_once(NAMES[0], b"y", "k", "h", 1, 60)
            assert [await s.last_position(n) for n in NAMES] == [2] + [1] * (len(NAMES) - 1)
        finally:
            await s.close()

    asyncio.run(t())


def test_missing_cluster_settings_are_reported_at_open(
    redis_cluster: RedisClusterNodes, redis_cluster_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The README's settings, checked on every master: the test cluster has them (and no
    replicas, which only matters with WAIT); one node put back to Redis's defaults is
    named, and so is every master that lacks the replicas WAIT 1 needs after a failover."""

    async def warnings(wait_replicas: int) -> list[str]:
        s = RedisClusterStore(redis_cluster_url, wait_replicas=wait_replicas)
        await s.open()
        try:
            return await s.config_warnings()
        finally:
            await s.close()

    assert asyncio.run(warnings(0)) == []
    node = redis_cluster.nodes[1]
    with node.client() as c:
        c.config_set("cluster-require-full-coverage", "yes")
        c.config_set("repl-diskless-sync-delay", "5")
    try:
        with caplog.at_level("WARNING", logger="service.store.redis_cluster"):
            got = asyncio.run(warnings(0))
        assert len(got) == 1 and f":{node.port}: cluster-require-full-coverage is yes" in got[0]
        assert got[0] in caplog.text  # open() logged it
        got = asyncio.run(warnings(1))
        where = f":{node.port}: "
        assert any(where in w and "repl-diskless-sync-delay is 5" in w for w in got), got
        no_replicas = [w for w in got if "0 replica(s)" in w]
        assert len(no_replicas) == 3, got  # each master, each named
    finally:
        with node.client() as c:
            c.config_set("cluster-require-full-coverage", "no")
            c.config_set("repl-diskless-sync-delay", "0")


def test_cluster_setting_needs_a_url() -> None:
    from service.settings import Settings

    with pytest.raises(ValueError, match="redis_cluster=true needs redis_url"):
        Settings(redis_cluster=True)
    s = Settings(redis_cluster=True, redis_url="redis://n0:6379", redis_wait_replicas=1)
    assert s.redis_cluster and s.redis_wait_replicas == 1
