"""``Idempotency-Key`` on ``POST /update`` over real HTTP, on SQLite and on a real
redis-server: a retried batch is appended (and learned) exactly once."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.settings import Settings
from service.store import SQLITE_FILENAME, Store
from service.store.redis import RedisStore
from service.store.sqlite import SQLiteStore
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, dense_model, start_learnserve

JSON = {"content-type": "application/json"}

DIM = 4
KEY = "Idempotency-Key"


def body(model: str, seed: int, n: int = 5) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, DIM)) + y[:, None]
    return {"model": model, "examples": [{"x": a, "y": int(b)} for a, b in zip(X.tolist(), y)]}


def make(c: httpx.Client, name: str) -> None:
    r = c.put(f"/models/{name}", json=dense_model(DIM, "arow"))
    assert r.status_code in (200, 201), r.text


def info(c: httpx.Client, name: str) -> tuple[int, str]:
    d = c.get(f"/models/{name}").json()
    return d["version"], d["state_digest"]


class Stack:
    """A service (in-process uvicorn) and a way to reach its store directly."""

    def __init__(self, kind: str, srv: ServerThread, new_store: Any) -> None:
        self.kind = kind
        self.srv = srv
        self.new_store = new_store

    def store(self, fn: Any) -> Any:
        async def main() -> Any:
            s: Store = self.new_store()
            await s.open()
            try:
                return await fn(s)
            finally:
                await s.close()

        return asyncio.run(main())


@pytest.fixture(params=["sqlite", "redis"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        settings = Settings(redis_url=url, data_dir=str(tmp_path))

        def new_store() -> Store:
            return RedisStore(url)
    else:
        settings = Settings(data_dir=str(tmp_path))

        def new_store() -> Store:
            return SQLiteStore(tmp_path / SQLITE_FILENAME)

    with ServerThread(settings) as srv:
        yield Stack(request.param, srv, new_store)


def test_same_key_twice_appends_once(stack: Stack) -> None:
    with stack.srv.client() as c:
        make(c, "m")
        make(c, "ref")
        r1 = c.post("/update", json=body("m", 1), headers={KEY: "batch-1"})
        assert r1.status_code == 200, r1.text
        first = r1.json()
        assert first.pop("correct") in range(6)
        assert first == {"model": "m", "applied": 5, "version": 1}
        assert "idempotent-replayed" not in r1.headers
        for _ in range(2):
            r2 = c.post("/update", json=body("m", 1), headers={KEY: "batch-1"})
            assert r2.status_code == 200, r2.text
            assert r2.json() == r1.json()
            assert r2.headers["idempotent-replayed"] == "true"
        # Learned once: the state equals that of a model given the batch once.
        assert c.post("/update", json=body("ref", 1)).json()["version"] == 1
        assert info(c, "m") == info(c, "ref")
        assert stack.store(lambda s: s.last_position("m")) == 1
        # A new key, and no key at all, append as usual.
        r3 = c.post("/update", json=body("m", 1), headers={KEY: "batch-2"})
        assert r3.json()["version"] == 2 and "idempotent-replayed" not in r3.headers
        r4 = c.post("/update", json=body("m", 2))
        assert r4.json()["version"] == 3 and "idempotent-replayed" not in r4.headers
        # The same key on another model is another key.
        r5 = c.post("/update", json=body("ref", 1), headers={KEY: "batch-1"})
        assert r5.json()["version"] == 2 and "idempotent-replayed" not in r5.headers


def test_same_key_other_body_is_409_and_changes_nothing(stack: Stack) -> None:
    with stack.srv.client() as c:
        make(c, "m")
        assert c.post("/update", json=body("m", 1), headers={KEY: "k"}).status_code == 200
        before = info(c, "m")
        r = c.post("/update", json=body("m", 2), headers={KEY: "k"})
        assert r.status_code == 409, r.text
        d = r.json()["detail"]
        assert d["error"] == "idempotency_key_reused"
        assert d["field"] == KEY and KEY in d["message"]
        assert "idempotent-replayed" not in r.headers
        assert info(c, "m") == before
        assert stack.store(lambda s: s.last_position("m")) == 1
        # The original body with the key still replays.
        r = c.post("/update", json=body("m", 1), headers={KEY: "k"})
        assert r.status_code == 200 and r.headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize(
    "value",
    ["", "x" * 201, "caf\xe9", "tab\there"],
    ids=["empty", "too-long", "non-ascii", "control"],
)
def test_bad_key_is_422_naming_the_header(stack: Stack, value: str) -> None:
    with stack.srv.client() as c:
        make(c, "m")
        # httpx refuses to send some of these as str: send the raw bytes.
        r = c.post("/update", json=body("m", 1), headers={KEY: value.encode("latin-1")})
        assert r.status_code == 422, r.text
        d = r.json()["detail"]
        assert d["error"] == "invalid_input" and d["field"] == KEY and KEY in d["message"]
        assert info(c, "m")[0] == 0
        # 200 printable characters (spaces and punctuation included) are fine.
        ok = ("a ~!z09" * 40)[:199] + "z"
        r = c.post("/update", json=body("m", 1), headers={KEY: ok})
        assert r.status_code == 200, r.text


def test_key_after_delete_and_recreate_is_fresh(stack: Stack) -> None:
    with stack.srv.client() as c:
        make(c, "m")
        for i in range(3):
            c.post("/update", json=body("m", i), headers={KEY: f"k{i}"})
        assert c.delete("/models/m").status_code == 204
        make(c, "m")
        # Another body with an old key: no 409, a fresh append at position 1.
        r = c.post("/update", json=body("m", 9), headers={KEY: "k0"})
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 1 and "idempotent-replayed" not in r.headers
        r = c.post("/update", json=body("m", 1), headers={KEY: "k1"})
        assert r.json()["version"] == 2 and "idempotent-replayed" not in r.headers


def test_retry_after_the_appending_worker_died(stack: Stack) -> None:
    """A worker appended the batch, then died before answering (or applying it): the
    client's retry, here served by another process, answers the recorded version and
    learns the batch once, from the log."""
    with stack.srv.client() as c:
        make(c, "probe")
        make(c, "m")
        assert c.post("/update", json=body("probe", 7)).status_code == 200
        # The exact bytes the service logs for this body (same config, same encoding).

        async def payload(s: Store) -> bytes:
            return (await s.read_log("probe", 0))[0].payload

        p = stack.store(payload)
        # The key records a hash of the request's bytes (whichever parse path reads it).
        raw = json.dumps(body("m", 7)).encode()
        digest = hashlib.sha256(raw).hexdigest()
        got = stack.store(lambda s: s.append_once("m", p, "lost", digest, 5, 3600.0))
        assert got == (1, 5, False)
        r = c.post("/update", content=raw, headers={KEY: "lost", **JSON})
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer.pop("correct") in range(6)  # applied here by the apply-loop
        assert answer == {"model": "m", "applied": 5, "version": 1}
        assert r.headers["idempotent-replayed"] == "true"
        assert info(c, "m")[1] == info(c, "probe")[1]
        assert stack.store(lambda s: s.last_position("m")) == 1


def test_retry_after_a_redis_outage_is_applied_once(redis_server, redis_url, tmp_path) -> None:
    settings = Settings(redis_url=redis_url, data_dir=str(tmp_path))
    with ServerThread(settings) as srv, srv.client(timeout=15) as c:
        make(c, "m")
        make(c, "ref")
        assert c.post("/update", json=body("m", 0), headers={KEY: "k0"}).status_code == 200
        redis_server.stop()
        try:
            r = c.post("/update", json=body("m", 1), headers={KEY: "k1"})
            assert r.status_code == 503, r.text
        finally:
            redis_server.start()
        # The client retries with the same key until it gets an answer, then once more
        # (as if that answer had been lost too).
        answers = []
        deadline = time.monotonic() + 20
        while True:
            r = c.post("/update", json=body("m", 1), headers={KEY: "k1"})
            if r.status_code == 200:
                answers.append(r)
                break
            assert r.status_code == 503 and time.monotonic() < deadline, r.text
            time.sleep(0.1)
        answers.append(c.post("/update", json=body("m", 1), headers={KEY: "k1"}))
        assert [a.json()["version"] for a in answers] == [2, 2]
        assert answers[-1].headers["idempotent-replayed"] == "true"
        # k0 is remembered across the restart (the AOF holds it with the entry).
        r = c.post("/update", json=body("m", 0), headers={KEY: "k0"})
        assert r.json()["version"] == 1 and r.headers["idempotent-replayed"] == "true"
        for i in (0, 1):
            assert c.post("/update", json=body("ref", i)).status_code == 200
        assert info(c, "m") == info(c, "ref")


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_two_workers_same_key_concurrently_append_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = {"LEARNSERVE_DATA_DIR": str(tmp_path)}
    if kind == "redis":
        env["LEARNSERVE_REDIS_URL"] = request.getfixturevalue("redis_url")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_learnserve(port, env, workers=2)
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            make(c, "m")
        workers: set[str] = set()
        rounds, per_round = 6, 10
        for k in range(rounds):
            barrier = threading.Barrier(per_round)
            results: list[httpx.Response] = []

            def send(k: int = k, barrier: threading.Barrier = barrier) -> None:
                # A new connection per request: the kernel spreads them over both workers.
                with httpx.Client(base_url=url, timeout=60) as tc:
                    barrier.wait()
                    r = tc.post("/update", json=body("m", k), headers={KEY: f"round-{k}"})
                    results.append(r)

            threads = [threading.Thread(target=send) for _ in range(per_round)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert len(results) == per_round
            assert all(r.status_code == 200 for r in results), [r.text for r in results]
            assert {r.json()["version"] for r in results} == {k + 1}
            fresh = [r for r in results if "idempotent-replayed" not in r.headers]
            assert len(fresh) == 1
            workers |= {r.headers["x-worker"] for r in results}
        assert len(workers) == 2, "every request went to one worker; cannot test the race"
        # Both workers answered with (and so hold) the same state; the log has one
        # entry per round.
        digests: dict[str, str] = {}
        deadline = time.monotonic() + 20
        while len(digests) < 2 and time.monotonic() < deadline:
            with httpx.Client(base_url=url, timeout=60) as kc:
                kc.post("/predict", json={"model": "m", "instances": [{"x": [0.0] * DIM}],
                                          "min_version": rounds})  # fmt: skip
                r = kc.get("/models/m")
                assert r.json()["version"] == rounds
                digests[r.headers["x-worker"]] = r.json()["state_digest"]
        assert len(set(digests.values())) == 1
    finally:
        stop_process(proc)


def test_openapi_documents_the_header(tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        op = c.get("/openapi.json").json()["paths"]["/update"]["post"]
        assert [p["name"] for p in op["parameters"]] == [KEY]
        assert op["parameters"][0]["in"] == "header"
        assert "Idempotent-Replayed" in op["responses"]["200"]["headers"]
        assert "409" in op["responses"] and "requestBody" in op


def test_fastapi_route_handles_the_key_like_the_hot_route(tmp_path: Path) -> None:
    """The documented FastAPI route (reached under /plain/ here) and the plain-ASGI hot
    route share one key space and answer alike."""
    from starlette.testclient import TestClient

    from service.app import create_app
    from tests.service.test_api_hot import both_stacks

    app = create_app(Settings(data_dir=str(tmp_path)))
    with TestClient(both_stacks(app)) as c:
        deadline = time.monotonic() + 60
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert c.put("/models/m", json=dense_model(DIM, "arow")).status_code == 201
        first = c.post("/plain/update", json=body("m", 1), headers={KEY: "k"})
        assert first.status_code == 200 and "idempotent-replayed" not in first.headers
        for path in ("/update", "/plain/update"):
            r = c.post(path, json=body("m", 1), headers={KEY: "k"})
            assert r.json() == first.json() and r.headers["idempotent-replayed"] == "true"
        for headers, status in (({KEY: "k"}, 409), ({KEY: "x" * 201}, 422)):
            hot = c.post("/update", json=body("m", 2), headers=headers)
            plain = c.post("/plain/update", json=body("m", 2), headers=headers)
            assert hot.status_code == plain.status_code == status
            assert hot.json() == plain.json()
        assert c.get("/models/m").json()["version"] == 1
