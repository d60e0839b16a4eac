"""``learnserve serve --workers 2`` on one Redis: interleaved updates through both
workers end in bit-identical states (and equal to the library run over the log)."""

from __future__ import annotations

import time

import httpx
import numpy as np

from learners.features import FeatureSpec
from learners.linear import make_classifier
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve

DIM = 8


def batch(i: int) -> tuple[list[dict[str, float]], list[str]]:
    rng = np.random.default_rng(500 + i)
    y = rng.integers(0, 3, 6)
    rows = [{str(j): float(v) for j, v in enumerate(r) if v > 0} or {"0": 1.0}
            for r in rng.normal(size=(6, DIM)) + y[:, None] * 0.5]  # fmt: skip
    return rows, [f"k{v}" for v in y]


def fresh(url: str) -> httpx.Client:
    # No keep-alive: every request is a new connection, so the kernel spreads
    # them over both workers.
    return httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))


def test_two_workers_converge_bit_identically(redis_url: str, tmp_path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "LEARNSERVE_REDIS_URL": redis_url,
        "LEARNSERVE_DATA_DIR": str(tmp_path),
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "15",
        "LEARNSERVE_LOG_RETAIN_ENTRIES": "5",
    }
    proc = start_learnserve(port, env, workers=2)
    try:
        with fresh(url) as c:
            r = c.put(
                "/models/w",
                json={"algorithm": "arow", "features": {"kind": "sparse", "dim": DIM}},
            )
            assert r.status_code == 201, r.text
            writers: set[str] = set()
            versions = []
            n = 60
            for i in range(n):
                X, y = batch(i)
                r = c.post(
                    "/update",
                    json={"model": "w", "examples": [{"x": a, "y": b} for a, b in zip(X, y)]},
                )
                assert r.status_code == 200, r.text
                writers.add(r.headers["x-worker"])
                versions.append(r.json()["version"])
            assert versions == list(range(1, n + 1))  # one log, one order
            assert len(writers) == 2, "all updates went to one worker; cannot test replication"

        ref = make_classifier("arow", dim=DIM, params={})
        spec = FeatureSpec.sparse(DIM)
        for i in range(n):
            X, y = batch(i)
            ref.update(spec.encode(X), y)

        digests: dict[str, str] = {}
        deadline = time.monotonic() + 20
        while len(digests) < 2 and time.monotonic() < deadline:
            with httpx.Client(base_url=url, timeout=60) as kc:  # one connection: one worker
                r = kc.post(
                    "/predict",
                    json={"model": "w", "instances": [{"x": {"1": 1.0}}], "min_version": n},
                )
                assert r.status_code == 200, r.text
                info = kc.get("/models/w")
                assert info.headers["x-worker"] == r.headers["x-worker"]
                digests[info.headers["x-worker"]] = info.json()["state_digest"]
                assert info.json()["version"] == n
        assert set(digests) == writers
        assert set(digests.values()) == {ref.state_digest()}

        # /metrics aggregates both workers: each applied every example. A worker that
        # caught up by a run of entries read from the store counts them when the run is
        # published, a moment after its version (which /predict's min_version and GET
        # read) moved: polled, as a scrape would see it (a CI run once read it between).
        with fresh(url) as c:
            total = sum(len(batch(i)[1]) for i in range(n))
            learned = f'learnserve_examples_learned_total{{model="w"}} {2.0 * total}'
            deadline = time.monotonic() + 10
            text = c.get("/metrics").text
            while learned not in text and time.monotonic() < deadline:
                time.sleep(0.1)
                text = c.get("/metrics").text
            assert learned in text
            assert f'learnserve_examples_accepted_total{{model="w"}} {float(total)}' in text

            # A delete through one worker reaches the other through the catalog epoch.
            assert c.delete("/models/w").status_code == 204
            seen: dict[str, int] = {}
            deadline = time.monotonic() + 10
            while len(seen) < 2 and time.monotonic() < deadline:
                r = c.post("/predict", json={"model": "w", "instances": [{"x": {"1": 1.0}}]})
                if r.status_code == 404:
                    seen[r.headers["x-worker"]] = 404
                time.sleep(0.05)
            assert len(seen) == 2
    finally:
        stop_process(proc)
