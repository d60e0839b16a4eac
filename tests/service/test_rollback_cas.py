"""Concurrent rollbacks over real HTTP, on SQLite and on a real Redis: each success is
one step back from a distinct version, and the losers are refused (409), never two
requests "rolling back" from the same version. With one server they all succeed one
after the other; with two servers sharing the store the store's compare-and-set
decides, and the losers get ``rollback_conflict``."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from learners import artifact
from service.settings import Settings
from service.store import open_store
from service.store.base import ActiveVersionChanged
from tests.learners.artifact_tools import valid_blobs
from tests.service.serving import ServerThread

VERSIONS = 12
ROLLBACKS = 10


def settings_for(store: str, request: pytest.FixtureRequest, tmp_path: Any) -> Settings:
    # Every version kept (retention 0): the rollbacks walk back through all of them.
    if store == "redis":
        return Settings(
            redis_url=request.getfixturevalue("redis_url"),
            data_dir=str(tmp_path),
            artifact_retention=0,
        )
    return Settings(data_dir=str(tmp_path), artifact_retention=0)


def distinct_copy(blob: bytes, i: int) -> bytes:
    """The same model with another meta: other bytes (a re-deploy of identical bytes is
    recognised and stores no new version)."""
    art = artifact.loads(blob)
    return artifact.dumps(art.kind, art.params, art.arrays, {**art.meta, "copy": i})


def rollback_all(urls: list[str]) -> list[httpx.Response]:
    """ROLLBACKS requests released together, spread over the servers."""
    start = threading.Barrier(ROLLBACKS)

    def one(i: int) -> httpx.Response:
        with httpx.Client(base_url=urls[i % len(urls)], timeout=60.0) as c:
            start.wait()
            return c.post("/models/r/rollback")

    with ThreadPoolExecutor(ROLLBACKS) as pool:
        return list(pool.map(one, range(ROLLBACKS)))


@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_concurrent_rollbacks_are_compare_and_set(
    store: str, servers: int, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    settings = settings_for(store, request, tmp_path)
    with ExitStack() as stack:
        srvs = [stack.enter_context(ServerThread(settings)) for _ in range(servers)]
        c = stack.enter_context(srvs[0].client())
        blob = valid_blobs()["lambdamart"]
        headers = {"content-type": "application/octet-stream"}
        for v in range(1, VERSIONS + 1):
            r = c.put("/models/r/artifact", content=distinct_copy(blob, v), headers=headers)
            assert r.status_code == 201 and r.json()["version"] == v, r.text
        for s in srvs:  # every server serves the model at version 12 (the other one
            with s.client() as sc:  # picks the deploys up by its catalog poll)
                deadline = time.monotonic() + 30
                while sc.get("/models/r").json()["version"] != VERSIONS:
                    assert time.monotonic() < deadline, "a server never saw the last deploy"
                    time.sleep(0.05)

        results = rollback_all([s.url for s in srvs])

        ok = [r.json() for r in results if r.status_code == 200]
        for r in results:
            if r.status_code != 200:
                assert r.status_code == 409, r.text
                detail = r.json()["detail"]
                assert detail["error"] == "rollback_conflict", detail
                assert (
                    "changed from" in detail["message"]
                    and "nothing was changed" in (detail["message"])
                )
        # each success went one step back from a distinct version: 12 -> 11 -> ...
        previous = sorted((b["previous"] for b in ok), reverse=True)
        assert previous == list(range(VERSIONS, VERSIONS - len(ok), -1)), ok
        assert all(b["version"] == b["previous"] - 1 for b in ok), ok
        if servers == 1:
            assert len(ok) == ROLLBACKS  # one process: they queue, none is refused
        final = VERSIONS - len(ok)
        assert c.get("/models/r/versions").json()["active"] == final
        for s in srvs:  # every server ends up serving the store's active version
            with s.client() as sc:
                deadline = time.monotonic() + 30
                while sc.get("/models/r").json()["version"] != final:
                    assert time.monotonic() < deadline, "a server kept a stale version"
                    time.sleep(0.05)


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_set_active_version_compare_and_set(
    store: str, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    settings = settings_for(store, request, tmp_path)

    async def main() -> None:
        s = open_store(settings.redis_url, settings.data_dir)
        await s.open()
        try:
            await s.create_model("m", {"kind": "lambdamart"})
            for _ in range(3):
                await s.add_artifact("m", b"blob", "lambdamart", "c")
            await s.set_active_version("m", 2, expected=3)
            with pytest.raises(ActiveVersionChanged) as info:
                await s.set_active_version("m", 1, expected=3)  # a stale expectation
            assert (info.value.expected, info.value.active) == (3, 2)
            assert await s.get_active_version("m") == 2
            await s.set_active_version("m", 1)  # no expectation: a plain switch
            assert await s.get_active_version("m") == 1
        finally:
            await s.close()

    asyncio.run(main())
