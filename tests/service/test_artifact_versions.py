"""Stored artifact versions over real HTTP, on SQLite, Redis and a Redis Cluster, with two
servers sharing the store (as two workers): identical re-deploys are recognised (200, no
new version), old versions are deleted by hand (``DELETE /models/{name}/versions/{v}``,
never the active one) or pruned by the retention setting, and the other server switches
away from a pruned version; a rollback only reaches a kept version."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import numpy as np
import pytest

from learners.ranking.lambdamart import LambdaMART
from service.settings import Settings
from tests.service.serving import ServerThread

OCTETS = {"content-type": "application/octet-stream"}
D = 4


def rankers(n: int) -> list[tuple[bytes, LambdaMART]]:
    """``n`` distinct small rankers (other bagging seeds: other trees, other bytes)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, D))
    y = np.clip((X[:, 0] * 2 + X[:, 1] + 2).round(), 0, 4).astype(int)
    out = []
    for seed in range(n):
        m = LambdaMART(n_estimators=3, num_leaves=4, min_data_in_leaf=5, seed=seed)
        m.fit(X, y, [20] * 6)
        out.append((m.to_bytes(), m))
    return out


X_TEST = np.random.default_rng(9).normal(size=(5, D))
INSTANCES = {"instances": [{"x": row} for row in X_TEST.tolist()]}


@pytest.fixture(params=["sqlite", "redis", "redis-cluster"])
def two_servers(
    request: pytest.FixtureRequest, tmp_path: Any
) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    opts: dict[str, Any] = {"data_dir": str(tmp_path), "artifact_retention": 2}
    if request.param == "redis":
        opts["redis_url"] = request.getfixturevalue("redis_url")
    elif request.param == "redis-cluster":
        opts.update(redis_url=request.getfixturevalue("redis_cluster_url"), redis_cluster=True)
    settings = Settings(**opts)
    with ExitStack() as stack:
        a, b = (stack.enter_context(ServerThread(settings)) for _ in range(2))
        yield stack.enter_context(a.client()), stack.enter_context(b.client())


def serving(c: httpx.Client, name: str, version: int) -> None:
    """Wait until the server serves ``version`` (another server's deploys reach it through
    its catalog poll)."""
    deadline = time.monotonic() + 30
    while (got := c.get(f"/models/{name}").json().get("version")) != version:
        assert time.monotonic() < deadline, f"still serving {got}, not {version}"
        time.sleep(0.05)


def stored(c: httpx.Client, name: str) -> list[int]:
    return [v["version"] for v in c.get(f"/models/{name}/versions").json()["versions"]]


def scores(c: httpx.Client, name: str) -> list[float]:
    r = c.post("/predict", json={"model": name, **INSTANCES})
    assert r.status_code == 200, r.text
    return [p["score"] for p in r.json()["predictions"]]


def test_identical_redeploys_delete_and_retention(
    two_servers: tuple[httpx.Client, httpx.Client],
) -> None:
    a, b = two_servers
    (blob1, m1), (blob2, m2), (blob3, m3) = rankers(3)

    r = a.put("/models/r/artifact", content=blob1, headers=OCTETS)
    assert r.status_code == 201 and r.json()["version"] == 1 and r.json()["stored"], r.text
    # the same bytes again, on either server: version 1, 200, nothing stored
    for c in (a, b):
        r = c.put("/models/r/artifact", content=blob1, headers=OCTETS)
        assert r.status_code == 200, r.text
        assert (r.json()["version"], r.json()["stored"], r.json()["created"]) == (1, False, False)
    assert stored(a, "r") == [1]
    r = a.put("/models/r/artifact", content=blob2, headers=OCTETS)
    assert r.status_code == 201 and r.json()["version"] == 2
    serving(b, "r", 2)
    # the bytes of an older version: that version is active again (no version 3)
    r = a.put("/models/r/artifact", content=blob1, headers=OCTETS)
    assert r.status_code == 200 and r.json()["version"] == 1
    assert a.get("/models/r/versions").json()["active"] == 1 and stored(a, "r") == [1, 2]
    serving(b, "r", 1)
    assert scores(b, "r") == pytest.approx(m1.predict(X_TEST).tolist())

    # DELETE: never the active version (409), unknown 404, a bad number 422
    r = b.delete("/models/r/versions/1")
    assert r.status_code == 409 and r.json()["detail"]["error"] == "active_version", r.text
    assert b.delete("/models/r/versions/7").status_code == 404
    assert b.delete("/models/nope/versions/1").status_code == 404
    r = b.delete("/models/r/versions/x")
    assert r.status_code == 422 and r.json()["detail"]["field"] == "version"
    assert b.delete("/models/r/versions/2").status_code == 204
    assert stored(a, "r") == [1]
    assert a.put("/models/r/active", json={"version": 2}).status_code == 404  # deleted

    # retention 2: deploying versions 3 and 4 keeps the two newest
    assert a.put("/models/r/artifact", content=blob2, headers=OCTETS).json()["version"] == 3
    assert stored(a, "r") == [1, 3]
    r = a.put("/models/r/artifact", content=blob3, headers=OCTETS)
    assert r.status_code == 201 and r.json()["version"] == 4
    assert stored(b, "r") == [3, 4]
    serving(b, "r", 4)  # b served version 1, pruned meanwhile: it switched
    assert scores(b, "r") == pytest.approx(m3.predict(X_TEST).tolist())
    # rollback goes to a kept version only: 4 -> 3, then there is none before 3
    r = b.post("/models/r/rollback")
    assert r.status_code == 200 and (r.json()["version"], r.json()["previous"]) == (3, 4)
    serving(a, "r", 3)
    assert scores(a, "r") == pytest.approx(m2.predict(X_TEST).tolist())
    r = a.post("/models/r/rollback")
    assert r.status_code == 409 and r.json()["detail"]["error"] == "no_previous_version"
    assert a.put("/models/r/active", json={"version": 1}).status_code == 404  # pruned

    # a deploy makes the new version active, then keeps it and the one before
    r = a.put("/models/r/artifact", content=blob1, headers=OCTETS)  # new bytes again: v5
    assert r.status_code == 201 and r.json()["version"] == 5
    assert stored(a, "r") == [4, 5]
    assert a.put("/models/r/active", json={"version": 4}).status_code == 200
    assert a.put("/models/r/artifact", content=blob2, headers=OCTETS).json()["version"] == 6
    assert stored(a, "r") == [5, 6]
    assert a.get("/models/r/versions").json()["active"] == 6


def test_retention_zero_keeps_every_version(tmp_path: Any) -> None:
    blobs = [b for b, _ in rankers(4)]
    settings = Settings(data_dir=str(tmp_path), artifact_retention=0)
    with ServerThread(settings) as srv, srv.client() as c:
        for i, blob in enumerate(blobs, 1):
            assert c.put("/models/k/artifact", content=blob, headers=OCTETS).json()["version"] == i
        assert c.put("/models/k/active", json={"version": 1}).status_code == 200
        r = c.put("/models/k/artifact", content=blobs[3], headers=OCTETS)
        assert r.status_code == 200 and r.json()["version"] == 4
        assert stored(c, "k") == [1, 2, 3, 4]
