"""An ``/update`` appended to the log that then fails to apply answers 422; a retry with
its ``Idempotency-Key`` must answer that same 422 (nothing was learned), whichever
worker serves it and whatever it forgot since: a restart, thousands of later
failures, a restore from a checkpoint past the entry. Both stores, real HTTP.

A worker refuses such a batch before the log (a dry run on its state), so an entry
that fails to apply comes from a worker whose state was behind (another worker's
entry landed in between) and that may have died before answering. The tests append
it to the store as that worker did (``append_once`` with the key and the hash of the
request's bytes), then send the request: the retry the client makes."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service.models.payload import encode_dense_payload
from service.settings import Settings
from service.store import SQLITE_FILENAME, Store
from service.store.redis import RedisStore, _keys
from service.store.sqlite import SQLiteStore
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, dense_model, start_learnserve

KEY = "Idempotency-Key"
# PA on a dense model of dim 4: the weights would become non-finite.
BAD = {"model": "m", "examples": [{"x": [1e200] * 4, "y": 1}]}
GOOD = {"model": "m", "examples": [{"x": [0.5, -1.0, 0.25, 2.0], "y": 1}]}
BAD_RAW = orjson.dumps(BAD)
BAD_ENTRY = encode_dense_payload(np.array([[1e200] * 4]), [1])
JSON = {"content-type": "application/json"}


def post_bad(c: httpx.Client, key: str | None = "bad") -> httpx.Response:
    return c.post("/update", content=BAD_RAW, headers={**JSON, **({KEY: key} if key else {})})


class Env:
    def __init__(self, kind: str, tmp_path: Path, redis_url: str | None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.redis_url = redis_url

    def settings(self, **kw: Any) -> Settings:
        return Settings(
            redis_url=self.redis_url,
            data_dir=str(self.tmp_path),
            checkpoint_every_updates=1,
            **kw,
        )

    def environ(self) -> dict[str, str]:
        env = {
            "LEARNSERVE_DATA_DIR": str(self.tmp_path),
            "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1",
        }
        if self.redis_url:
            env["LEARNSERVE_REDIS_URL"] = self.redis_url
        return env

    def store(self) -> Store:
        if self.redis_url:
            return RedisStore(self.redis_url)
        return SQLiteStore(self.tmp_path / SQLITE_FILENAME)

    def with_store(self, fn: Any) -> Any:
        async def main() -> Any:
            s = self.store()
            await s.open()
            try:
                return await fn(s)
            finally:
                await s.close()

        return asyncio.run(main())


@pytest.fixture(params=["sqlite", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    yield Env(request.param, tmp_path, url)


def first_failure(env: Env, c: httpx.Client) -> httpx.Response:
    """Create the model, send the bad batch with a key (422), then a good one, and wait
    for a checkpoint past both (the bad entry is then never replayed from the log)."""
    assert c.put("/models/m", json=dense_model(4, "pa")).status_code in (200, 201)
    assert post_bad(c).status_code == 422  # refused before the log: nothing recorded
    digest = hashlib.sha256(BAD_RAW).hexdigest()
    env.with_store(lambda s: s.append_once("m", BAD_ENTRY, "bad", digest, 1, 3600.0))
    r = post_bad(c)  # the client's retry: answered from the log's entry
    assert r.status_code == 422, r.text
    assert "could not be applied" in r.json()["detail"]["message"]
    assert c.post("/update", json=GOOD).status_code == 200
    deadline = time.monotonic() + 30
    while (c.get("/models/m").json()["last_checkpoint"] or {}).get("position", 0) < 2:
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.05)
    return r


def assert_replayed(first: httpx.Response, again: httpx.Response) -> None:
    assert again.status_code == first.status_code == 422, again.text
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"


def test_replay_after_a_restart_of_the_service(env: Env) -> None:
    port = free_port()
    proc = start_learnserve(port, env.environ())
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            first = first_failure(env, c)
            assert_replayed(first, post_bad(c))
            learned = c.get("/models/m").json()["examples_learned"]
    finally:
        stop_process(proc)
    proc = start_learnserve(port, env.environ())
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            d = c.get("/models/m").json()
            assert d["last_checkpoint"]["position"] >= 2 and d["version"] == 2
            assert_replayed(first, post_bad(c))
            d = c.get("/models/m").json()
            assert d["version"] == 2 and d["examples_learned"] == learned
    finally:
        stop_process(proc)
    # The store holds the answer with the key.
    assert env.with_store(lambda s: s.get_outcome("m", "bad")) is not None


def test_replay_after_thousands_of_later_failures(env: Env) -> None:
    """More later failures than a worker remembers (4,096) and than a checkpoint carries:
    the answer comes from the store."""
    with ServerThread(env.settings()) as srv, srv.client() as c:
        first = first_failure(env, c)

        async def later_failures(s: Store) -> None:  # entries of workers behind, as above
            for _ in range(16 * 257):
                await s.append("m", BAD_ENTRY)

        env.with_store(later_failures)
        deadline = time.monotonic() + 120
        while c.get("/models/m").json()["version"] < 2 + 16 * 257:
            assert time.monotonic() < deadline, "the later entries were not applied"
            time.sleep(0.1)
        assert c.get("/models/m").json()["entries_skipped"] == 1 + 16 * 257
        assert_replayed(first, post_bad(c))
        assert c.get("/models/m").json()["version"] == 2 + 16 * 257


@pytest.mark.parametrize("record", ["in-store", "lost"])
def test_replay_on_a_worker_restored_from_a_checkpoint(env: Env, record: str) -> None:
    """Another worker, started after the checkpoint, never applied the entry. With the
    store's record lost (it was unreachable when the entry failed), the failures the
    checkpoint carries answer."""
    with ServerThread(env.settings()) as a, a.client() as ca:
        first = first_failure(env, ca)
        assert env.with_store(lambda s: s.get_outcome("m", "bad")) is not None
        if record == "lost":
            erase_outcome(env)
        with ServerThread(env.settings()) as b, b.client() as cb:
            d = cb.get("/models/m").json()
            assert d["version"] == 2 and d["last_checkpoint"]["position"] == 2
            assert_replayed(first, post_bad(cb))
            assert cb.get("/models/m").json()["state_digest"] == d["state_digest"]
        assert_replayed(first, post_bad(ca))


def erase_outcome(env: Env) -> None:
    async def erase(s: Store) -> None:
        if isinstance(s, RedisStore):
            await s.r.hdel(_keys("m")["idemout"], "bad")
        elif isinstance(s, SQLiteStore):

            def q() -> None:
                with s._tx() as db:
                    db.execute("UPDATE idempotency SET outcome = NULL")

            await s._run(q)
        assert await s.get_outcome("m", "bad") is None

    env.with_store(erase)
