"""Challengers (issue #23): models that follow another learn its log, entry by entry.

Three challengers (AROW, SCW-I, PA-I) follow a CW leader on a9a; each must hold the
state (``state_digest``) of a model sent the same requests directly from the moment it
was created, a promotion under a ``/predict`` load must answer every request, the
demoted leader keeps learning, and two service processes on one Redis plus a third
started afresh (checkpoints + a trimmed log) hold the same followers.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, start_learnserve, start_learnserve_all
from tests.service.test_delayed_labels import a9a, info, ok

FEATURES = {"kind": "sparse", "dim": 123}
LEADER = {"algorithm": "cw", "features": FEATURES}
CHALLENGERS = {"c-arow": "arow", "c-scw1": "scw1", "c-pa1": "pa1"}
BATCH = 100


@pytest.fixture(scope="module")
def stream() -> tuple[list[dict[str, float]], list[int]]:
    _, rows, y = a9a("a9a")
    return rows[:4000], y[:4000]


def batches(rows: list[Any], y: list[int], lo: int, hi: int) -> list[list[dict[str, Any]]]:
    return [
        [{"x": x, "y": v} for x, v in zip(rows[s : s + BATCH], y[s : s + BATCH], strict=True)]
        for s in range(lo, hi, BATCH)
    ]


def learn(c: httpx.Client, name: str, examples: list[dict[str, Any]]) -> int:
    return int(ok(c.post("/update", json={"model": name, "examples": examples}))["version"])


def create_challengers(c: httpx.Client) -> None:
    for name, algorithm in CHALLENGERS.items():
        body = {"algorithm": algorithm, "features": FEATURES, "follows": "lead"}
        r = c.put(f"/models/{name}", json=body)
        assert r.status_code == 201, r.text
        assert r.json()["config"]["follows"]["model"] == "lead"
        assert c.put(f"/models/{name}", json=body).status_code == 200  # the same model


def test_challengers_learn_what_they_would_learn_directly(stream: Any, tmp_path: Path) -> None:
    rows, y = stream
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/lead", json=LEADER).status_code == 201
        before = batches(rows, y, 0, 1000)
        for ex in before:
            learn(c, "lead", ex)
        create_challengers(c)
        for name, algorithm in CHALLENGERS.items():  # the same requests, sent directly
            body = {"algorithm": algorithm, "features": FEATURES}
            assert c.put(f"/models/direct-{name}", json=body).status_code == 201
            assert info(c, name)["config"]["follows"]["from_version"] == len(before)
        for ex in batches(rows, y, 1000, 4000):
            v = learn(c, "lead", ex)
            for name in CHALLENGERS:
                learn(c, f"direct-{name}", ex)
        lead = info(c, "lead")
        assert lead["version"] == v and lead["serving"] == "lead"
        side = {f["name"]: f for f in lead["followers"]}
        assert sorted(side) == sorted(CHALLENGERS)
        for name in CHALLENGERS:
            f, d = info(c, name), info(c, f"direct-{name}")
            assert f["version"] == v  # a position of the leader's log
            assert f["state_digest"] == d["state_digest"] == side[name]["state_digest"]
            assert f["examples_learned"] == d["examples_learned"] == 3000
            assert f["online_metrics"] == d["online_metrics"] == side[name]["online_metrics"]
            # the same detector state; its versions are positions of the leader's log
            same = ("detections", "last_detection_example", "estimate", "values_seen")
            assert [f["drift"][k] for k in same] == [d["drift"][k] for k in same]
        accuracy = {n: side[n]["online_metrics"]["accuracy"] for n in side}
        print("side by side:", accuracy, "leader:", lead["online_metrics"]["accuracy"])
        # a follower takes no updates of its own; a leader with followers stays
        r = c.post("/update", json={"model": "c-arow", "examples": before[0]})
        assert r.status_code == 409 and r.json()["detail"]["field"] == "model", r.text
        r = c.delete("/models/lead")
        assert r.status_code == 409 and "c-arow" in r.json()["detail"]["message"], r.text
        assert c.get("/models/lead").status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"algorithm": "arow", "features": FEATURES, "follows": "nope"}, "follows"),
        ({"algorithm": "arow", "features": FEATURES, "follows": "f"}, "follows"),  # itself
        ({"algorithm": "arow", "features": FEATURES, "follows": 3}, "follows"),
        (
            {"algorithm": "arow", "features": {"kind": "sparse", "dim": 124}, "follows": "lead"},
            "features",
        ),
        ({"algorithm": "ranksvm", "features": FEATURES, "follows": "lead"}, "follows"),
        ({"algorithm": "arow", "features": FEATURES, "follows": "c"}, "follows"),  # a follower
    ],
)
def test_bad_follows_are_refused(tmp_path: Path, body: dict[str, Any], field: str) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/lead", json=LEADER).status_code == 201
        follower = {"algorithm": "pa", "features": FEATURES, "follows": "lead"}
        assert c.put("/models/c", json=follower).status_code == 201
        r = c.put("/models/f", json=body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == field, r.text
        assert c.get("/models/f").status_code == 404


def test_promotion_under_load_answers_every_request(stream: Any, tmp_path: Path) -> None:
    rows, y = stream
    probe = {"model": "lead", "instances": [{"x": rows[i]} for i in range(3900, 4000)]}
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/lead", json=LEADER).status_code == 201
        create_challengers(c)
        for ex in batches(rows, y, 0, 2000):
            learn(c, "lead", ex)
        statuses: list[int] = []
        stop = threading.Event()

        def hammer() -> None:
            with srv.client() as hc:
                while not stop.is_set():
                    statuses.append(hc.post("/predict", json=probe).status_code)

        threads = [threading.Thread(target=hammer) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            r = ok(c.post("/models/lead/promote", json={"follower": "c-scw1"}))
            assert r["serving"] == "c-scw1" and r["version"] == 21
            for ex in batches(rows, y, 2000, 3000):  # the demoted leader keeps learning
                learn(c, "lead", ex)
            deadline = time.monotonic() + 30  # enough answers, however fast the learning was
            while len(statuses) <= 10 and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert len(statuses) > 10 and set(statuses) == {200}, statuses[:20]
        lead = info(c, "lead")
        assert lead["serving"] == "c-scw1" and lead["examples_learned"] == 3000
        served = ok(c.post("/predict", json=probe))
        own = ok(c.post("/predict", json={**probe, "model": "c-scw1"}))
        assert served["predictions"] == own["predictions"] and served["version"] == 31
        # undone: the leader's own state answers again, and differs from the challenger's
        assert ok(c.post("/models/lead/promote", json={"follower": None}))["serving"] == "lead"
        back = ok(c.post("/predict", json=probe))["predictions"]
        assert back != own["predictions"]
        # a name that does not follow it (now): a conflict with its state, naming the field
        r = c.post("/models/lead/promote", json={"follower": "direct"})
        assert r.status_code == 409 and r.json()["detail"]["field"] == "follower", r.text
        assert r.json()["detail"]["error"] == "not_a_follower", r.text
        r = c.post("/models/c-arow/promote", json={"follower": None})
        assert r.status_code == 409, r.text
        assert c.post("/models/lead/promote", json={}).status_code == 422
        assert c.post("/models/lead/promote", json={"follower": 1}).status_code == 422
        assert c.post("/models/nope/promote", json={"follower": None}).status_code == 404
        # a promoted follower is not deleted
        ok(c.post("/models/lead/promote", json={"follower": "c-pa1"}))
        assert c.delete("/models/c-pa1").status_code == 409
        assert c.delete("/models/c-arow").status_code == 204
        assert [f["name"] for f in info(c, "lead")["followers"]] == ["c-scw1", "c-pa1"]


def test_two_processes_and_a_restart_hold_the_same_followers(
    stream: Any, redis_url: str, tmp_path: Path
) -> None:
    rows, y = stream
    env = {**os.environ, "LEARNSERVE_REDIS_URL": redis_url, "LEARNSERVE_DATA_DIR": str(tmp_path),
           "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "7",
           "LEARNSERVE_LOG_RETAIN_ENTRIES": "3"}  # fmt: skip
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    try:
        cs = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for p in ports]
        assert cs[0].put("/models/lead", json=LEADER).status_code == 201
        todo = batches(rows, y, 0, 4000)
        for k, ex in enumerate(todo[:5]):
            learn(cs[k % 2], "lead", ex)
        create_challengers(cs[1])
        for k, ex in enumerate(todo[5:]):
            learn(cs[k % 2], "lead", ex)
            if k == 10:
                ok(cs[0].post("/models/lead/promote", json={"follower": "c-arow"}))
        version = len(todo) + 1  # and the promotion
        wait = {"model": "lead", "instances": [{"x": rows[0]}], "min_version": version}
        for c in cs:
            ok(c.post("/predict", json=wait))
        seen = [{n: info(c, n)["state_digest"] for n in ("lead", *CHALLENGERS)} for c in cs]
        serving = [info(c, "lead")["serving"] for c in cs]
        stop_process(procs.pop())
        port = free_port()
        procs.append(start_learnserve(port, env))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as fresh:
            ok(fresh.post("/predict", json=wait))
            seen.append({n: info(fresh, n)["state_digest"] for n in ("lead", *CHALLENGERS)})
            serving.append(info(fresh, "lead")["serving"])
            cp = info(fresh, "c-arow")["last_checkpoint"]
    finally:
        for p in procs:
            stop_process(p)
    assert seen[0] == seen[1] == seen[2], seen
    assert serving == ["c-arow"] * 3
    assert cp is not None and cp["position"] > 5  # followers are checkpointed with the leader


def test_followers_in_a_sharded_fleet(stream: Any, redis_url: str, tmp_path: Path) -> None:
    """Three members, one owner per model: the follower lives with its leader (placed by
    the leader's name); every member answers for it with the same state, that of a
    model sent the same requests."""
    rows, y = stream
    ports = [free_port() for _ in range(3)]
    procs = []
    try:
        for i, port in enumerate(ports):
            env = {
                **os.environ,
                "LEARNSERVE_REDIS_URL": redis_url,
                "LEARNSERVE_DATA_DIR": str(tmp_path / f"p{i}"),
                "LEARNSERVE_OWNERSHIP": "sharded",
                "LEARNSERVE_REPLICAS_PER_MODEL": "1",
                "LEARNSERVE_MEMBER_ID": f"p{i}",
                "LEARNSERVE_MEMBER_LEASE_SECONDS": "3",
            }
            procs.append(start_learnserve(port, env))
        cs = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for p in ports]
        assert cs[0].put("/models/lead", json=LEADER).status_code == 201
        body = {"algorithm": "arow", "features": FEATURES, "follows": "lead"}
        assert cs[1].put("/models/c-arow", json=body).status_code == 201
        assert (
            cs[2]
            .put("/models/direct", json={"algorithm": "arow", "features": FEATURES})
            .status_code
            == 201
        )
        for k, ex in enumerate(batches(rows, y, 0, 2000)):
            learn(cs[k % 3], "lead", ex)
            learn(cs[(k + 1) % 3], "direct", ex)
        wait = {"model": "lead", "instances": [{"x": rows[0]}], "min_version": 20}
        digests = set()
        for c in cs:
            ok(c.post("/predict", json=wait))
            digests.add(info(c, "c-arow")["state_digest"])
        direct = info(cs[0], "direct")["state_digest"]
        owners = [info(c, "c-arow")["ownership"]["owned_here"] for c in cs]
        lead_owners = [info(c, "lead")["ownership"]["owned_here"] for c in cs]
    finally:
        for p in procs:
            stop_process(p)
    assert digests == {direct}
    assert owners == lead_owners and sum(owners) == 1


def test_delayed_labels_reach_the_followers(stream: Any, tmp_path: Path) -> None:
    """Predicted with ids on the leader, labelled by id later: the follower learns the
    entry as a model sent x and y together does."""
    rows, y = stream
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/lead", json=LEADER).status_code == 201
        body = {"algorithm": "scw1", "features": FEATURES, "follows": "lead"}
        assert c.put("/models/c-scw1", json=body).status_code == 201
        assert (
            c.put("/models/xy", json={"algorithm": "scw1", "features": FEATURES}).status_code == 201
        )
        first = batches(rows, y, 0, BATCH)[0]  # a model predicts once it knows a label
        learn(c, "lead", first)
        learn(c, "xy", first)
        for s in range(BATCH, 1000, BATCH):
            inst = [{"x": rows[i], "id": f"r{i}"} for i in range(s, s + BATCH)]
            ok(c.post("/predict", json={"model": "lead", "instances": inst}))
            labels = [{"id": f"r{i}", "y": y[i]} for i in range(s, s + BATCH)]
            ok(c.post("/update", json={"model": "lead", "examples": labels}))
            learn(c, "xy", [{"x": rows[i], "y": y[i]} for i in range(s, s + BATCH)])
        assert info(c, "c-scw1")["state_digest"] == info(c, "xy")["state_digest"]
        assert info(c, "c-scw1")["examples_learned"] == 1000
