"""One contract, three stores: every test runs on SQLiteStore, on RedisStore (a real,
private redis-server from the ``redis_server`` fixture) and on RedisClusterStore (a
real 3-master Redis Cluster from the ``redis_cluster`` fixture).

No pytest-asyncio: each test is a plain function that runs its coroutine with
``backend.run(fn)``, which opens a fresh store inside the loop and closes it after.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from service.store import (
    ArtifactActive,
    ConfigConflict,
    ModelNotFound,
    Store,
    open_store,
)
from service.store.base import IdempotencyKeyReused
from service.store.redis import RedisStore
from service.store.redis_cluster import RedisClusterStore
from service.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Backend:
    kind: str
    new: Callable[[], Store]  # a fresh, unopened store on the same data
    restart: Callable[[], None]  # stop + start whatever holds the data

    def run(self, fn: Callable[[Store], Awaitable[None]]) -> None:
        async def main() -> None:
            store = self.new()
            await store.open()
            try:
                await fn(store)
            finally:
                await store.close()

        asyncio.run(main())


@pytest.fixture(params=["sqlite", "redis", "redis-cluster"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "store.sqlite3"
        return Backend("sqlite", lambda: SQLiteStore(path), lambda: None)
    if request.param == "redis-cluster":
        curl = request.getfixturevalue("redis_cluster_url")
        cluster = request.getfixturevalue("redis_cluster")

        def restart_cluster() -> None:
            cluster.stop()  # SHUTDOWN on every master: AOFs fsynced
            cluster.start()  # same ports, dirs and nodes.conf; waits for cluster_state:ok

        return Backend("redis-cluster", lambda: RedisClusterStore(curl), restart_cluster)
    url = request.getfixturevalue("redis_url")
    server = request.getfixturevalue("redis_server")

    def restart() -> None:
        server.stop()  # SHUTDOWN: the AOF is fsynced before the process exits
        server.start()

    return Backend("redis", lambda: RedisStore(url), restart)


CFG = {"kind": "arow", "params": {"r": 0.1}, "features": {"type": "hashed", "bits": 18}}


# ---------------------------------------------------------------------- configs


def test_create_equal_conflict_list_get(backend: Backend) -> None:
    async def t(s: Store) -> None:
        e0 = await s.catalog_epoch()
        assert await s.create_model("adult", CFG) is True
        e1 = await s.catalog_epoch()
        assert e1 > e0
        # Same config, keys in another order: equal, not a conflict, no epoch bump.
        reordered = {
            "features": {"bits": 18, "type": "hashed"},
            "params": {"r": 0.1},
            "kind": "arow",
        }
        assert await s.create_model("adult", reordered) is False
        assert await s.catalog_epoch() == e1
        with pytest.raises(ConfigConflict, match="adult"):
            await s.create_model("adult", {**CFG, "kind": "pa"})
        assert await s.get_config("adult") == CFG
        assert await s.get_config("nope") is None
        assert await s.create_model("mnist", {"kind": "softmax"}) is True
        assert await s.list_models() == {"adult": CFG, "mnist": {"kind": "softmax"}}

    backend.run(t)


def test_names_that_cannot_be_stored_are_refused(backend: Backend) -> None:
    async def t(s: Store) -> None:
        for bad in ["", "a{b}", "x" * 201, "tab\there"]:
            with pytest.raises(ValueError, match="model name"):
                await s.create_model(bad, CFG)
        assert await s.list_models() == {}

    backend.run(t)


def test_delete_removes_everything_and_bumps_epoch(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.create_model("other", CFG)
        for i in range(3):
            await s.append("m", b"e%d" % i)
        await s.append("other", b"keep")
        await s.put_checkpoint("m", 2, b"state")
        await s.add_artifact("m", b"blob", "lambdamart", "c1")
        e = await s.catalog_epoch()

        assert await s.delete_model("m") is True
        assert await s.catalog_epoch() > e
        assert await s.get_config("m") is None
        assert "m" not in await s.list_models()
        assert await s.read_log("m", 0) == []
        assert await s.last_position("m") == 0
        assert await s.get_checkpoint("m") is None
        assert await s.list_artifacts("m") == []
        assert await s.get_artifact("m", 1) is None
        assert await s.get_active_version("m") is None
        assert await s.delete_model("m") is False
        # The other model is untouched, and a re-created "m" starts from scratch.
        assert [x.payload for x in await s.read_log("other", 0)] == [b"keep"]
        assert await s.create_model("m", {"kind": "new"}) is True
        assert await s.append("m", b"fresh") == 1
        assert await s.get_checkpoint("m") is None

    backend.run(t)


def test_writes_to_a_missing_model(backend: Backend) -> None:
    async def t(s: Store) -> None:
        with pytest.raises(ModelNotFound):
            await s.append("ghost", b"x")
        with pytest.raises(ModelNotFound):
            await s.add_artifact("ghost", b"x", "fastxml", "c")
        with pytest.raises(ModelNotFound):
            await s.set_active_version("ghost", 1)
        await s.put_checkpoint("ghost", 5, b"x")  # a race with delete: silently dropped
        assert await s.get_checkpoint("ghost") is None
        assert await s.read_log("ghost", 0) == []
        assert await s.list_models() == {}

    backend.run(t)


# ---------------------------------------------------------------------- update log


def test_one_bad_append_does_not_fail_its_neighbours(backend: Backend) -> None:
    """Concurrent appends are committed in groups; a missing model fails only its own."""

    async def t(s: Store) -> None:
        await s.create_model("a", CFG)
        res = await asyncio.gather(
            *(s.append("ghost" if i % 3 == 0 else "a", b"%d" % i) for i in range(60)),
            return_exceptions=True,
        )
        assert all(isinstance(r, ModelNotFound) for r in res[0::3])
        ok = [r for i, r in enumerate(res) if i % 3]
        assert sorted(ok) == list(range(1, 41))  # type: ignore[type-var]
        assert await s.last_position("ghost") == 0

    backend.run(t)


def test_concurrent_appends_get_contiguous_positions(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("a", CFG)
        await s.create_model("b", CFG)
        payloads = [os.urandom(8) + b"#%d" % i for i in range(200)]
        pos_a = await asyncio.gather(*(s.append("a", p) for p in payloads))
        assert sorted(pos_a) == list(range(1, 201))
        log = await s.read_log("a", 0, limit=1000)
        assert [e.position for e in log] == list(range(1, 201))
        # Each append's returned position holds exactly that append's payload.
        assert {e.position: e.payload for e in log} == dict(zip(pos_a, payloads, strict=True))
        assert await s.last_position("a") == 200
        # Two models appended to concurrently keep separate sequences.
        mixed = await asyncio.gather(*(s.append("ab"[i % 2], b"m") for i in range(100)))
        assert sorted(mixed[0::2]) == list(range(201, 251))
        assert sorted(mixed[1::2]) == list(range(1, 51))

    backend.run(t)


def test_read_log_after_and_limit(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        for i in range(1, 11):
            assert await s.append("m", b"p%d" % i) == i
        got = await s.read_log("m", after=3, limit=4)
        assert [(e.position, e.payload) for e in got] == [(i, b"p%d" % i) for i in range(4, 8)]
        assert [e.position for e in await s.read_log("m", after=8)] == [9, 10]
        assert await s.read_log("m", after=10) == []
        assert await s.read_log("m", after=0, limit=0) == []
        big = os.urandom(1 << 20)  # binary-safe, and a 1 MiB entry is fine
        assert await s.append("m", big) == 11
        assert (await s.read_log("m", after=10))[0].payload == big

    backend.run(t)


def test_trim_keeps_last_position(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        for i in range(10):
            await s.append("m", b"%d" % i)
        await s.trim_log("m", 6)
        assert [e.position for e in await s.read_log("m", 0)] == [7, 8, 9, 10]
        assert await s.last_position("m") == 10
        await s.trim_log("m", 3)  # already trimmed: no-op
        assert [e.position for e in await s.read_log("m", 0)] == [7, 8, 9, 10]
        await s.trim_log("m", 10)  # everything
        assert await s.read_log("m", 0) == []
        assert await s.last_position("m") == 10
        assert await s.append("m", b"next") == 11
        assert [e.position for e in await s.read_log("m", 0)] == [11]

    backend.run(t)


def test_wait_for_entries(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.create_model("n", CFG)
        await s.append("m", b"x")

        # Already past the position: returns without waiting for the timeout.
        t0 = time.monotonic()
        await s.wait_for_entries({"m": 0}, timeout=30)
        assert time.monotonic() - t0 < 10

        # Nothing new: returns by itself after the timeout.
        t0 = time.monotonic()
        await s.wait_for_entries({"m": 1, "n": 0}, timeout=0.3)
        assert time.monotonic() - t0 < 10

        # An append from another task wakes a waiter on any of its models long before
        # its 30 s timeout.
        async def later() -> None:
            await asyncio.sleep(0.2)
            await s.append("n", b"y")

        t0 = time.monotonic()
        writer = asyncio.create_task(later())
        await s.wait_for_entries({"m": 1, "n": 0}, timeout=30)
        waited = time.monotonic() - t0
        await writer
        assert waited < 10, f"waiter slept {waited:.1f}s although an entry arrived at 0.2s"
        assert [e.payload for e in await s.read_log("n", 0)] == [b"y"]

    backend.run(t)


# ---------------------------------------------------------------------- checkpoints


def test_checkpoint_is_atomic_and_never_goes_back(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        assert await s.get_checkpoint("m") is None
        before = time.time()
        await s.put_checkpoint("m", 5, b"five")
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (5, b"five")
        assert before - 1 <= c.created_at <= time.time() + 1
        await s.put_checkpoint("m", 3, b"three")  # older: ignored
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (5, b"five")
        await s.put_checkpoint("m", 5, b"five-again")  # same position: replaces
        await s.put_checkpoint("m", 8, b"\x00" * 100_000)
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (8, b"\x00" * 100_000)
        # Concurrent writers: whatever the interleaving, the newest position wins and
        # its blob is the one stored next to it (never a torn position/blob pair).
        await asyncio.gather(*(s.put_checkpoint("m", p, b"s%d" % p) for p in range(9, 40)))
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (39, b"s39")

    backend.run(t)


def test_checkpoint_of_another_generation_is_ignored(backend: Backend) -> None:
    """A worker still holding a deleted model's state must not checkpoint it into the
    model created again under the same name."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        old = await s.get_generation("m")
        assert old is not None
        await s.put_checkpoint("m", 4, b"old model", old)
        c = await s.get_checkpoint("m")
        assert c is not None and c.blob == b"old model"
        await s.delete_model("m")
        await s.create_model("m", CFG)
        new = await s.get_generation("m")
        assert new != old
        await s.put_checkpoint("m", 9, b"stale", old)  # ignored: another generation
        assert await s.get_checkpoint("m") is None
        await s.put_checkpoint("m", 2, b"new model", new)
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (2, b"new model")

    backend.run(t)


def test_big_checkpoint_from_a_buffer_round_trips(backend: Backend) -> None:
    """A checkpoint as the service writes it: a memoryview of a numpy buffer, several MB
    (the SQLite store writes it in 1 MB slices; the last one here is partial)."""
    data = np.random.default_rng(0).integers(0, 256, 2_600_003, dtype=np.uint8)

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_checkpoint("m", 7, memoryview(data))
        c = await s.get_checkpoint("m")
        assert c is not None and c.position == 7 and c.blob == data.tobytes()
        await s.put_checkpoint("m", 6, memoryview(data[:10]))  # older: ignored
        c = await s.get_checkpoint("m")
        assert c is not None and c.position == 7 and len(c.blob) == data.size

    backend.run(t)


# ---------------------------------------------------------------------- artifacts


def test_artifact_versions_and_active(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("rank", {"kind": "lambdamart"})
        blobs = [b"v1", b"version-two", os.urandom(50_000)]
        e = await s.catalog_epoch()
        for i, b in enumerate(blobs, 1):
            assert await s.add_artifact("rank", b, "lambdamart", f"sum{i}") == i
            assert await s.get_active_version("rank") == i
        assert await s.catalog_epoch() >= e + 3
        metas = await s.list_artifacts("rank")
        assert [(m.version, m.size, m.checksum, m.kind) for m in metas] == [
            (1, 2, "sum1", "lambdamart"),
            (2, 11, "sum2", "lambdamart"),
            (3, 50_000, "sum3", "lambdamart"),
        ]
        assert all(m.created_at > 0 for m in metas)
        for i, b in enumerate(blobs, 1):
            assert await s.get_artifact("rank", i) == b
        assert await s.get_artifact("rank", 4) is None

        e = await s.catalog_epoch()
        await s.set_active_version("rank", 1)
        assert await s.get_active_version("rank") == 1
        assert await s.catalog_epoch() > e
        with pytest.raises(ValueError, match="version 9"):
            await s.set_active_version("rank", 9)
        assert await s.get_active_version("rank") == 1
        assert await s.add_artifact("rank", b"v4", "lambdamart", "sum4") == 4
        assert await s.get_active_version("rank") == 4

    backend.run(t)


def test_put_artifact_recognises_stored_bytes(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("xml", {"kind": "fastxml"})
        assert await s.put_artifact("xml", b"one", "fastxml", "sum-a") == (1, True)
        e = await s.catalog_epoch()
        # the same checksum as the active version: that version, nothing stored or bumped
        assert await s.put_artifact("xml", b"one", "fastxml", "sum-a") == (1, False)
        assert await s.catalog_epoch() == e
        assert await s.put_artifact("xml", b"two", "fastxml", "sum-b") == (2, True)
        # the same as an older version: it becomes active again, no version 3
        e = await s.catalog_epoch()
        assert await s.put_artifact("xml", b"one", "fastxml", "sum-a") == (1, False)
        assert await s.get_active_version("xml") == 1
        assert await s.catalog_epoch() > e  # other workers must switch
        assert [m.version for m in await s.list_artifacts("xml")] == [1, 2]
        assert await s.put_artifact("xml", b"three", "fastxml", "sum-c") == (3, True)
        with pytest.raises(ModelNotFound):
            await s.put_artifact("ghost", b"x", "fastxml", "c")

    backend.run(t)


def test_put_artifact_races_store_one_version(backend: Backend) -> None:
    """Identical deploys racing from several clients (workers) store the bytes once."""

    async def t(s1: Store) -> None:
        s2 = backend.new()
        await s2.open()
        try:
            await s1.create_model("xml", {"kind": "fastxml"})
            got = await asyncio.gather(
                *(s.put_artifact("xml", b"same", "fastxml", "sum") for s in [s1, s2] * 4)
            )
            assert sorted(got) == [(1, False)] * 7 + [(1, True)]
            assert [m.version for m in await s2.list_artifacts("xml")] == [1]
        finally:
            await s2.close()

    backend.run(t)


def test_delete_artifact_never_the_active_one(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("rank", {"kind": "lambdamart"})
        for i in range(1, 4):
            await s.add_artifact("rank", b"v%d" % i, "lambdamart", f"sum{i}")
        with pytest.raises(ArtifactActive):
            await s.delete_artifact("rank", 3)
        assert await s.delete_artifact("rank", 1) is True
        assert await s.delete_artifact("rank", 1) is False  # already gone
        assert await s.delete_artifact("rank", 9) is False
        assert await s.get_artifact("rank", 1) is None
        assert [m.version for m in await s.list_artifacts("rank")] == [2, 3]
        with pytest.raises(ValueError, match="version 1"):
            await s.set_active_version("rank", 1)  # a deleted version cannot come back
        await s.set_active_version("rank", 2)
        assert await s.delete_artifact("rank", 3) is True
        assert await s.get_active_version("rank") == 2 and await s.get_artifact("rank", 2) == b"v2"
        # version numbers are never reused after a delete
        assert await s.add_artifact("rank", b"v4", "lambdamart", "sum4") == 4
        # the checksum of a deleted version is stored anew
        assert await s.put_artifact("rank", b"v1", "lambdamart", "sum1") == (5, True)
        with pytest.raises(ModelNotFound):
            await s.delete_artifact("ghost", 1)

    backend.run(t)


# ---------------------------------------------------------------------- durability, sharing


def test_data_survive_close_and_restart(backend: Backend) -> None:
    payloads = [b"entry-%d" % i for i in range(50)]
    written: dict[int, bytes] = {}

    async def write(s: Store) -> None:
        await s.create_model("m", CFG)
        positions = await asyncio.gather(*(s.append("m", p) for p in payloads))
        written.update(zip(positions, payloads, strict=True))
        await s.put_checkpoint("m", 20, b"ckpt")
        await s.trim_log("m", 10)
        await s.add_artifact("m", b"art", "llsvm", "c")

    backend.run(write)
    backend.restart()  # Redis: SHUTDOWN + start on the same AOF; SQLite: nothing to do

    async def read(s: Store) -> None:
        assert await s.get_config("m") == CFG
        assert await s.last_position("m") == 50
        log = await s.read_log("m", 0)
        assert [e.position for e in log] == list(range(11, 51))
        assert [e.payload for e in log] == [written[p] for p in range(11, 51)]
        ckpt = await s.get_checkpoint("m")
        assert ckpt is not None and (ckpt.position, ckpt.blob) == (20, b"ckpt")
        assert await s.get_artifact("m", 1) == b"art"
        assert await s.append("m", b"after-restart") == 51

    backend.run(read)


def test_two_store_instances_share_one_database(backend: Backend) -> None:
    """As two workers would: each sees the other's writes, positions stay contiguous."""

    async def t(s1: Store) -> None:
        s2 = backend.new()
        await s2.open()
        try:
            await s1.create_model("m", CFG)
            assert await s2.create_model("m", CFG) is False
            got = await asyncio.gather(
                *(s.append("m", b"%d" % i) for i in range(100) for s in (s1, s2))
            )
            assert sorted(got) == list(range(1, 201))
            assert [e.position for e in await s2.read_log("m", 0, limit=500)] == list(range(1, 201))

            async def later() -> None:
                await asyncio.sleep(0.2)
                await s1.append("m", b"from-s1")

            writer = asyncio.create_task(later())
            t0 = time.monotonic()
            await s2.wait_for_entries({"m": 200}, timeout=30)
            await writer
            assert time.monotonic() - t0 < 10
            assert (await s2.read_log("m", 200))[0].payload == b"from-s1"
        finally:
            await s2.close()

    backend.run(t)


# ---------------------------------------------------------------------- idempotency keys

DAY = 86400.0


def test_append_once_appends_once_then_replays(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.create_model("other", CFG)
        assert await s.append_once("m", b"p1", "k1", "h1", 3, DAY) == (1, 3, False)
        assert await s.append_once("m", b"p1", "k1", "h1", 3, DAY) == (1, 3, True)
        assert await s.append("m", b"plain") == 2  # un-keyed appends are unaffected
        assert await s.append_once("m", b"p2", "k2", "h2", 5, DAY) == (3, 5, False)
        # The recorded n is answered, whatever n the retry carries.
        assert await s.append_once("m", b"p1", "k1", "h1", 99, DAY) == (1, 3, True)
        # Same key, another payload: refused, nothing stored.
        with pytest.raises(IdempotencyKeyReused):
            await s.append_once("m", b"other", "k1", "h-other", 3, DAY)
        # Keys are per model.
        assert await s.append_once("other", b"p1", "k1", "h1", 3, DAY) == (1, 3, False)
        assert [e.payload for e in await s.read_log("m", 0)] == [b"p1", b"plain", b"p2"]
        assert await s.last_position("m") == 3
        # Keys may be any printable ASCII, spaces and quotes included.
        odd = "a key with spaces, 'quotes' and %s" % ("x" * 150)
        assert await s.append_once("m", b"p4", odd, "h4", 1, DAY) == (4, 1, False)
        assert await s.append_once("m", b"p4", odd, "h4", 1, DAY) == (4, 1, True)
        with pytest.raises(ModelNotFound):
            await s.append_once("ghost", b"p", "k1", "h1", 1, DAY)
        assert await s.last_position("ghost") == 0

    backend.run(t)


def test_append_once_is_atomic_across_store_instances(backend: Backend) -> None:
    """Two workers racing with one key: exactly one appends, every caller gets its position."""

    async def t(s1: Store) -> None:
        s2 = backend.new()
        await s2.open()
        try:
            await s1.create_model("m", CFG)
            await s1.append("m", b"before")
            res = await asyncio.gather(
                *(s.append_once("m", b"p", "k", "h", 2, DAY) for _ in range(20) for s in (s1, s2))
            )
            assert sorted(r[2] for r in res) == [False] + [True] * 39
            assert {(r[0], r[1]) for r in res} == {(2, 2)}
            assert [e.payload for e in await s2.read_log("m", 0)] == [b"before", b"p"]
            # Many keys at once, interleaved with plain appends: contiguous positions.
            got = await asyncio.gather(
                *(s1.append_once("m", b"%d" % i, f"k{i}", "h", 1, DAY) for i in range(30)),
                *(s2.append("m", b"plain%d" % i) for i in range(30)),
            )
            positions = [g[0] if isinstance(g, tuple) else g for g in got]
            assert sorted(positions) == list(range(3, 63))
        finally:
            await s2.close()

    backend.run(t)


def test_append_once_keys_expire(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        assert await s.append_once("m", b"p", "k", "h", 1, 0.3) == (1, 1, False)
        assert await s.append_once("m", b"p", "k", "h", 1, 0.3) == (1, 1, True)
        await asyncio.sleep(0.6)
        # Expired: the key is new again (another body is no conflict either).
        assert await s.append_once("m", b"q", "k", "h2", 1, DAY) == (2, 1, False)
        assert await s.append_once("m", b"q", "k", "h2", 1, DAY) == (2, 1, True)

    backend.run(t)


def test_delete_removes_idempotency_keys(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.create_model("keep", CFG)
        for i in range(3):
            await s.append_once("m", b"p%d" % i, f"k{i}", f"h{i}", 1, DAY)
        await s.append_once("keep", b"p0", "k0", "h0", 1, DAY)
        assert await s.delete_model("m") is True
        with pytest.raises(ModelNotFound):
            await s.append_once("m", b"p0", "k0", "h0", 1, DAY)
        # The model created again does not see the old model's keys.
        assert await s.create_model("m", CFG) is True
        assert await s.append_once("m", b"new", "k1", "h-new", 1, DAY) == (1, 1, False)
        assert await s.append_once("m", b"p0", "k0", "h0", 1, DAY) == (2, 1, False)
        assert await s.append_once("keep", b"p0", "k0", "h0", 1, DAY) == (1, 1, True)
        if isinstance(s, RedisStore):  # nothing of the deleted model's keys is left over
            assert await s.r.hlen("ls:{m}:idem") == 2
            assert await s.r.zcard("ls:{m}:idemexp") == 2
            # Both expire with the last record (nothing is left once every key expired).
            for k in ("ls:{m}:idem", "ls:{m}:idemexp"):
                assert 0 < await s.r.pttl(k) <= DAY * 1000
            await s.delete_model("m")
            assert await s.r.exists("ls:{m}:idem", "ls:{m}:idemexp") == 0
        if isinstance(s, SQLiteStore):
            await s.delete_model("m")
            rows = await s._run(s._q1, "SELECT COUNT(*) FROM idempotency WHERE name = 'm'")
            assert rows == 0

    backend.run(t)


def test_idempotency_keys_survive_restart(backend: Backend) -> None:
    async def write(s: Store) -> None:
        await s.create_model("m", CFG)
        assert await s.append_once("m", b"p", "k", "h", 4, DAY) == (1, 4, False)

    async def read(s: Store) -> None:
        assert await s.append_once("m", b"p", "k", "h", 4, DAY) == (1, 4, True)
        assert await s.last_position("m") == 1

    backend.run(write)
    backend.restart()
    backend.run(read)


_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from service.store.sqlite import SQLiteStore

    async def main(path, tag, n):
        s = SQLiteStore(path)
        await s.open()
        await s.create_model("m", {"kind": "x"})
        positions = await asyncio.gather(*(s.append("m", b"%s-%d" % (tag, i)) for i in range(n)))
        await s.close()
        print(",".join(map(str, positions)))

    asyncio.run(main(sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])))
    """
)


def test_sqlite_two_processes_append_to_one_file(tmp_path: Path) -> None:
    """Two OS processes (like ``uvicorn --workers 2``) on one SQLite file."""
    path = tmp_path / "shared.sqlite3"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), tag, "150"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for tag in ("A", "B")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()
    positions = [int(x) for out, _ in outs for x in out.decode().strip().split(",")]
    assert sorted(positions) == list(range(1, 301))

    async def check() -> None:
        s = SQLiteStore(path)
        await s.open()
        log = await s.read_log("m", 0, limit=1000)
        await s.close()
        assert [e.position for e in log] == list(range(1, 301))
        assert sorted(e.payload for e in log) == sorted(
            b"%s-%d" % (t, i) for t in (b"A", b"B") for i in range(150)
        )

    asyncio.run(check())


def test_open_store_picks_the_implementation(tmp_path: Path) -> None:
    s = open_store(None, tmp_path / "data", busy_timeout=5.0, socket_timeout=1.0)
    assert isinstance(s, SQLiteStore)
    assert s.path == tmp_path / "data" / "learnserve.sqlite3"
    assert s.path.parent.is_dir()
    r = open_store("redis://127.0.0.1:1/0", tmp_path, socket_timeout=0.5, busy_timeout=5.0)
    assert isinstance(r, RedisStore) and r.socket_timeout == 0.5
    rc = open_store("redis://127.0.0.1:1", tmp_path, cluster=True, wait_replicas=1)
    assert isinstance(rc, RedisClusterStore) and rc.wait_replicas == 1
    assert type(open_store("redis://127.0.0.1:1", tmp_path, cluster=False)) is RedisStore
