"""Regression tests for the review findings on replication and status codes.

Two registries on one SQLite file stand in for two workers (as in
test_durability_registry.py); the store-level checks run on SQLite and Redis.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from learners.features import FeatureSpec
from service.api.errors import http_headers, http_status
from service.engine.apply_loop import Replicator
from service.engine.facade import Engine
from service.errors import ServiceError
from service.models.kinds import adapter_class
from service.models.payload import encode_payload
from service.settings import Settings
from service.store import open_store
from service.store.base import Store, StoreUnavailable

BODY = {"algorithm": "arow", "features": {"kind": "dense", "dim": 3}}
SPEC = FeatureSpec.dense(3)


def payload(i: int) -> bytes:
    x = [[float(i % 3), 1.0, -float(i % 2)], [1.0, float(i) / 3, 0.5]]
    return encode_payload(SPEC.encode(x), ["p", "n"])


async def two_workers(tmp_path: Any, **kw: Any) -> tuple[Engine, Engine, Store, Store]:
    settings = Settings(data_dir=str(tmp_path), catalog_poll_seconds=0.05, **kw)
    s1, s2 = open_store(None, tmp_path), open_store(None, tmp_path)
    await s1.open()
    await s2.open()
    a, b = Engine(s1, settings), Engine(s2, settings)
    await a.restore_all()
    await b.restore_all()
    return a, b, s1, s2


async def until(cond: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------ A: re-created models
async def re_created_behind_b(a: Engine, b: Engine, old_updates: int) -> tuple[Any, Any]:
    """A creates m and sends ``old_updates`` updates, B holds m at that version; then A
    deletes m, creates it again with the same config and sends 3 updates. (B's handle of
    the old m, A's handle of the new one.)"""
    cls = adapter_class("linear")
    config = cls.normalize_config(BODY, a.settings)
    h, _ = await a.create("m", cls, config)
    for i in range(old_updates):
        await a.submit_update(h, payload(100 + i))
    await b.sync_catalog()
    hb = b.get("m")
    await b.catch_up(hb)
    assert hb.version == old_updates
    old_generation = hb.generation
    assert old_generation
    await a.delete("m")
    h, created = await a.create("m", cls, config)
    assert created and h.version == 0 and h.generation != old_generation
    for i in range(3):
        await a.submit_update(h, payload(i))
    return hb, h


@pytest.mark.parametrize("old_updates", [2, 5])
def test_replica_reloads_a_model_deleted_and_recreated_elsewhere(tmp_path, old_updates) -> None:
    """B holds m at version 2 (below the new log's end) or 5 (above it); A deletes and
    re-creates m with the same config and sends 3 updates: B ends with A's state."""

    async def main() -> None:
        a, b, s1, s2 = await two_workers(tmp_path)
        rep = Replicator(b)
        try:
            _, h = await re_created_behind_b(a, b, old_updates)
            want = h.adapter.state_digest()

            rep.start()

            async def converged() -> bool:
                hb = b.models.get("m")
                return hb is not None and hb.version == 3 and hb.adapter.state_digest() == want

            await until(converged)
            assert b.get("m").generation == h.generation
            assert b.get("m").examples_learned == h.examples_learned == 6
        finally:
            await rep.stop()
            await s1.close()
            await s2.close()

    asyncio.run(main())


def test_catch_up_across_a_re_creation_takes_the_new_generation_and_loses_nothing(
    tmp_path,
) -> None:
    """B's copy at version 2 catches up (before any catalog sync) with the log of the
    model A deleted and created again with the same config: its next entry breaks the
    chain of heads, which is not a lost tail. B ends with A's state under A's new
    generation, and no entry is counted lost."""
    from service.observability import metrics as M

    async def main() -> None:
        a, b, s1, s2 = await two_workers(tmp_path)
        try:
            lost = M.LOG_ENTRIES_LOST.labels("m")._value.get()
            hb, h = await re_created_behind_b(a, b, 2)
            await b.catch_up(hb)  # the same handle: no catalog sync in between
            assert hb.generation == h.generation
            assert hb.version == 3
            assert hb.adapter.state_digest() == h.adapter.state_digest()
            assert M.LOG_ENTRIES_LOST.labels("m")._value.get() == lost
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


def test_put_and_update_on_a_stale_replica_use_the_new_model(tmp_path) -> None:
    """Without waiting for a catalog sync: PUT with the same config on B, and an update
    sent through B's old handle, both land on the re-created model."""

    async def main() -> None:
        a, b, s1, s2 = await two_workers(tmp_path)
        try:
            cls = adapter_class("linear")
            config = cls.normalize_config(BODY, a.settings)
            h, _ = await a.create("m", cls, config)
            for i in range(4):
                await a.submit_update(h, payload(100 + i))
            hb, created = await b.create("m", cls, config)
            assert not created and hb.version == 4

            await a.delete("m")
            h, _ = await a.create("m", cls, config)
            await a.submit_update(h, payload(0))
            # PUT through B (idempotent, same config) must not keep the old copy.
            hb2, created = await b.create("m", cls, config)
            assert not created and hb2 is not hb
            assert hb2.version == 1 and hb2.adapter.state_digest() == h.adapter.state_digest()

            await a.delete("m")
            h, _ = await a.create("m", cls, config)
            await a.submit_update(h, payload(0))
            # B still holds the previous generation at version 1; its update gets
            # position 2 of the new log (> 1, so the position alone cannot tell).
            b.registry.epoch = await s2.catalog_epoch()  # B has not noticed anything yet
            assert b.get("m") is hb2
            pos = await b.submit_update(hb2, payload(1))
            assert pos == 2
            await a.catch_up(h)
            await b.sync_catalog()
            hb3 = b.get("m")
            await b.catch_up(hb3)
            assert hb3.version == h.version == 2
            assert hb3.adapter.state_digest() == h.adapter.state_digest()

            # Old handle at version 2 and a new log at 1: the update's position (1)
            # is <= the handle's version, so B reloads before answering.
            await a.delete("m")
            h, _ = await a.create("m", cls, config)
            b.registry.epoch = await s2.catalog_epoch()
            assert await b.submit_update(hb3, payload(5)) == 1
            hb4 = b.get("m")
            assert hb4 is not hb3 and hb4.version == 1
            await a.catch_up(h)
            assert hb4.adapter.state_digest() == h.adapter.state_digest()
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_store_generation_is_new_at_every_create(kind, tmp_path, request) -> None:
    url = request.getfixturevalue("redis_url") if kind == "redis" else None

    async def main() -> None:
        s = open_store(url, tmp_path)
        await s.open()
        try:
            assert await s.get_generation("m") is None
            await s.create_model("m", {"kind": "x"})
            g1 = await s.get_generation("m")
            assert g1
            assert await s.create_model("m", {"kind": "x"}) is False  # still idempotent
            assert await s.get_generation("m") == g1
            assert await s.get_config("m") == {"kind": "x"}  # not part of the config
            await s.create_model("n", {"kind": "y"})
            assert (await s.list_generations())["m"] == g1
            await s.delete_model("m")
            assert await s.get_generation("m") is None
            assert "m" not in await s.list_generations()
            await s.create_model("m", {"kind": "x"})
            g2 = await s.get_generation("m")
            assert g2 and g2 != g1
        finally:
            await s.close()

    asyncio.run(main())


# ------------------------------------------------------------------ B: one broken model
def test_a_model_whose_log_cannot_be_applied_does_not_stop_replication(tmp_path) -> None:
    """B must reload "broken" from a corrupt checkpoint (its log was trimmed): the
    apply-loop reports it and keeps replicating "good" and syncing the catalog."""

    async def main() -> None:
        a, b, s1, s2 = await two_workers(tmp_path)
        rep = Replicator(b)
        try:
            cls = adapter_class("linear")
            config = cls.normalize_config(BODY, a.settings)
            hbroken, _ = await a.create("broken", cls, config)  # first in B's loop
            hgood, _ = await a.create("good", cls, config)
            await b.sync_catalog()
            assert b.get("broken").version == 0
            for i in range(3):
                await a.submit_update(hbroken, payload(i))
            await s1.put_checkpoint("broken", 3, b"LSCK\x02\x00\x00\x00{}not an artifact")
            await s1.trim_log("broken", 3)
            await a.submit_update(hbroken, payload(3))  # log = [4]: B needs the checkpoint

            rep.start()
            for i in range(3):
                await a.submit_update(hgood, payload(i))
            h3, _ = await a.create("later", cls, config)
            await a.submit_update(h3, payload(0))

            async def replicated() -> bool:
                g, later = b.models.get("good"), b.models.get("later")
                return g is not None and g.version == 3 and later is not None and later.version == 1

            await until(replicated)
            assert b.get("good").adapter.state_digest() == hgood.adapter.state_digest()
            assert "broken" in b.failed and b.get("broken").version == 0
            assert b.failed["broken"].startswith("ArtifactError:")
            # Backing off: the broken model is not retried on every loop turn.
            assert rep._failing["broken"][1] > time.monotonic()

            # Repaired (a good checkpoint covering the log): B recovers on a retry.
            await a.checkpoint(hbroken)
            rep._failing["broken"] = (b.get("broken"), 0.0, 1.0)  # retry now

            async def recovered() -> bool:
                return "broken" not in b.failed and b.get("broken").version == 4

            await until(recovered)
            assert b.get("broken").adapter.state_digest() == hbroken.adapter.state_digest()
        finally:
            await rep.stop()
            await s1.close()
            await s2.close()

    asyncio.run(main())


# ------------------------------------------------------------------ C: deploy
def small_ranker(seed: int = 0) -> bytes:
    import numpy as np

    from learners.ranking.lambdamart import LambdaMART

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4))
    y = np.clip((X[:, 0] * 2 + 2).round(), 0, 4).astype(int)
    m = LambdaMART(n_estimators=3, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 3)
    blob: bytes = m.to_bytes()
    return blob


def test_deploy_validates_and_loads_off_the_event_loop(tmp_path, monkeypatch) -> None:
    import threading

    import service.engine.batch_versions as reg_mod

    threads: list[threading.Thread] = []
    real = reg_mod.artifact_loads

    def spy(blob: bytes, **kw: Any) -> Any:
        threads.append(threading.current_thread())
        return real(blob, **kw)

    monkeypatch.setattr(reg_mod, "artifact_loads", spy)

    async def main() -> None:
        a, _b, s1, s2 = await two_workers(tmp_path)
        try:
            h, created, stored = await a.deploy("offloop", small_ranker())
            assert stored
            assert created and h.version == 1
            assert threads and all(t is not threading.main_thread() for t in threads)
            with pytest.raises(ServiceError) as e:
                await a.deploy("offloop", b"LSAF" + b"\0" * 40)
            assert http_status(e.value) == 422 and e.value.field == "artifact"
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_artifact_too_large_for_the_store_is_413(kind, tmp_path, request, monkeypatch) -> None:
    url = request.getfixturevalue("redis_url") if kind == "redis" else None
    assert Settings().max_artifact_bytes == 256 << 20  # below Redis's 512 MB value limit
    blob = small_ranker()

    async def main() -> None:
        store = open_store(url, tmp_path)
        await store.open()
        try:
            if kind == "redis":
                import service.store.redis_keys as redis_keys

                monkeypatch.setattr(redis_keys, "_MAX_VALUE", len(blob) - 1)
            else:
                import sqlite3

                db = store._db  # type: ignore[attr-defined]
                await store._run(db.setlimit, sqlite3.SQLITE_LIMIT_LENGTH, len(blob) - 1)  # type: ignore[attr-defined]
            reg = Engine(store, Settings(data_dir=str(tmp_path)))
            await reg.restore_all()
            with pytest.raises(ServiceError) as e:
                await reg.deploy("big", blob)
            assert http_status(e.value) == 413 and e.value.field == "artifact"
            assert "big" not in reg.models
            assert await store.list_artifacts("big") == []
        finally:
            await store.close()

    asyncio.run(main())


# ------------------------------------------------------------------ D: min_version
def test_min_version_ahead_of_the_log_is_refused_at_once(tmp_path) -> None:
    async def main() -> None:
        a, b, s1, s2 = await two_workers(tmp_path)
        try:
            cls = adapter_class("linear")
            h, _ = await a.create("m", cls, cls.normalize_config(BODY, a.settings))
            for i in range(3):
                await a.submit_update(h, payload(i))
            await b.sync_catalog()
            hb = b.get("m")
            assert hb.version == 3
            async with hb.lock:  # an unreachable version never needs the model's lock
                with pytest.raises(ServiceError) as e:
                    await asyncio.wait_for(b.wait_for_version(hb, 4, 30.0), 5.0)
            assert http_status(e.value) == 422 and e.value.field == "min_version"
            assert "ahead of the model's log (last position 3)" in e.value.message

            await a.submit_update(h, payload(3))
            assert await b.wait_for_version(hb, 4, 5.0)  # exists: applied on demand
            assert hb.version == 4
            assert hb.adapter.state_digest() == h.adapter.state_digest()

            # Entry 5 exists, but another task holds the lock (applying, say): wait
            # for the apply, not for the lock.
            await a.submit_update(h, payload(4))
            async with hb.lock:
                waiter = asyncio.create_task(b.wait_for_version(hb, 5, 30.0))
                await asyncio.sleep(0.05)
                assert not waiter.done()
                await b.catch_up_locked(hb)
                assert await asyncio.wait_for(waiter, 5.0) is True
            assert hb.version == 5
            # ... and gives up after its timeout when nothing is applied.
            await a.submit_update(h, payload(5))
            async with hb.lock:
                assert await b.wait_for_version(hb, 6, 0.1) is False
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


# ------------------------------------------------------------------ E: status codes
def test_create_maps_a_store_outage_during_restore_to_503(tmp_path, monkeypatch) -> None:
    async def main() -> None:
        a, _b, s1, s2 = await two_workers(tmp_path)
        try:
            cls = adapter_class("linear")
            config = cls.normalize_config(BODY, a.settings)

            async def down(name: str) -> None:
                raise StoreUnavailable("sqlite: disk I/O error")

            monkeypatch.setattr(s1, "get_checkpoint", down)
            with pytest.raises(ServiceError) as e:
                await a.create("m", cls, config)
            assert http_status(e.value) == 503 and http_headers(e.value) == {"Retry-After": "1"}
            monkeypatch.undo()
            h, created = await a.create("m", cls, config)  # created before: 200 now
            assert not created and a.get("m") is h
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


def test_activating_a_corrupt_stored_artifact_keeps_the_active_version(tmp_path) -> None:
    async def main() -> None:
        a, _b, s1, s2 = await two_workers(tmp_path)
        try:
            blob = small_ranker()
            await a.deploy("corrupt", blob)
            h2, _, _ = await a.deploy("corrupt", small_ranker(seed=1))
            assert h2.version == 2

            def corrupt() -> None:
                s1._db.execute(  # type: ignore[attr-defined]
                    "UPDATE artifacts SET blob = ? WHERE name = 'corrupt' AND version = 1",
                    (blob[:-1] + bytes([blob[-1] ^ 1]),),
                )

            await s1._run(corrupt)  # type: ignore[attr-defined]
            with pytest.raises(ServiceError) as e:
                await a.activate("corrupt", 1)
            assert http_status(e.value) == 409 and e.value.field == "version"
            assert "checksum" in e.value.message and "version 2 stays active" in e.value.message
            assert a.get("corrupt") is h2
            assert await s1.get_active_version("corrupt") == 2
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


class _CommitFailsOnce:
    """A sqlite3 connection whose next COMMIT fails (disk full, I/O error...)."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.fail = True

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.fail:
            self.fail = False
            raise sqlite3.OperationalError("disk I/O error")
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def test_sqlite_writes_work_again_after_a_failed_commit(tmp_path) -> None:
    async def main() -> None:
        store = open_store(None, tmp_path)
        await store.open()
        try:
            await store.create_model("m", {"kind": "x"})
            real = store._db  # type: ignore[attr-defined]
            store._db = _CommitFailsOnce(real)  # type: ignore[attr-defined]
            with pytest.raises(StoreUnavailable):
                await store.append("m", b"lost")
            assert await store.append("m", b"kept") == 1  # not "within a transaction"
            await store.create_model("n", {"kind": "y"})
            store._db = real  # type: ignore[attr-defined]
            assert [e.payload for e in await store.read_log("m", 0)] == [b"kept"]
        finally:
            await store.close()

    asyncio.run(main())


def test_http_checkpoint_of_a_batch_model_and_unreachable_min_version(tmp_path) -> None:
    from tests.service.serving import ServerThread

    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        r = c.put(
            "/models/cp_batch/artifact",
            content=small_ranker(),
            headers={"content-type": "application/octet-stream"},
        )
        assert r.status_code == 201, r.text
        r = c.post("/models/cp_batch/checkpoint")
        assert r.status_code == 409 and r.json()["detail"]["error"] == "not_online"

        assert c.put("/models/mv_far", json=BODY).status_code == 201
        r = c.post(
            "/predict",
            json={"model": "mv_far", "instances": [{"x": [1, 2, 3]}], "min_version": 10**9},
        )
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == "min_version"
        assert "last position 0" in r.json()["detail"]["message"]
