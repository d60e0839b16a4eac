"""An append given the payload's digest (the registry hashes its entry once, for the
store and for its own chain check) stores what an append without one stores."""

from __future__ import annotations

import asyncio

import pytest

from service.store import chain_head
from service.store.base import payload_digest
from service.store.redis import RedisStore
from service.store.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "redis"])
def store_factory(request, tmp_path):
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "s.sqlite3")
    url = request.getfixturevalue("redis_url")
    return lambda: RedisStore(url)


def test_chain_head_of_a_digest_is_that_of_the_payload() -> None:
    for prev in ("", "ab" * 20):
        for payload in (b"", b"one", bytes(range(256)) * 100):
            assert chain_head(prev, payload, payload_digest(payload)) == chain_head(prev, payload)


def test_append_with_digest_stores_the_same_chain(store_factory) -> None:
    payloads = [b"one", b"two", bytes(range(256)) * 100, b"four"]

    async def main() -> None:
        store = store_factory()
        await store.open()
        try:
            heads = {}
            for name, given in (("plain", False), ("given", True)):
                await store.create_model(name, {"kind": "linear"})
                got = []
                for p in payloads:
                    digest = payload_digest(p) if given else None
                    got.append(await store.append_entry(name, p, digest))
                entries = await store.read_log(name, 0)
                assert [e.payload for e in entries] == payloads
                assert [e.head for e in entries] == [h for _, h in got]
                heads[name] = got
            assert heads["given"] == heads["plain"]
            expect, head = [], ""
            for i, p in enumerate(payloads):
                head = chain_head(head, p)
                expect.append((i + 1, head))
            assert heads["given"] == expect
        finally:
            await store.close()

    asyncio.run(main())
