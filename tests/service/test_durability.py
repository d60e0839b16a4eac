"""kill -9 of a serving process in the middle of a stream of updates, then restart.

The restarted service must hold exactly the state of an uninterrupted in-process
run (``make_classifier`` + ``update``) over the acknowledged updates — bit-exact,
compared by ``state_digest`` — on both stores. The one request in flight at the
kill may or may not have been stored (its answer was lost): the restarted
version says which, and the reference includes it exactly when it was stored.
Checkpoints (every 7 updates) and log trimming happen during the stream, so the
restore goes through checkpoint + replay.
"""

from __future__ import annotations

import signal
import threading
import time

import httpx
import numpy as np
import pytest

from learners.features import FeatureSpec
from learners.linear import make_classifier
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve

DIM = 6
PARAMS = {"r": 0.7}


def batch(i: int) -> tuple[list[list[float]], list[str]]:
    rng = np.random.default_rng(1000 + i)
    n = int(rng.integers(1, 20))
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, DIM)) + y[:, None] * 0.8
    return X.tolist(), [f"c{v}" for v in y]


def reference_digest(n_batches: int) -> str:
    clf = make_classifier("arow", dim=DIM, params=PARAMS)
    spec = FeatureSpec.dense(DIM)
    for i in range(n_batches):
        X, y = batch(i)
        clf.update(spec.encode(X), y)
    return clf.state_digest()


def stream(url: str, acked: list[int], inflight: list[int], stop: threading.Event) -> None:
    """Send batches 0, 1, 2, ... one at a time; record the acknowledged ones."""
    with httpx.Client(base_url=url, timeout=10) as c:
        i = 0
        while not stop.is_set():
            X, y = batch(i)
            inflight[:] = [i]
            try:
                r = c.post(
                    "/update",
                    json={"model": "dur", "examples": [{"x": a, "y": b} for a, b in zip(X, y)]},
                )
            except httpx.HTTPError:
                return  # the server died under us: batch i's fate is unknown
            if r.status_code != 200:
                return
            assert r.json()["version"] == i + 1
            acked.append(i)
            i += 1


@pytest.fixture(params=["sqlite", "redis"])
def store_env(request: pytest.FixtureRequest, tmp_path) -> dict[str, str]:
    env = {
        "LEARNSERVE_DATA_DIR": str(tmp_path / "data"),
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "7",
        "LEARNSERVE_LOG_RETAIN_ENTRIES": "3",
    }
    if request.param == "redis":
        env["LEARNSERVE_REDIS_URL"] = request.getfixturevalue("redis_url")
    return env


def post_batch(c: httpx.Client, i: int) -> httpx.Response:
    X, y = batch(i)
    return c.post(
        "/update", json={"model": "dur", "examples": [{"x": a, "y": b} for a, b in zip(X, y)]}
    )


def n_examples(n_batches: int) -> int:
    return sum(len(batch(i)[1]) for i in range(n_batches))


def test_kill9_mid_stream_then_restart_is_bit_exact(store_env: dict[str, str]) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_learnserve(port, store_env)
    try:
        r = httpx.put(
            f"{url}/models/dur",
            json={"algorithm": "arow", "params": PARAMS, "features": {"kind": "dense", "dim": DIM}},
        )
        assert r.status_code == 201, r.text
        acked: list[int] = []
        inflight: list[int] = []
        stop = threading.Event()
        t = threading.Thread(target=stream, args=(url, acked, inflight, stop))
        t.start()
        deadline = time.monotonic() + 30
        while len(acked) < 40 and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)  # mid-stream: a request is almost surely in flight
        proc.wait(10)
        stop.set()
        t.join(15)
        assert len(acked) >= 40, "the stream was too slow to test anything"
    finally:
        stop_process(proc)

    proc = start_learnserve(port, store_env)
    try:
        with httpx.Client(base_url=url, timeout=10) as c:
            info = c.get("/models/dur").json()
            n = info["version"]
            # Every acknowledged batch survived; at most the in-flight one more.
            assert n in (len(acked), len(acked) + 1), (n, len(acked), inflight)
            if n == len(acked) + 1:
                assert inflight == [len(acked)]
            assert info["state_digest"] == reference_digest(n)
            assert info["examples_learned"] == n_examples(n)
            assert info["last_checkpoint"] is not None  # restored via checkpoint + replay
            assert info["last_checkpoint"]["position"] >= n - 8
            # ...and the service keeps learning in the same order afterwards.
            for i in range(n, n + 5):
                assert post_batch(c, i).json()["version"] == i + 1
            before = c.get("/models/dur").json()
            assert before["state_digest"] == reference_digest(n + 5)
    finally:
        stop_process(proc)  # graceful this time

    proc = start_learnserve(port, store_env)
    try:
        after = httpx.get(f"{url}/models/dur", timeout=10).json()
        assert after["version"] == n + 5
        assert after["state_digest"] == before["state_digest"]
        # Counters and the evaluation window come back from the checkpoint + replay.
        assert after["examples_learned"] == before["examples_learned"] == n_examples(n + 5)
        assert after["online_metrics"] == before["online_metrics"]
    finally:
        stop_process(proc)
