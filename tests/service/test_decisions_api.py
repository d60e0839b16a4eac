"""Decision models through real HTTP: ``PUT`` a ``"decision"`` model, ``rank`` actions for
a context, ``reward`` the chosen action; a retried event answers the same decision and
logs nothing new; a reward is learned once (the same again is a no-op, another a 409);
bad input is a 4xx naming the field; the service's state equals the in-process model
fed the same decisions and rewards; a restart keeps the state (SQLite and Redis).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from learners.features import FeatureSpec
from learners.regression import make_regressor
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.models.decision_crossing import crossed_batch, hashed_context
from service.models.regression import learner_algorithm
from service.settings import Settings
from tests.service.serving import ServerThread

BODY = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 14}}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("decisions")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def put(c: httpx.Client, name: str, **extra: Any) -> dict[str, Any]:
    r = c.put(f"/models/{name}", json={**BODY, **extra})
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


def actions(k: int) -> list[dict[str, Any]]:
    return [{"id": f"a{i}", "features": {"topic": f"t{i % 4}", "len": (i % 7) / 7}}
            for i in range(k)]  # fmt: skip


def rank(c: httpx.Client, name: str, **body: Any) -> httpx.Response:
    return c.post(f"/models/{name}/rank", json=body)


def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return dict(r.json())


def refused(r: httpx.Response, status: int, field: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = dict(r.json()["detail"])
    assert body.get("field") == field, body
    return body


def true_reward(context: dict[str, Any], action: str) -> float:
    """Users of country c like actions whose number has c's parity."""
    return float(int(action[1:]) % 2 == context["country"] % 2)


def test_rank_reward_round_trip_and_the_in_process_model(service: httpx.Client) -> None:
    put(service, "dec")
    acts = actions(60)
    rng = np.random.default_rng(0)
    chosen: list[tuple[str, dict[str, Any], float]] = []
    for i in range(40):
        ctx = {"country": int(rng.integers(0, 2)), "device": "m" if i % 3 else "d"}
        a = ok(rank(service, "dec", context=ctx, actions=acts, event_id=f"e{i}"))
        assert a["event_id"] == f"e{i}" and a["ranking"][0]["id"] == a["action"]
        assert len(a["ranking"]) == 60
        assert abs(sum(x["probability"] for x in a["ranking"]) - 1.0) < 1e-9
        r = true_reward(ctx, a["action"])
        out = ok(service.post("/models/dec/reward", json={"event_id": f"e{i}", "reward": r}))
        assert out["applied"] == 1 and out["events"] == [{"event_id": f"e{i}", "learned": True}]
        chosen.append((a["action"], ctx, a["probability"]))
    info = ok(service.get("/models/dec"))
    assert info["kind"] == "decision" and info["rewards_learned"] == 40
    served = info["evaluation"]["served"]["ips"]
    assert served["n"] == 40
    mean = sum(true_reward(ctx, a) for a, ctx, _ in chosen) / 40
    assert abs(served["estimate"] - mean) < 1e-12  # on-policy: the mean reward
    gauge = 'learnserve_decision_policy_value{estimator="ips",model="dec",policy="served"}'
    assert f"{gauge} {served['estimate']!r}" in service.get("/metrics").text
    # in process: the same rows (the chosen action's features), rewards and weights
    # (1/p with "ips"), into the reward model the config names
    settings = Settings(data_dir="/tmp/unused")
    config = DecisionAdapter.normalize_config(BODY, settings)
    ips = config["decision"]["weighting"] == "ips"
    spec = FeatureSpec.hashed(14, intercept=True)
    reg = make_regressor(learner_algorithm(config["algorithm"]), spec.dim, config["params"])
    for action, ctx, p in chosen:
        feats = next(x["features"] for x in acts if x["id"] == action)
        row = crossed_batch(spec.dim, hashed_context(ctx), [{"id": action, "features": feats}],
                            10_000, True)  # fmt: skip
        reg.update(row, [true_reward(ctx, action)], [1.0 / p] if ips else None)
    model = DecisionAdapter.create(config)
    # ... and the whole adapter (reward model and estimates) fed the same entries
    for i, (action, ctx, p) in enumerate(chosen):
        answer, record = model.rank({"context": ctx, "actions": acts}, settings, f"e{i}", 0)
        batch, ev = df.decode_event(record, model.spec.dim)
        ev = {k: v for k, v in ev.items() if k not in ("s", "rank")}
        assert answer["action"] == action and answer["probability"] == p
        model.apply(df.reward_entry([(batch, ev)], [true_reward(ctx, action)]))
    assert str(reg.state_digest()) == str(model.model.state_digest())
    assert model.state_digest() == info["state_digest"]


def test_a_retried_event_is_the_same_decision(service: httpx.Client) -> None:
    put(service, "dec-retry")
    first = ok(rank(service, "dec-retry", context={"country": 1}, actions=actions(5),
                    event_id="same"))  # fmt: skip
    again = ok(rank(service, "dec-retry", context={"country": 0}, actions=actions(3),
                    event_id="same"))  # fmt: skip
    assert again == first
    ok(service.post("/models/dec-retry/reward", json={"event_id": "same", "reward": 0.5}))
    after = ok(rank(service, "dec-retry", context={}, actions=actions(2), event_id="same"))
    assert after["action"] == first["action"] and after["rewarded"] is True
    # no event id: a new one each time
    a = ok(rank(service, "dec-retry", actions=actions(3)))
    b = ok(rank(service, "dec-retry", actions=actions(3)))
    assert a["event_id"] != b["event_id"] and len(a["event_id"]) == 32


def test_a_reward_is_learned_once(service: httpx.Client) -> None:
    put(service, "dec-once")
    ok(rank(service, "dec-once", context={"country": 1}, actions=actions(4), event_id="x"))
    first = ok(service.post("/models/dec-once/reward",
                            json={"rewards": [{"event_id": "x", "reward": 1}]}))  # fmt: skip
    digest = ok(service.get("/models/dec-once"))["state_digest"]
    same = ok(service.post("/models/dec-once/reward",
                           json={"rewards": [{"event_id": "x", "reward": 1}]}))  # fmt: skip
    assert same["applied"] == 0 and same["events"] == [{"event_id": "x", "learned": False}]
    assert same["version"] == first["version"]
    body = refused(service.post("/models/dec-once/reward",
                                json={"rewards": [{"event_id": "x", "reward": 0}]}),
                   409, "rewards[0].event_id")  # fmt: skip
    assert body["error"] == "event_rewarded"
    assert ok(service.get("/models/dec-once"))["state_digest"] == digest
    # a keyed retry answers the first answer
    ok(rank(service, "dec-once", actions=actions(4), event_id="y"))
    h = {"Idempotency-Key": "k-1"}
    one = ok(service.post("/models/dec-once/reward", json={"event_id": "y", "reward": 2},
                          headers=h))  # fmt: skip
    two = service.post("/models/dec-once/reward", json={"event_id": "y", "reward": 2}, headers=h)
    assert ok(two)["version"] == one["version"]
    assert ok(service.get("/models/dec-once"))["rewards_learned"] == 2


def test_bad_input_is_a_4xx_naming_the_field(service: httpx.Client) -> None:
    put(service, "dec-bad", max_actions=50)
    ok(rank(service, "dec-bad", actions=actions(50), event_id="fine"))
    refused(rank(service, "dec-bad", actions=actions(51)), 413, "actions")
    refused(rank(service, "dec-bad", actions=[]), 422, "actions")
    refused(rank(service, "dec-bad", context={"x": True}, actions=actions(2)), 422, "context.x")
    refused(rank(service, "dec-bad", actions=[{"id": "a"}, {"id": "a"}]), 422, "actions[1].id")
    refused(rank(service, "dec-bad", actions=actions(2), excluded=["a0", "a1"]), 422, "excluded")
    refused(rank(service, "dec-bad", actions=actions(2), excluded=["zz"]), 422, "excluded[0]")
    refused(rank(service, "no-such-model", actions=actions(2)), 404, "model")
    nan = b'{"event_id": "fine", "reward": NaN}'
    refused(service.post("/models/dec-bad/reward", content=nan,
                         headers={"content-type": "application/json"}), 422, "reward")  # fmt: skip
    refused(service.post("/models/dec-bad/reward", json={"event_id": "fine", "reward": 2e6}),
            422, "reward")  # fmt: skip
    refused(service.post("/models/dec-bad/reward", json={"rewards": [
        {"event_id": "fine", "reward": 1}, {"event_id": "nope", "reward": 1}]}),
        404, "rewards[1].event_id")  # fmt: skip
    refused(service.post("/models/dec-bad/reward", json={"rewards": [{"event_id": "fine"}]}),
            422, "rewards[0].reward")  # fmt: skip
    assert ok(service.get("/models/dec-bad"))["rewards_learned"] == 0  # nothing learned
    assert service.get("/models/dec-bad/state").status_code == 200  # test_decisions_export
    # a decision model has no /update or /predict; another kind has no rank
    refused(service.post("/models/dec-bad/update", json={"examples": [{"x": {}, "y": 1}]}),
            409, "model")  # fmt: skip
    r = service.put("/models/plain", json={"algorithm": "arow_regression",
                                           "features": {"kind": "hashed", "bits": 8}})  # fmt: skip
    assert r.status_code in (200, 201), r.text
    refused(rank(service, "plain", actions=actions(2)), 409, "model")
    refused(service.put("/models/dec-x", json={**BODY, "exploration": {"policy": "greedy"}}),
            422, "exploration.policy")  # fmt: skip
    refused(service.put("/models/dec-x", json={**BODY, "features": {"kind": "dense", "dim": 3}}),
            422, "features")  # fmt: skip


def _restart(settings: Settings) -> None:
    with ServerThread(settings) as srv, srv.client() as c:
        put(c, "dec-r")
        for i in range(6):
            a = ok(rank(c, "dec-r", context={"country": i % 2}, actions=actions(8),
                        event_id=f"r{i}"))  # fmt: skip
            if i < 5:
                ok(c.post("/models/dec-r/reward", json={"event_id": f"r{i}", "reward": 1.0}))
        ok(c.post("/models/dec-r/checkpoint"))
        ok(c.post("/models/dec-r/reward", json={"event_id": "r5", "reward": 0.0}))
        ok(c.post("/models/dec-r/mode", json={"mode": "apprentice"}))  # replayed from the log
        before = ok(c.get("/models/dec-r"))
    with ServerThread(settings) as srv, srv.client() as c:
        after = ok(c.get("/models/dec-r"))
        assert after["state_digest"] == before["state_digest"]
        assert after["evaluation"] == before["evaluation"]
        assert after["mode"] == "apprentice" and after["agreement"] == before["agreement"]
        again = ok(rank(c, "dec-r", actions=actions(2), event_id="r5"))
        assert again["action"] == a["action"] and again["rewarded"] is True
        refused(c.post("/models/dec-r/reward", json={"event_id": "r5", "reward": 1.0}),
                409, "event_id")  # fmt: skip


def test_a_restart_keeps_the_state_sqlite(tmp_path: Path) -> None:
    _restart(Settings(data_dir=str(tmp_path)))


def test_a_restart_keeps_the_state_redis(tmp_path: Path, redis_server: Any, redis_url: str) -> None:
    _restart(Settings(data_dir=str(tmp_path), redis_url=redis_url))


def _default_vs_late(settings: Settings, name: str) -> None:
    acts = actions(6)
    with ServerThread(settings) as srv, srv.client() as c:
        put(c, name, default_reward=0.0, reward_wait_seconds=1)
        ranked = {e: ok(rank(c, name, context={"country": 1}, actions=acts, event_id=e))
                  for e in ("e1", "e2", "e3")}  # fmt: skip
        ok(c.post(f"/models/{name}/reward", json={"event_id": "e1", "reward": 1.0}))
        info: dict[str, Any] = {}
        for _ in range(100):  # the sweep runs about once a second
            info = ok(c.get(f"/models/{name}"))
            if info["rewards_learned"] == 3:
                break
            time.sleep(0.1)
        assert info["rewards_learned"] == 3, info
        late = refused(c.post(f"/models/{name}/reward", json={"event_id": "e2", "reward": 1.0}),
                       409, "event_id")  # fmt: skip
        assert late["error"] == "default_reward_applied"
        again = ok(rank(c, name, actions=acts, event_id="e3"))
        assert again["action"] == ranked["e3"]["action"] and again["rewarded"] is True
        time.sleep(1.5)  # another sweep or two: nothing more to learn
        after = ok(c.get(f"/models/{name}"))
        assert after["rewards_learned"] == 3 and after["state_digest"] == info["state_digest"]
        text = c.get("/metrics").text
        assert f'learnserve_late_rewards_total{{model="{name}"}} 1.0' in text, [
            x for x in text.splitlines() if "rewards" in x
        ]
    # in process: e1's reward, then e2 and e3 with the default, in one entry
    s = Settings(data_dir="/tmp/unused")
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(
        {**BODY, "default_reward": 0.0, "reward_wait_seconds": 1}, s))  # fmt: skip
    kept = {}
    for e in ("e1", "e2", "e3"):
        _, record = model.rank({"context": {"country": 1}, "actions": acts}, s, e, 0)
        batch, ev = df.decode_event(record, model.spec.dim)
        kept[e] = (batch, {k: v for k, v in ev.items() if k not in ("s", "rank")})
    model.apply(df.reward_entry([kept["e1"]], [1.0]))
    model.apply(df.reward_entry([kept["e2"], kept["e3"]], [0.0, 0.0]))
    assert model.state_digest() == info["state_digest"]


def test_default_reward_and_a_late_reward_never_both_learn_sqlite(tmp_path: Path) -> None:
    _default_vs_late(Settings(data_dir=str(tmp_path)), "dec-def-sqlite")


def test_default_reward_and_a_late_reward_never_both_learn_redis(
    tmp_path: Path, redis_server: Any, redis_url: str
) -> None:
    _default_vs_late(Settings(data_dir=str(tmp_path), redis_url=redis_url), "dec-def-redis")


def test_the_decision_log_as_dsjson(service: httpx.Client) -> None:
    from learners.decisions.dsjson import from_dsjson

    put(service, "dec-log")
    acts = actions(5)
    chosen = {}
    for i in range(4):
        a = ok(rank(service, "dec-log", context={"country": i % 2, "u": f"u{i}"}, actions=acts,
                    event_id=f"L{i}"))  # fmt: skip
        chosen[f"L{i}"] = a
        if i != 2:  # L2 gets no reward: not in the log
            ok(service.post("/models/dec-log/reward", json={"event_id": f"L{i}", "reward": i}))
    r = service.get("/models/dec-log/decisions")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    recs = [from_dsjson(line) for line in r.text.splitlines()]
    assert [x.event_id for x in recs] == ["L0", "L1", "L3"]
    for x in recs:
        a = chosen[x.event_id]
        assert x.reward == float(x.event_id[1:])
        assert x.actions[x.chosen]["_id"] == a["action"] and x.probability == a["probability"]
        assert x.context["u"] == f"u{x.event_id[1:]}" and x.version is not None
    nxt = r.headers["x-next-after"]
    r2 = service.get(f"/models/dec-log/decisions?after={nxt}")
    assert r2.status_code == 200 and r2.text == "" and r2.headers["x-next-after"] == nxt
    assert service.get("/models/plain/decisions").status_code in (404, 409)


def test_many_actions_are_encoded_off_the_loop_alike(service: httpx.Client) -> None:
    """256 actions x 10 features x 20 context features (59 000 crossed features: encoded
    in a thread) decide as the in-process model does."""
    put(service, "dec-big", features={"kind": "hashed", "bits": 20})
    ctx = {f"c{j}": j / 10 for j in range(20)}
    acts = [{"id": f"a{i}", "features": {f"f{j}": (i + j) % 5 for j in range(10)}}
            for i in range(256)]  # fmt: skip
    a = ok(rank(service, "dec-big", context=ctx, actions=acts, event_id="big"))
    assert len(a["ranking"]) == 256
    s = Settings(data_dir="/tmp/unused")
    body = {**BODY, "features": {"kind": "hashed", "bits": 20}}
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(body, s))
    mine, _ = model.rank({"context": ctx, "actions": acts}, s, "big", 0)
    assert mine == {k: v for k, v in a.items() if k != "model"}


def test_apprentice_mode_serves_the_first_action_and_reports_agreement(
    service: httpx.Client,
) -> None:
    put(service, "dec-app", mode="apprentice")
    acts = actions(10)
    for i in range(20):
        ctx = {"country": i % 2}
        a = ok(rank(service, "dec-app", context=ctx, actions=acts, excluded=["a0"],
                    event_id=f"p{i}"))  # fmt: skip
        assert a["action"] == "a1" and a["probability"] == 1.0
        ok(service.post("/models/dec-app/reward",
                        json={"event_id": f"p{i}", "reward": true_reward(ctx, "a1")}))  # fmt: skip
    info = ok(service.get("/models/dec-app"))
    assert info["mode"] == "apprentice" and info["agreement"]["n"] == 20
    assert 0.0 <= info["agreement"]["rate"] <= 1.0
    refused(service.post("/models/dec-app/mode", json={"mode": "greedy"}), 422, "mode")
    switched = ok(service.post("/models/dec-app/mode", json={"mode": "learning"}))
    assert switched["mode"] == "learning" and switched["version"] == info["version"] + 1
    a = ok(rank(service, "dec-app", context={"country": 0}, actions=acts, event_id="q"))
    assert a["probability"] < 1.0  # exploring now (SquareCB over 10 actions)
    assert ok(service.get("/models/dec-app"))["mode"] == "learning"


def test_racing_retries_answer_one_decision(service: httpx.Client) -> None:
    """Two ranks of one event at once (a client's retry racing its first attempt), with
    different actions: both answer the one decision kept, whichever wrote first."""
    from concurrent.futures import ThreadPoolExecutor

    put(service, "dec-race")
    url = str(service.base_url)

    def send(body: dict[str, Any]) -> dict[str, Any]:
        with httpx.Client(base_url=url, timeout=30) as c:
            return ok(rank(c, "dec-race", **body))

    with ThreadPoolExecutor(4) as pool:
        for i in range(15):
            bodies = [{"actions": actions(k), "event_id": f"race{i}"} for k in (3, 7)]
            first, second = pool.map(send, bodies)
            assert first == second


def test_warm_start_from_a_dsjson_log(service: httpx.Client) -> None:
    """One model's DSJSON log posted to another: the same reward model and estimates."""
    put(service, "dec-src")
    acts = actions(6)
    for i in range(12):
        ctx = {"country": i % 2}
        a = ok(rank(service, "dec-src", context=ctx, actions=acts, event_id=f"w{i}"))
        reward = {"event_id": f"w{i}", "reward": true_reward(ctx, a["action"])}
        ok(service.post("/models/dec-src/reward", json=reward))
    ok(rank(service, "dec-src", actions=acts, event_id="no-reward"))
    log = service.get("/models/dec-src/decisions").text
    put(service, "dec-dst")
    nd = {"content-type": "application/x-ndjson"}
    r = ok(service.post("/models/dec-dst/decisions", content=log, headers=nd))
    assert r["applied"] == 12 and r["skipped"] == 0
    src, dst = ok(service.get("/models/dec-src")), ok(service.get("/models/dec-dst"))
    assert dst["state_digest"] == src["state_digest"] and dst["evaluation"] == src["evaluation"]
    bad = log.splitlines()[0].replace('"p":[', '"p":[2,')
    refused(service.post("/models/dec-dst/decisions", content=bad, headers=nd), 422, "lines[0]")
    assert ok(service.get("/models/dec-dst"))["rewards_learned"] == 12
