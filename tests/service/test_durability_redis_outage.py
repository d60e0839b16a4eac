"""Redis stopped and started again under traffic (real redis-server, real HTTP).

While Redis is down ``/predict`` keeps answering from memory, ``/update`` answers
503 with ``Retry-After`` and changes nothing; when Redis is back the service
resumes by itself, and no acknowledged update is lost (bit-exact digest).
"""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np

from learners.features import FeatureSpec
from learners.linear import make_classifier
from service.settings import Settings
from tests.service.serving import ServerThread

DIM = 5


def batch(i: int) -> tuple[list[list[float]], list[int]]:
    rng = np.random.default_rng(i)
    y = rng.integers(0, 2, 8)
    return (rng.normal(size=(8, DIM)) + y[:, None]).tolist(), [int(v) for v in y]


def test_redis_outage_under_traffic(redis_server, redis_url: str, tmp_path) -> None:
    settings = Settings(redis_url=redis_url, data_dir=str(tmp_path), checkpoint_every_updates=10)
    with ServerThread(settings) as srv, srv.client(timeout=15) as c:
        r = c.put(
            "/models/out",
            json={"algorithm": "scw1", "features": {"kind": "dense", "dim": DIM}},
        )
        assert r.status_code == 201
        acked = 0

        def send(i: int) -> httpx.Response:
            X, y = batch(i)
            return c.post(
                "/update",
                json={"model": "out", "examples": [{"x": a, "y": b} for a, b in zip(X, y)]},
            )

        for _ in range(5):
            assert send(acked).status_code == 200
            acked += 1

        predict_codes: list[int] = []
        stop = threading.Event()

        def predicts() -> None:
            with srv.client(timeout=15) as pc:
                while not stop.is_set():
                    r = pc.post(
                        "/predict", json={"model": "out", "instances": [{"x": [0.5] * DIM}]}
                    )
                    predict_codes.append(r.status_code)
                    time.sleep(0.005)

        t = threading.Thread(target=predicts)
        t.start()
        try:
            redis_server.stop()
            refused = []
            outage_end = time.monotonic() + 1.5
            while time.monotonic() < outage_end:
                r = send(acked)
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "1"
                assert r.json()["detail"]["error"] == "store_unavailable"
                refused.append(r)
            metrics = c.get("/metrics").text
            assert 'learnserve_store_up{store="redis"} 0.0' in metrics
            assert 'learnserve_store_errors_total{operation="append"}' in metrics
            assert c.get("/models/out").json()["version"] == 5  # nothing half-applied
            redis_server.start()
            # The client retries the refused batch; the service recovers by itself.
            deadline = time.monotonic() + 20
            while True:
                r = send(acked)
                if r.status_code == 200:
                    break
                assert r.status_code == 503 and time.monotonic() < deadline, r.text
                time.sleep(0.1)
            acked += 1
            for _ in range(5):
                assert send(acked).status_code == 200
                acked += 1
        finally:
            stop.set()
            t.join(10)
            if not redis_server.running:
                redis_server.start()

        assert refused
        assert predict_codes and set(predict_codes) == {200}, set(predict_codes)
        info = c.get("/models/out").json()
        assert info["version"] == acked  # no acknowledged update lost, none applied twice
        ref = make_classifier("scw1", dim=DIM, params={})
        spec = FeatureSpec.dense(DIM)
        for i in range(acked):
            X, y = batch(i)
            ref.update(spec.encode(X), y)
        assert info["state_digest"] == ref.state_digest()
        deadline = time.monotonic() + 5
        while 'learnserve_store_up{store="redis"} 1.0' not in c.get("/metrics").text:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_starts_while_redis_is_down_and_becomes_ready(
    redis_server, redis_url: str, tmp_path
) -> None:
    redis_server.stop()
    try:
        settings = Settings(redis_url=redis_url, data_dir=str(tmp_path))
        with ServerThread(settings, wait=False) as srv, srv.client(timeout=15) as c:
            deadline = time.monotonic() + 20
            while True:  # alive (healthz) but not ready: nothing restored yet
                try:
                    if c.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline
                time.sleep(0.05)
            r = c.get("/readyz")
            assert r.status_code == 503 and r.json()["ready"] is False
            r = c.post("/predict", json={"model": "m", "instances": [{"x": [1.0]}]})
            assert r.status_code == 503 and r.json()["detail"]["error"] == "not_ready"
            redis_server.start()
            deadline = time.monotonic() + 20
            while c.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "did not become ready after Redis came back"
                time.sleep(0.1)
            r = c.put(
                "/models/m", json={"algorithm": "pa", "features": {"kind": "dense", "dim": 1}}
            )
            assert r.status_code == 201
    finally:
        if not redis_server.running:
            redis_server.start()
