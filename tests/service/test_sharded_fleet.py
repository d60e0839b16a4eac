"""Three ``learnserve serve`` processes on one Redis with ``LEARNSERVE_OWNERSHIP=sharded``,
R = 2, 12 models, updates sent to random processes.

What is counted: every process reports, per model, the log entries it applied to its
copy while it owned the model (``entries_applied.owner``: by its apply loop, or by the
request that appended them) and while it held a guest copy (``.guest``: catching up
for a request it does not own). The issue's "applied by exactly R processes" is the
owner count: with a steady membership, the fleet's owner applications of a model sum
to exactly R x its log length, and exactly R processes say ``owned_here``. Guests only
apply what requests make them read, which is the price of a misrouted request.
"""

from __future__ import annotations

import random
import time
from typing import Any

import httpx
import pytest

from tests.service.procs import free_port, stop_process
from tests.service.serving import dense_model, start_learnserve

R = 2
MODELS = [f"m{i}" for i in range(12)]
LEASE = 3.0


def example(rng: random.Random) -> dict[str, Any]:
    x = [rng.uniform(-1, 1) for _ in range(4)]
    return {"x": x, "y": "pos" if x[0] + 0.5 * x[1] > 0 else "neg"}


def fleet_members(c: httpx.Client) -> list[str]:
    r = c.get("/readyz")
    assert r.status_code == 200, r.text
    return list(r.json()["fleet"]["members"])


def wait_members(clients: list[httpx.Client], n: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        views = [fleet_members(c) for c in clients]
        if all(len(v) == n for v in views) and all(v == views[0] for v in views):
            return views[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"members did not settle on {n}: {views}")
        time.sleep(0.2)


def send_updates(clients: list[httpx.Client], rng: random.Random, n: int) -> dict[str, int]:
    last: dict[str, int] = {}
    for _ in range(n):
        name = rng.choice(MODELS)
        c = rng.choice(clients)
        body = {"model": name, "examples": [example(rng) for _ in range(5)]}
        r = c.post("/update", json=body)
        assert r.status_code == 200, r.text
        last[name] = max(last.get(name, 0), r.json()["version"])
    return last


def converged(clients: list[httpx.Client], name: str, version: int) -> list[dict[str, Any]]:
    """Every process answers ``name`` at ``version``; their GET bodies."""
    infos = []
    for c in clients:
        r = c.post(
            "/predict",
            json={"model": name, "instances": [{"x": [1, 0, 0, 0]}], "min_version": version},
        )
        assert r.status_code == 200, r.text
        assert r.json()["version"] == version
        info = c.get(f"/models/{name}").json()
        assert info["version"] == version, info
        infos.append(info)
    assert len({i["state_digest"] for i in infos}) == 1, [i["ownership"] for i in infos]
    return infos


@pytest.mark.timeout(240)
def test_three_processes_sharded_r2(redis_url: str, tmp_path) -> None:
    rng = random.Random(12)
    ports = [free_port() for _ in range(3)]
    procs = []
    clients: list[httpx.Client] = []
    try:
        for i, port in enumerate(ports):
            env = {
                "LEARNSERVE_REDIS_URL": redis_url,
                "LEARNSERVE_DATA_DIR": str(tmp_path / f"p{i}"),
                "LEARNSERVE_OWNERSHIP": "sharded",
                "LEARNSERVE_REPLICAS_PER_MODEL": str(R),
                "LEARNSERVE_MEMBER_ID": f"p{i}",
                "LEARNSERVE_MEMBER_LEASE_SECONDS": str(LEASE),
                # Owners restore from the log only: no checkpoint skips entries, so
                # the owner counts below are exact.
                "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "100000",
                "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "100000",
            }
            procs.append(start_learnserve(port, env))
            clients.append(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30))
        assert wait_members(clients, 3) == ["p0", "p1", "p2"]

        for name in MODELS:
            r = rng.choice(clients).put(f"/models/{name}", json=dense_model(4))
            assert r.status_code == 201, r.text
        last = send_updates(clients, rng, 240)
        assert set(last) == set(MODELS)

        owned_counts = [0, 0, 0]
        for name in MODELS:
            infos = converged(clients, name, last[name])
            owners = infos[0]["ownership"]["owners"]
            assert len(owners) == R and all(i["ownership"]["owners"] == owners for i in infos)
            owned_here = [f"p{k}" for k, i in enumerate(infos) if i["ownership"]["owned_here"]]
            assert owned_here == sorted(owners)
            applied = [i["ownership"]["entries_applied"] for i in infos]
            # Exactly R processes applied each entry as owners...
            assert sum(a["owner"] for a in applied) == R * last[name], applied
            # ... and the non-owner applied none as an owner.
            for k, i in enumerate(infos):
                if not i["ownership"]["owned_here"]:
                    assert applied[k]["owner"] == 0, (name, applied)
                else:
                    owned_counts[k] += 1
        # 12 models over 3 members with R = 2: each member owns some, none owns all.
        assert sum(owned_counts) == R * len(MODELS)
        assert all(0 < n < len(MODELS) for n in owned_counts), owned_counts

        # Stop one process without a goodbye: its lease must expire.
        procs[2].kill()
        procs[2].wait(10)
        alive = clients[:2]
        t0 = time.monotonic()
        # Updates keep flowing while the fleet notices (guests serve meanwhile).
        more = send_updates(alive, rng, 40)
        assert wait_members(alive, 2, timeout=LEASE * 4) == ["p0", "p1"]
        assert time.monotonic() - t0 < LEASE * 4
        more.update(send_updates(alive, rng, 120))
        for name in MODELS:
            version = more.get(name, last[name])
            infos = converged(alive, name, version)
            assert all(i["ownership"]["owned_here"] for i in infos)  # R = 2 = N
            assert all(i["version"] > last[name] or name not in more for i in infos)
            # Still learning: the separable rule is predicted on a clear example.
            r = alive[0].post(
                "/predict", json={"model": name, "instances": [{"x": [0.9, 0.5, 0, 0]}]}
            )
            assert r.json()["predictions"][0]["label"] == "pos", (name, r.text)
    finally:
        for c in clients:
            c.close()
        for p in procs:
            stop_process(p)
