"""Delayed labels: the rules (ids, TTL, labelled once, refused batches change nothing),
across a restart (SQLite and a real Redis), and across two service processes on one
real Redis (predicted on one, labelled on the other)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.models.fast_json import scan_dense_examples
from service.models.fast_json_maps import scan_map_examples
from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, dense_model, start_learnserve_all
from tests.service.test_delayed_labels import SPARSE, a9a, info, ok, refused

JSON = {"content-type": "application/json"}


def state(c: httpx.Client, name: str) -> tuple[int, str]:
    d = info(c, name)
    return d["version"], d["state_digest"]


def start(c: httpx.Client, name: str = "m") -> None:
    """A dense model that has learned two labels (so it can predict)."""
    assert c.put(f"/models/{name}", json=dense_model(3)).status_code == 201
    body = {"model": name, "examples": [{"x": [1, 0, 0], "y": "a"}, {"x": [0, 1, 0], "y": "b"}]}
    ok(c.post("/update", json=body))


def predict(c: httpx.Client, ids: list[str], name: str = "m") -> dict[str, Any]:
    instances = [{"x": [1.0, 0.5 * k, 0.0], "id": i} for k, i in enumerate(ids)]
    return ok(c.post("/predict", json={"model": name, "instances": instances}))


def label(c: httpx.Client, pairs: list[tuple[str, Any]], name: str = "m") -> httpx.Response:
    examples = [{"id": i, "y": y} for i, y in pairs]
    return c.post("/update", json={"model": name, "examples": examples})


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        start(c)
        yield c


def test_labelled_once_same_label_answered_as_before(client: httpx.Client) -> None:
    c = client
    served = predict(c, ["u1", "u2"])["predictions"]
    first = ok(label(c, [("u1", "a"), ("u2", "a")]))
    right = sum(p["label"] == "a" for p in served)
    assert first == {"model": "m", "applied": 2, "version": 2, "correct": right}
    before = state(c, "m")
    assert ok(label(c, [("u1", "a"), ("u2", "a")])) == first  # a retry: nothing learned
    assert state(c, "m") == before
    d = refused(label(c, [("u2", "a"), ("u1", "b")]), 409, "examples[1].id")
    assert d["error"] == "id_labelled" and "'a'" in d["message"]
    assert state(c, "m") == before
    # A labelled id cannot be predicted with again (nothing of that batch is kept).
    refused(
        c.post(
            "/predict",
            json={
                "model": "m",
                "instances": [{"x": [0, 0, 1], "id": "fresh"}, {"x": [0, 0, 1], "id": "u2"}],
            },
        ),
        409,
        "instances[1].id",
    )
    refused(label(c, [("fresh", "a")]), 422, "examples[0].id")
    # Mixed: x examples, a repeat and a new id in one batch; the repeat is not learned again.
    predict(c, ["u3"])
    body = {
        "model": "m",
        "examples": [{"x": [0, 0, 1], "y": "b"}, {"id": "u1", "y": "a"}, {"id": "u3", "y": "b"}],
    }
    r = ok(c.post("/update", json=body))
    assert (r["applied"], r["version"]) == (2, 3)  # what it learned: not the repeat
    assert info(c, "m")["examples_learned"] == 2 + 2 + 2


def test_bad_ids_are_refused_naming_the_field(client: httpx.Client) -> None:
    c = client
    before = state(c, "m")
    x = [1.0, 0.0, 0.0]
    for bad, why in [("z" * 201, "201"), (7, "string"), ("", "0"), (None, "string")]:
        d = refused(
            c.post("/predict", json={"model": "m", "instances": [{"x": x}, {"x": x, "id": bad}]}),
            422,
            "instances[1].id",
        )
        assert why in d["message"]
        refused(label(c, [(bad, "a")]), 422, "examples[0].id")
    assert ok(c.post("/predict", json={"model": "m", "instances": [{"x": x, "id": "z" * 200}]}))
    refused(
        c.post(
            "/predict", json={"model": "m", "instances": [{"x": x, "id": "d"}, {"x": x, "id": "d"}]}
        ),
        422,
        "instances[1].id",
    )
    predict(c, ["p"])
    refused(label(c, [("p", "a"), ("p", "a")]), 422, "examples[1].id")
    both = {"model": "m", "examples": [{"id": "p", "x": x, "y": "a"}]}
    refused(c.post("/update", json=both), 422, "examples[0].x")
    refused(c.post("/update", json={"model": "m", "examples": [{"id": "p"}]}), 422, "examples[0].y")
    refused(
        c.post("/update", json={"model": "m", "examples": [{"id": "p", "y": 1.5}]}),
        422,
        "examples[0].y",
    )
    refused(
        c.post("/update", json={"model": "m", "examples": [{"id": "p", "y": "a", "w": 1}]}),
        422,
        "examples[0].w",
    )
    keyed = c.post(
        "/update",
        json={"model": "m", "examples": [{"id": "p", "y": "a"}]},
        headers={"Idempotency-Key": "x" * 201},  # malformed: over 200 characters
    )
    refused(keyed, 422, "Idempotency-Key")
    assert state(c, "m")[0] == before[0]  # nothing appended (p is still unlabelled)
    assert ok(label(c, [("p", "a")]))["version"] == before[0] + 1


def keyed_mixed_batch_is_learned_once(c: httpx.Client, name: str) -> None:
    """A batch of a label by id and an example with x, sent with a key four times (the
    answer lost each time): learned once, as the first request answered; the same key
    with another body is a 409 and changes nothing."""
    predict(c, ["mix"], name)
    body = {"model": name, "examples": [{"id": "mix", "y": "b"}, {"x": [0, 0, 1], "y": "a"}]}
    key = {"Idempotency-Key": "batch-7"}
    before = state(c, name)
    first = c.post("/update", json=body, headers=key)
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers, first.text
    after = state(c, name)
    assert after[0] == before[0] + 1
    for _ in range(3):
        again = c.post("/update", json=body, headers=key)
        assert again.status_code == 200, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json() == first.json()
    assert state(c, name) == after  # the x example was not learned again
    assert info(c, name)["examples_learned"] == 4  # two to start, then this batch once
    other = {"model": name, "examples": [{"x": [0, 0, 1], "y": "b"}]}
    d = refused(c.post("/update", json=other, headers=key), 409, "Idempotency-Key")
    assert d["error"] == "idempotency_key_reused"
    assert state(c, name) == after
    # Without the key, the same batch again is new to the service: its id is answered as
    # labelled before, and its x example is learned a second time. The key prevents that.
    assert ok(c.post("/update", json=body))["version"] == after[0] + 1
    assert info(c, name)["examples_learned"] == 5


def test_a_keyed_mixed_batch_is_learned_once(client: httpx.Client) -> None:
    keyed_mixed_batch_is_learned_once(client, "m")


def test_a_keyed_mixed_batch_is_learned_once_on_redis(
    tmp_path: Path, redis_server: Any, redis_url: str
) -> None:
    settings = Settings(data_dir=str(tmp_path), redis_url=redis_url)
    with ServerThread(settings) as srv, srv.client() as c:
        start(c, "rk")
        keyed_mixed_batch_is_learned_once(c, "rk")


def test_a_keyed_mixed_batch_is_learned_once_on_a_cluster(
    tmp_path: Path, redis_cluster_url: str
) -> None:
    settings = Settings(data_dir=str(tmp_path), redis_url=redis_cluster_url, redis_cluster=True)
    with ServerThread(settings) as srv, srv.client() as c:
        start(c, "ck")
        keyed_mixed_batch_is_learned_once(c, "ck")


def test_refused_batch_changes_nothing_and_marks_nothing(client: httpx.Client) -> None:
    c = client
    predict(c, ["ok1", "ok2"])
    before = state(c, "m")
    refused(label(c, [("ok1", "a"), ("never", "b")]), 422, "examples[1].id")
    refused(label(c, [("ok1", "a"), ("ok2", "c"), ("ok2", "a")]), 422, "examples[2].id")
    body = {"model": "m", "examples": [{"id": "ok1", "y": "a"}, {"x": [1, "2", 3], "y": "b"}]}
    refused(c.post("/update", json=body), 422, "examples[1].x[1]")
    assert state(c, "m") == before
    # ok1 and ok2 were not marked: they are labelled now, once.
    assert ok(label(c, [("ok1", "a"), ("ok2", "b")]))["version"] == before[0] + 1


def test_ids_on_models_that_cannot_take_them(client: httpx.Client) -> None:
    body = {"algorithm": "ranksvm", "features": {"kind": "dense", "dim": 2}}
    assert client.put("/models/r", json=body).status_code == 201
    q = {
        "model": "r",
        "queries": [{"items": [{"x": [1, 0], "relevance": 1}, {"x": [0, 1], "relevance": 0}]}],
    }
    ok(client.post("/update", json=q))
    d = refused(
        client.post("/predict", json={"model": "r", "instances": [{"x": [1, 0], "id": "a"}]}),
        422,
        "instances[0].id",
    )
    assert "classifiers" in d["message"]


def test_expired_id_is_422(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), feedback_ttl_seconds=0.5)
    with ServerThread(settings) as srv, srv.client() as c:
        start(c)
        predict(c, ["soon", "late"])
        ok(label(c, [("soon", "a")]))
        time.sleep(0.8)
        before = state(c, "m")
        d = refused(label(c, [("late", "a")]), 422, "examples[0].id")
        assert "feedback_ttl_seconds" in d["message"]
        assert state(c, "m") == before


def test_concurrent_labels_one_wins(client: httpx.Client) -> None:
    c = client
    ids = [f"race-{k}" for k in range(10)]
    predict(c, ids)
    url = str(c.base_url)
    for i in ids:
        results: list[int] = []
        barrier = threading.Barrier(2)

        def send(y: str, i: str = i, barrier: threading.Barrier = barrier) -> None:
            with httpx.Client(base_url=url, timeout=30) as tc:
                barrier.wait()
                results.append(label(tc, [(i, y)]).status_code)

        threads = [threading.Thread(target=send, args=(y,)) for y in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [200, 409], results
    assert info(c, "m")["version"] == 1 + len(ids)


def test_fast_parsers_leave_bodies_with_ids_to_the_general_path() -> None:
    dense = b'{"model": "m", "examples": [{"x": [1, 2], "y": "a"}, {"id": "q", "y": "a"}]}'
    assert scan_dense_examples(dense, 2, 100) is None
    dense_x = b'{"model": "m", "examples": [{"x": [1, 2], "y": "a", "id": "q"}]}'
    assert scan_dense_examples(dense_x, 2, 100) is None
    sparse = b'{"model": "m", "examples": [{"x": {"1": 2}, "y": "a"}, {"id": "q", "y": "a"}]}'
    assert scan_map_examples(sparse, "sparse", 4, 100, 100) is None
    assert scan_map_examples(sparse, "hashed", 16, 100, 100) is None


def test_survives_a_restart_sqlite(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path))
    with ServerThread(settings) as srv, srv.client() as c:
        start(c)
        served = predict(c, ["before-restart"])["predictions"][0]["label"]
    with ServerThread(settings) as srv, srv.client() as c:
        r = ok(label(c, [("before-restart", "b")]))
        assert r["correct"] == int(served == "b") and r["version"] == 2


def test_survives_restarts_redis(tmp_path: Path, redis_server: Any, redis_url: str) -> None:
    """The service restarted, and Redis itself restarted (AOF): the id is still there."""
    settings = Settings(data_dir=str(tmp_path), redis_url=redis_url)
    with ServerThread(settings) as srv, srv.client() as c:
        start(c)
        predict(c, ["r1", "r2"])
    redis_server.stop()
    redis_server.start()
    with ServerThread(settings) as srv, srv.client() as c:
        assert ok(label(c, [("r1", "a")]))["version"] == 2
        refused(label(c, [("r1", "b")]), 409, "examples[0].id")
        assert ok(label(c, [("r2", "b")]))["version"] == 3


def test_two_processes_on_one_redis(redis_url: str, tmp_path: Path) -> None:
    """Predicted on one service process, labelled on another: both hold the state of a
    model sent x and y together (a9a, 2,000 rows in batches of 100)."""
    _, rows, y = a9a("a9a")
    env = {**os.environ, "LEARNSERVE_REDIS_URL": redis_url, "LEARNSERVE_DATA_DIR": str(tmp_path)}
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    try:
        a = httpx.Client(base_url=f"http://127.0.0.1:{ports[0]}", timeout=60)
        b = httpx.Client(base_url=f"http://127.0.0.1:{ports[1]}", timeout=60)
        for m in ("byid", "xy"):
            assert a.put(f"/models/{m}", json=SPARSE).status_code == 201
        ok(a.post("/update", json={"model": "byid", "examples": [{"x": rows[0], "y": y[0]}]}))
        ok(a.post("/update", json={"model": "xy", "examples": [{"x": rows[0], "y": y[0]}]}))
        for s in range(1, 2001, 100):
            idx = range(s, s + 100)
            p, q = (a, b) if s % 200 == 1 else (b, a)  # alternate who predicts, who labels
            inst = [{"x": rows[i], "id": f"r{i}"} for i in idx]
            v = ok(p.post("/predict", json={"model": "byid", "instances": inst}))["version"]
            assert v >= 1
            got = ok(
                q.post(
                    "/update",
                    json={"model": "byid", "examples": [{"id": f"r{i}", "y": y[i]} for i in idx]},
                )
            )
            xy = ok(
                q.post(
                    "/update",
                    json={"model": "xy", "examples": [{"x": rows[i], "y": y[i]} for i in idx]},
                )
            )
            assert got["applied"] == 100
        # the versions the last acknowledged updates made (the other process may not have
        # applied them yet: min_version waits for them there)
        versions = {"byid": got["version"], "xy": xy["version"]}
        assert versions["byid"] == versions["xy"]
        digests = set()
        for c in (a, b):
            for m, version in versions.items():
                ok(
                    c.post(
                        "/predict",
                        json={"model": m, "instances": [{"x": rows[0]}], "min_version": version},
                    )
                )
            digests |= {info(c, "byid")["state_digest"], info(c, "xy")["state_digest"]}
        assert len(digests) == 1
        a.close()
        b.close()
    finally:
        for proc in procs:
            stop_process(proc)
