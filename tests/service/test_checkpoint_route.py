"""``POST /models/{name}/checkpoint`` says what happened, never a 503 while the store is
up (issue 32 item 5): a follower is written with its leader (it was a 503 whenever it had
entries since the leader's last checkpoint); when another worker holds the model's
checkpoint lease the answer says so; nothing new is "not needed". Real HTTP, a real
SQLite store, and a real Redis whose lease another member takes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from service.settings import Settings
from service.store.redis import RedisStore
from tests.service.serving import ServerThread

DENSE = {"kind": "dense", "dim": 3}


def learn(c: httpx.Client, name: str, n: int) -> None:
    ex = [{"x": [float(i % 3), 1.0, -1.0], "y": "a" if i % 2 else "b"} for i in range(n)]
    r = c.post(f"/models/{name}/update", json={"examples": ex})
    assert r.status_code == 200, r.text


def checkpoint(c: httpx.Client, name: str) -> dict[str, Any]:
    r = c.post(f"/models/{name}/checkpoint")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_a_follower_is_checkpointed_with_its_leader(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), checkpoint_every_updates=10_000)
    with ServerThread(settings) as srv, srv.client() as c:
        assert c.put("/models/lead", json={"algorithm": "arow", "features": DENSE}).is_success
        body = {"algorithm": "pa1", "features": DENSE, "follows": "lead"}
        assert c.put("/models/chal", json=body).is_success
        for _ in range(3):
            learn(c, "lead", 5)
        got = checkpoint(c, "chal")
        assert got["written"] is True and got["position"] == 3, got
        assert checkpoint(c, "lead")["position"] == 3  # the leader's went with it
        again = checkpoint(c, "chal")
        assert again["written"] is False and "nothing new" in again["note"], again


def test_another_workers_lease_is_said_not_a_503(redis_url: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), redis_url=redis_url,
                        checkpoint_every_updates=10_000)  # fmt: skip
    with ServerThread(settings) as srv, srv.client() as c:
        assert c.put("/models/m", json={"algorithm": "arow", "features": DENSE}).is_success
        learn(c, "m", 4)

        async def take() -> bool:  # another worker's member id takes the lease
            store = RedisStore(redis_url)
            await store.open()
            try:
                return await store.try_lease("m", "checkpoint", "another-worker", 30.0)
            finally:
                await store.close()

        assert asyncio.run(take())
        got = checkpoint(c, "m")
        assert got["written"] is False and "lease" in got["note"], got
