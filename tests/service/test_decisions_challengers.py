"""Decision challengers (issue 34) through real HTTP: decision models that follow a
decision model learn its logged decisions and rewards (weighted by the leader's logged
probability) and estimate their own policy on them, without serving.

On a synthetic problem whose expected rewards are known (4 segments x 4 actions, the
segment's own action pays 0.9, any other 0.1), a leader explores with ε-greedy(0.5) and
three challengers follow it: ε-greedy(0.05) on 16 bits (its rows encoded again from the
leader's events), ε-greedy(0.9) and softmax on a PA reward model. Each challenger holds
the state of an in-process model fed the leader's decisions and rewards, also across a
restart (a checkpoint, then entries read again from the leader's log); each one's
estimates (IPS, SNIPS, DR) hold the true value of its policy in their intervals, and the
better policy's estimate is the higher. A challenger neither ranks nor takes rewards
(409); promoted, it ranks under the leader's name, and the leader's log keeps the
leader's rows; mismatched kinds are 422s naming the field.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from learners.features import FeatureSpec
from service.models import decision_features as df
from service.models import decision_records as dr
from service.models.decision_follower import DecisionKind
from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, start_learnserve, start_learnserve_all
from tests.service.test_decisions_api import refused

FEATURES = {"kind": "hashed", "bits": 14}
LEADER = {
    "algorithm": "decision", "features": FEATURES,
    "exploration": {"policy": "epsilon_greedy", "params": {"epsilon": 0.5}},
}  # fmt: skip
CHALLENGERS = {
    "c-good": {"features": {"kind": "hashed", "bits": 16},
               "exploration": {"policy": "epsilon_greedy", "params": {"epsilon": 0.05}}},
    "c-bad": {"exploration": {"policy": "epsilon_greedy", "params": {"epsilon": 0.9}}},
    "c-pa": {"reward_model": {"algorithm": "pa_regression", "params": {}},
             "exploration": {"policy": "softmax", "params": {"temperature": 0.2}}},
}  # fmt: skip
ACTIONS = [{"id": f"a{k}", "features": {"kind": f"k{k}"}} for k in range(4)]
N1, N2 = 300, 300  # events before and after the restart


def mean_reward(context: dict[str, Any], action: str) -> float:
    return 0.9 if action[1:] == context["seg"][1:] else 0.1


def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


class InProcess:
    """A model made from a config as the service stores it, fed the leader's decisions
    and rewards as the client saw them; it records each event's probabilities of its
    challenger target (its own policy)."""

    def __init__(self, config: dict[str, Any], leader_features: dict[str, Any]) -> None:
        self.model = DecisionKind.create(config)  # a challenger for a follower's config
        self.leader_spec = FeatureSpec.from_config(leader_features)
        self.truth: list[float] = []  # each event's expected reward under its policy
        self.contexts: list[dict[str, Any]] = []
        self.rewards: list[float] = []
        spy = self.model.own_targets

        def own_targets(p: list[float], scores: np.ndarray, rows: Any) -> dict[str, Any]:
            out = spy(p, scores, rows)
            ctx = self.contexts[-1]
            q = out.get("challenger", p)
            self.truth.append(sum(q[j] * mean_reward(ctx, a["id"]) for j, a in enumerate(ACTIONS)))
            return out

        self.model.own_targets = own_targets  # type: ignore[method-assign]

    def learn(self, eid: str, ctx: dict[str, Any], answer: dict[str, Any], r: float) -> None:
        ids = [a["id"] for a in ACTIONS]
        p = {x["id"]: x["probability"] for x in answer["ranking"]}
        ev = {"id": eid, "ids": ids, "p": [p[i] for i in ids], "ctx": ctx,
              "a": ids.index(answer["action"]), "v": answer["version"],
              "feat": [a["features"] for a in ACTIONS]}  # fmt: skip
        batch = dr.event_rows(self.leader_spec, ev, 10_000, "hash")  # (the leader's crossing)
        self.contexts.append(ctx)
        self.rewards.append(r)
        self.model.apply(df.reward_entry([(batch, ev)], [r]))


def play(
    c: httpx.Client, rng: np.random.Generator, lo: int, hi: int, models: list[InProcess]
) -> None:
    for i in range(lo, hi):
        ctx = {"seg": f"s{int(rng.integers(0, 4))}"}
        answer = ok(c.post("/models/lead/rank", json={"context": ctx, "actions": ACTIONS,
                                                      "event_id": f"e{i}"}))  # fmt: skip
        r = float(rng.random() < mean_reward(ctx, answer["action"]))
        ok(c.post("/models/lead/reward", json={"event_id": f"e{i}", "reward": r}))
        for m in models:
            m.learn(f"e{i}", ctx, answer, r)


def test_challengers_learn_and_estimate_the_leaders_log(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), checkpoint_every_updates=50)
    rng = np.random.default_rng(7)
    models: dict[str, InProcess] = {}
    with ServerThread(settings) as srv, srv.client() as c:
        leader_config = ok(c.put("/models/lead", json=LEADER))["config"]
        models["lead"] = InProcess(leader_config, leader_config["features"])
        play(c, rng, 0, 20, [models["lead"]])  # before the challengers: not theirs
        for name, body in CHALLENGERS.items():
            created = ok(c.put(f"/models/{name}", json={**LEADER, **body, "follows": "lead"}))
            follows = created["config"]["follows"]
            assert follows == {
                "model": "lead",
                "from_version": 20,
                "features": {**FEATURES, "intercept": True},
                "crossing": "hash",
            }
            assert (
                c.put(f"/models/{name}", json={**LEADER, **body, "follows": "lead"}).status_code
                == 200
            )
            models[name] = InProcess(created["config"], follows["features"])
        play(c, rng, 20, 20 + N1, list(models.values()))
        before = {n: ok(c.get(f"/models/{n}")) for n in models}
    with ServerThread(settings) as srv, srv.client() as c:  # restarted: checkpoint + log
        for n, info in before.items():
            after = ok(c.get(f"/models/{n}"))
            assert after["state_digest"] == info["state_digest"], n
            assert after["evaluation"] == info["evaluation"], n
        assert before["c-good"]["last_checkpoint"]["position"] < before["c-good"]["version"]
        play(c, rng, 20 + N1, 20 + N1 + N2, list(models.values()))
        lead = ok(c.get("/models/lead"))
        side = {f["name"]: f for f in lead["followers"]}
        metrics = c.get("/metrics").text
        infos = {n: ok(c.get(f"/models/{n}")) for n in CHALLENGERS}
    estimates = {}
    for name, info in infos.items():
        m = models[name]
        assert info["state_digest"] == m.model.state_digest() == side[name]["state_digest"], name
        assert info["rewards_learned"] == N1 + N2 == side[name]["rewards_learned"]
        assert info["version"] == lead["version"]
        assert info["challenger"] == {"follows": "lead", "features_reencoded": name == "c-good"}
        ev = info["evaluation"]["challenger"]
        assert side[name]["evaluation"]["challenger"] == ev
        truth = float(np.mean(m.truth))
        for est in ("ips", "snips", "dr"):
            assert ev[est]["n"] == N1 + N2
            assert ev[est]["lo"] <= truth <= ev[est]["hi"], (name, est, truth, ev[est])
        estimates[name] = (truth, {k: round(v["estimate"], 3) for k, v in ev.items()})
        gauge = (
            f'learnserve_decision_policy_value{{estimator="dr",model="{name}",policy="challenger"}}'
        )
        assert f"{gauge} {ev['dr']['estimate']!r}" in metrics
        # "served" on a challenger: the leader's policy on the same events (the mean reward)
        served = info["evaluation"]["served"]["ips"]["estimate"]
        assert abs(served - float(np.mean(m.rewards))) < 1e-9
    print("truth and estimates:", estimates)
    good, bad = (
        infos["c-good"]["evaluation"]["challenger"],
        infos["c-bad"]["evaluation"]["challenger"],
    )
    assert good["dr"]["lo"] > bad["dr"]["hi"] and good["snips"]["lo"] > bad["snips"]["hi"]
    assert models["lead"].model.state_digest() == lead["state_digest"]


def test_a_challenger_does_not_serve_until_promoted(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path))
    rng = np.random.default_rng(3)
    with ServerThread(settings) as srv, srv.client() as c:
        ok(c.put("/models/lead", json=LEADER))
        body = {**LEADER, **CHALLENGERS["c-good"], "follows": "lead"}
        config = ok(c.put("/models/c-good", json=body))["config"]
        leader_config = ok(c.get("/models/lead"))["config"]
        models = [InProcess(config, FEATURES | {"intercept": True}),
                  InProcess(leader_config, leader_config["features"])]  # fmt: skip
        play(c, rng, 0, 30, models)
        one = {"context": {"seg": "s1"}, "actions": ACTIONS, "event_id": "p0"}
        for path, sent in (("rank", one), ("reward", {"event_id": "e0", "reward": 1})):
            body409 = refused(c.post(f"/models/c-good/{path}", json=sent), 409, "model")
            assert body409["error"] == "follower" and "'lead'" in body409["message"]
        refused(c.post("/models/c-good/mode", json={"mode": "apprentice"}), 409, "model")
        refused(c.get("/models/c-good/decisions"), 409, "model")
        refused(c.post("/models/c-good/decisions", content=b"{}"), 409, "model")
        # promoted: it ranks for the leader with its own state (16 bits); the record
        # and so the leader's log hold the leader's rows (14 bits): both learn it
        assert (
            ok(c.post("/models/lead/promote", json={"follower": "c-good"}))["serving"] == "c-good"
        )
        answer = ok(c.post("/models/lead/rank", json=one))
        mine, _ = models[0].model.rank(one, settings, "p0", answer["version"])
        assert {k: answer[k] for k in ("action", "probability", "ranking")} == {
            k: mine[k] for k in ("action", "probability", "ranking")}  # fmt: skip
        ok(c.post("/models/lead/reward", json={"event_id": "p0", "reward": 1.0}))
        for m in models:
            m.learn("p0", one["context"], answer, 1.0)
        assert ok(c.get("/models/c-good"))["state_digest"] == models[0].model.state_digest()
        assert ok(c.get("/models/lead"))["state_digest"] == models[1].model.state_digest()
        lines = c.get("/models/lead/decisions").text.splitlines()
        assert len(lines) == 31 and '"p0"' in lines[-1]
        assert c.delete("/models/c-good").status_code == 409  # promoted
        ok(c.post("/models/lead/promote", json={"follower": None}))
        assert c.delete("/models/c-good").status_code == 204


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("f", {**LEADER, "follows": "plain"}, "follows"),  # a decision model of a regressor
        (
            "f",
            {"algorithm": "arow_regression", "features": FEATURES, "follows": "lead"},
            "follows",
        ),  # a regressor of a decision model
        ("f", {"algorithm": "arow", "features": FEATURES, "follows": "lead"}, "follows"),
        ("f", {**LEADER, "follows": "nope"}, "follows"),
        ("f", {**LEADER, "follows": "c"}, "follows"),  # a follower's follower
        ("f", {**LEADER, "features": {"kind": "sparse", "dim": 8}, "follows": "lead"}, "features"),
        (
            "f",
            {
                **LEADER,
                "exploration": {"policy": "thompson"},
                "reward_model": {"algorithm": "pa_regression"},
                "follows": "lead",
            },
            "exploration.policy",
        ),
        (
            "c",
            {**LEADER, "features": {"kind": "hashed", "bits": 12}, "follows": "lead"},
            "features.bits",
        ),  # c exists with 14 bits: a 409
    ],
)
def test_bad_challengers_are_refused(
    tmp_path: Path, name: str, body: dict[str, Any], field: str
) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        ok(c.put("/models/lead", json=LEADER))
        ok(c.put("/models/plain", json={"algorithm": "arow_regression", "features": FEATURES}))
        ok(c.put("/models/c", json={**LEADER, "follows": "lead"}))
        r = c.put(f"/models/{name}", json=body)
        assert r.status_code == (409 if name == "c" else 422), r.text
        assert r.json()["detail"]["field"] == field, r.text
        if name == "f":
            assert c.get("/models/f").status_code == 404


def test_two_processes_and_a_fresh_one_hold_the_same_challenger(
    redis_url: str, tmp_path: Path
) -> None:
    """Ranked on one worker, rewarded on the other, some events left to the default
    reward; a third process started from checkpoints and a trimmed log: one state."""
    env = {**os.environ, "LEARNSERVE_REDIS_URL": redis_url,
           "LEARNSERVE_DATA_DIR": str(tmp_path), "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "7",
           "LEARNSERVE_LOG_RETAIN_ENTRIES": "3"}  # fmt: skip
    leader = {**LEADER, "default_reward": 0.0, "reward_wait_seconds": 1}
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    names = ("lead2", "c2-good", "c2-pa")
    try:
        cs = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for p in ports]
        ok(cs[0].put("/models/lead2", json=leader))
        for name, kind in (("c2-good", "c-good"), ("c2-pa", "c-pa")):
            body = {**leader, **CHALLENGERS[kind], "follows": "lead2"}
            ok(cs[1].put(f"/models/{name}", json=body))
        rng = np.random.default_rng(11)
        for i in range(60):
            p, q = (cs[0], cs[1]) if i % 2 else (cs[1], cs[0])
            ctx = {"seg": f"s{int(rng.integers(0, 4))}"}
            d = ok(p.post("/models/lead2/rank", json={"context": ctx, "actions": ACTIONS,
                                                      "event_id": f"e{i}"}))  # fmt: skip
            if i % 7 != 3:  # the others learn the default reward (0) after a second
                r = float(rng.random() < mean_reward(ctx, d["action"]))
                ok(q.post("/models/lead2/reward", json={"event_id": f"e{i}", "reward": r}))
            if i == 40:
                ok(cs[0].post("/models/lead2/promote", json={"follower": "c2-good"}))
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = [{n: ok(c.get(f"/models/{n}")) for n in names} for c in cs]
            if all(s[n]["rewards_learned"] == 60 for s in seen for n in names):
                break
            time.sleep(0.2)
        version = seen[0]["lead2"]["version"]
        digests = [{n: s[n]["state_digest"] for n in names} for s in seen]
        stop_process(procs.pop())
        port = free_port()
        procs.append(start_learnserve(port, env))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as fresh:
            wait = {"context": {"seg": "s0"}, "actions": ACTIONS, "event_id": "late"}
            for _ in range(100):  # loaded from the store, at the leader's version
                if ok(fresh.get("/models/lead2"))["version"] >= version:
                    break
                time.sleep(0.1)
            infos = {n: ok(fresh.get(f"/models/{n}")) for n in names}
            digests.append({n: infos[n]["state_digest"] for n in names})
            assert infos["lead2"]["serving"] == "c2-good"
            assert ok(fresh.post("/models/lead2/rank", json=wait))["model"] == "lead2"
        for c in cs:
            c.close()
    finally:
        for proc in procs:
            stop_process(proc)
    assert [s["c2-good"]["rewards_learned"] for s in seen] == [60, 60]
    assert digests[0] == digests[1] == digests[2], digests
    assert infos["c2-good"]["last_checkpoint"]["position"] > 7  # with its leader's
