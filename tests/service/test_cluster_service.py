"""``learnserve serve --redis-cluster`` end to end: two real service processes on a
real 3-master Redis Cluster, 20 models spread over the masters.

Creates, updates through both processes, predicts with ``min_version`` on the other
one, replays an idempotency key through the other process, deploys and rolls back a
batch artifact, sees catalog changes from every process, and after a kill -9 of one
process its restart serves every acknowledged version.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import httpx
import numpy as np

from learners.ranking.lambdamart import LambdaMART
from tests.service.cluster_procs import RedisClusterNodes
from tests.service.procs import free_port, stop_process
from tests.service.serving import dense_model, start_learnserve, start_learnserve_all
from tests.service.test_store_redis_cluster import node_of

DIM = 4
MODELS = [f"c{i}" for i in range(20)]


def examples(seed: int, n: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, DIM)) + y[:, None]
    return [{"x": a, "y": int(b)} for a, b in zip(X.tolist(), y, strict=True)]


def until(check: Any, what: str, tries: int = 200) -> Any:
    """Poll ``check`` (catalog changes reach other processes within catalog_poll)."""
    for _ in range(tries):
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_service_on_a_redis_cluster(
    redis_cluster: RedisClusterNodes, redis_cluster_url: str, tmp_path
) -> None:
    assert len({node_of(redis_cluster, m).port for m in MODELS}) == 3  # every master used
    env = {
        "LEARNSERVE_REDIS_URL": redis_cluster_url,
        "LEARNSERVE_DATA_DIR": str(tmp_path),
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "2",
        "LEARNSERVE_LOG_RETAIN_ENTRIES": "1",
    }
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env, extra=["--redis-cluster"])
    a, b = (httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=30) for p in ports)
    try:
        assert a.get("/readyz").json()["store"] == "redis-cluster"
        for m in MODELS:
            assert a.put(f"/models/{m}", json=dense_model(DIM)).status_code == 201
        # Created through A, known to B (catalog on the {catalog} slot).
        for m in MODELS:
            assert b.get(f"/models/{m}").status_code == 200

        acked: dict[str, int] = {}
        for rnd in range(4):  # updates through both processes, every model
            for i, m in enumerate(MODELS):
                c = (a, b)[(i + rnd) % 2]
                r = c.post("/update", json={"model": m, "examples": examples(100 * i + rnd)})
                assert r.status_code == 200, r.text
                acked[m] = r.json()["version"]
                assert acked[m] == rnd + 1
        for i, m in enumerate(MODELS):  # read-your-writes on the other process
            r = (b, a)[i % 2].post(
                "/predict",
                json={"model": m, "instances": [{"x": [1.0] * DIM}], "min_version": acked[m]},
            )
            assert r.status_code == 200, r.text
            assert r.json()["version"] >= acked[m]

        # An idempotency key replayed through the other process: stored once.
        body = {"model": MODELS[3], "examples": examples(7)}
        first = a.post("/update", json=body, headers={"Idempotency-Key": "k-1"})
        again = b.post("/update", json=body, headers={"Idempotency-Key": "k-1"})
        assert first.status_code == again.status_code == 200, again.text
        assert again.json()["version"] == first.json()["version"] == 5
        acked[MODELS[3]] = 5
        assert a.get(f"/models/{MODELS[3]}").json()["version"] == 5

        # A batch artifact: deploy twice through A, roll back through B, seen by A.
        rng = np.random.default_rng(0)
        X = rng.normal(size=(100, DIM))
        y = np.clip((X[:, 0] * 2 + 2).round(), 0, 4).astype(int)
        r1 = LambdaMART(n_estimators=3, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 5)
        r2 = LambdaMART(n_estimators=6, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 5)
        for model in (r1, r2):
            r = a.put(
                "/models/rank/artifact",
                content=model.to_bytes(),
                headers={"content-type": "application/octet-stream"},
            )
            assert r.status_code == 201, r.text
        inst = {"model": "rank", "instances": [{"x": row} for row in X[:3].tolist()]}

        def scores(c: httpx.Client) -> tuple[int, list[float]]:
            got = c.post("/predict", json=inst).json()
            return got["version"], [p["score"] for p in got["predictions"]]

        until(lambda: scores(b)[0] == 2, "B serves artifact version 2")
        assert b.put("/models/rank/active", json={"version": 1}).status_code == 200
        until(lambda: scores(a)[0] == 1, "A serves the rollback made through B")
        assert scores(a)[1] == np.asarray(r1.predict(X[:3])).tolist()

        # A delete through B reaches A.
        assert b.delete(f"/models/{MODELS[-1]}").status_code == 204
        until(lambda: a.get(f"/models/{MODELS[-1]}").status_code == 404, "A sees the delete")
        del acked[MODELS[-1]]

        # kill -9 of A; its restart recovers every acknowledged version.
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        procs[0] = start_learnserve(ports[0], env, extra=["--redis-cluster"])
        for m, v in acked.items():
            info = a.get(f"/models/{m}").json()
            assert info["version"] == v, (m, info)
            assert info["state_digest"] == b.get(f"/models/{m}").json()["state_digest"]
        assert scores(a)[0] == 1
    finally:
        a.close()
        b.close()
        for p in procs:
            stop_process(p)
