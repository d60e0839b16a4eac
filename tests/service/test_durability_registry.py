"""Registry-level durability: an entry that cannot be applied is skipped by every
replica alike (its request gets a 422); a replica behind a trimmed log reloads the
checkpoint. Replicas (and restores) stay bit-identical."""

from __future__ import annotations

import asyncio

import pytest

from learners.features import FeatureSpec
from service.api.errors import http_status
from service.engine.facade import Engine
from service.errors import ServiceError
from service.models.kinds import adapter_class
from service.models.payload import encode_payload
from service.settings import Settings
from service.store import open_store

BODY = {"algorithm": "arow", "features": {"kind": "dense", "dim": 3}}


def test_unappliable_entry_is_skipped_deterministically(tmp_path) -> None:
    async def main() -> None:
        settings = Settings(data_dir=str(tmp_path), checkpoint_every_updates=1000)
        store = open_store(None, tmp_path)
        await store.open()
        replica_store = open_store(None, tmp_path)  # a second "worker" on the same file
        await replica_store.open()
        try:
            a = Engine(store, settings)
            await a.restore_all()
            cls = adapter_class("linear")
            h, created = await a.create("m", cls, cls.normalize_config(BODY, settings))
            assert created
            good = {"examples": [{"x": [1, 2, 3], "y": "p"}, {"x": [-1, 0, 2], "y": "n"}]}
            p1, _ = h.adapter.parse_update(good, settings)
            assert await a.submit_update(h, p1) == 1
            before = h.adapter.state_digest()
            # Passed validation (say, a bug elsewhere) but fails inside the learner:
            # 2 rows, 1 label.
            spec = FeatureSpec.dense(3)
            poison = encode_payload(spec.encode([[1, 1, 1], [2, 2, 2]]), ["p"])
            with pytest.raises(ServiceError) as e:
                await a.submit_update(h, poison)
            assert http_status(e.value) == 422 and "could not be applied" in e.value.message
            assert h.version == 2 and h.entries_skipped == 1
            assert h.adapter.state_digest() == before  # nothing half-applied
            assert await a.submit_update(h, p1) == 3

            b = Engine(replica_store, settings)  # replays the same log from scratch
            await b.restore_all()
            hb = b.get("m")
            assert hb.version == 3 and hb.entries_skipped == 1
            assert hb.adapter.state_digest() == h.adapter.state_digest()
            assert hb.examples_learned == h.examples_learned == 4
        finally:
            await store.close()
            await replica_store.close()

    asyncio.run(main())


def test_lagging_replica_reloads_the_checkpoint_when_the_log_was_trimmed(tmp_path) -> None:
    """A replica behind a trimmed log reloads the newest checkpoint and catches up."""

    async def main() -> None:
        settings = Settings(
            data_dir=str(tmp_path), checkpoint_every_updates=10**6, log_retain_entries=2
        )
        s1, s2 = open_store(None, tmp_path), open_store(None, tmp_path)
        await s1.open()
        await s2.open()
        try:
            a, b = Engine(s1, settings), Engine(s2, settings)
            await a.restore_all()
            cls = adapter_class("linear")
            h, _ = await a.create("m", cls, cls.normalize_config(BODY, settings))
            await b.restore_all()
            hb = b.get("m")
            assert hb.version == 0
            spec = FeatureSpec.dense(3)
            for i in range(12):
                x = [[float(i % 3), 1.0, -float(i % 2)], [1.0, float(i), 0.5]]
                await a.submit_update(h, encode_payload(spec.encode(x), ["p", "n"]))
            assert await a.checkpoint(h)  # at 12, log trimmed up to 10
            entries = await s1.read_log("m", 0, 100)
            assert [e.position for e in entries] == [11, 12]
            await b.catch_up(hb)
            assert hb.version == 12
            assert hb.adapter.state_digest() == h.adapter.state_digest()
            assert hb.examples_learned == h.examples_learned == 24
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_replica_behind_a_log_trimmed_to_nothing_reloads_the_checkpoint(
    tmp_path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Issue 32: the log trimmed wholly (a checkpoint at its last entry, nothing kept):
    a replica behind it reads no entry past its version, yet the store is ahead. It
    reloads the checkpoint; it used to stay where it was until the model's next update
    (a promotion that was the last entry never reached it)."""
    url = request.getfixturevalue("redis_url") if backend == "redis" else None

    async def main() -> None:
        settings = Settings(
            data_dir=str(tmp_path), checkpoint_every_updates=10**6, log_retain_entries=0
        )
        s1, s2 = open_store(url, tmp_path), open_store(url, tmp_path)
        await s1.open()
        await s2.open()
        try:
            a, b = Engine(s1, settings), Engine(s2, settings)
            await a.restore_all()
            cls = adapter_class("linear")
            h, _ = await a.create("m", cls, cls.normalize_config(BODY, settings))
            spec = FeatureSpec.dense(3)
            x = [[1.0, 1.0, -1.0], [1.0, 2.0, 0.5]]
            await a.submit_update(h, encode_payload(spec.encode(x), ["p", "n"]))
            await b.restore_all()
            hb = b.get("m")
            assert hb.version == 1
            await a.submit_update(h, encode_payload(spec.encode(x[::-1]), ["p", "n"]))
            assert await a.checkpoint(h)  # at 2, the log trimmed up to 2: empty
            assert await s1.read_log("m", 0, 100) == []
            assert await s1.last_position("m") == 2
            await b.catch_up(hb)
            assert hb.version == 2
            assert hb.adapter.state_digest() == h.adapter.state_digest()
        finally:
            await s1.close()
            await s2.close()

    asyncio.run(main())


def test_a_model_that_cannot_be_restored_does_not_block_the_others(tmp_path) -> None:
    async def main() -> None:
        settings = Settings(data_dir=str(tmp_path))
        store = open_store(None, tmp_path)
        await store.open()
        try:
            a = Engine(store, settings)
            await a.restore_all()
            cls = adapter_class("linear")
            config = cls.normalize_config(BODY, settings)
            for name in ("good", "broken"):
                h, _ = await a.create(name, cls, config)
                p, _ = h.adapter.parse_update({"examples": [{"x": [1, 2, 3], "y": 1}]}, settings)
                await a.submit_update(h, p)
            await store.put_checkpoint("broken", 1, b"LSCK\x02\x00\x00\x00{}not an artifact")

            b = Engine(store, settings)
            await b.restore_all()
            assert b.ready and b.get("good").version == 1
            assert "broken" in b.failed
            with pytest.raises(ServiceError) as e:
                await b.find("broken")
            assert http_status(e.value) == 503 and e.value.code == "model_unavailable"
            await b.delete("broken")  # an operator can still remove it
            assert "broken" not in b.failed
            with pytest.raises(ServiceError) as e:
                await b.find("broken")
            assert http_status(e.value) == 404
        finally:
            await store.close()

    asyncio.run(main())
