"""The ``auto`` reward model (service.models.decision_candidates): AROW and SGD
regression both learn every reward; the other takes over when its policy's value on
the model's logged decisions is over the serving one's by a standard error. Checked
against the same regressors and estimators driven by hand; persisted in checkpoints
and exports with either candidate serving; refused where it cannot work; malformed
candidates in an artifact are 422s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from learners.decisions.estimators import Difference, Evaluation, dr_parts
from learners.regression import make_regressor
from service.errors import ServiceError
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.models.decision_candidates import SWITCH_Z
from service.models.decision_follower import DecisionKind
from service.settings import Settings
from tests.service.serving import ServerThread
from tests.service.test_decisions_api import ok
from tests.service.test_decisions_export import (
    HASHED,
    _array,
    _set,
    export,
    play,
    put_artifact,
    recrafted,
)

SETTINGS = Settings(data_dir="/tmp/unused")
ACTIONS = [{"id": f"a{j}", "features": {"f": j % 3}} for j in range(4)]


def config(**extra: Any) -> dict[str, Any]:
    body = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 10}, **extra}
    return DecisionAdapter.normalize_config(body, SETTINGS)


def contexts(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"u": float(rng.normal()), "g": f"g{int(rng.integers(3))}"} for _ in range(n)]


def reward_of(ctx: dict[str, Any], action: str) -> float:
    """Action a<g> pays more for group g, a3 a little always, plus u's sign for a0."""
    g = int(ctx["g"][1:])
    base = 1.0 if action == f"a{g}" else 0.2 if action == "a3" else 0.0
    return base + (0.3 if action == "a0" and ctx["u"] > 0 else 0.0)


def step(model: DecisionAdapter, ctx: dict[str, Any], i: int) -> tuple[Any, dict[str, Any], float]:
    """One rank and its reward applied: the decision's rows, its event and the reward."""
    answer, record = model.rank({"context": ctx, "actions": ACTIONS}, SETTINGS, f"e{i}", 0)
    reward = reward_of(ctx, answer["action"])
    batch, ev = df.decode_event(record, model.spec.dim)
    ev = {k: v for k, v in ev.items() if k not in ("s", "rank")}
    model.apply(df.reward_entry([(batch, ev)], [reward]))
    return batch, ev, reward


def test_the_default_is_auto_and_what_it_refuses() -> None:
    c = config()
    assert c["decision"]["reward_algorithm"] == "auto"
    assert c["decision"]["candidates"] == ["arow_regression", "sgd_regression"]
    assert c["algorithm"] == "arow_regression"  # the first candidate serves at first
    # a policy that needs a variance: AROW by default, auto refused
    assert config(exploration={"policy": "thompson"})["decision"]["reward_algorithm"] == (
        "arow_regression"
    )
    assert "candidates" not in config(reward_model={"algorithm": "sgd_regression"})["decision"]
    refusals = [
        ({"exploration": {"policy": "ucb"}, "reward_model": {"algorithm": "auto"}},
         "exploration.policy", "needs a reward model with a variance"),
        ({"reward_model": {"algorithm": "auto", "params": {"r": 2.0}}},
         "reward_model.params", "default params"),
        ({"reward_model": {"algorithm": "best"}}, "reward_model.algorithm", "'auto'"),
    ]  # fmt: skip
    for extra, field, words in refusals:
        with pytest.raises(ServiceError) as e:
            config(**extra)
        assert e.value.field == field and words in e.value.message, extra


def test_every_candidate_learns_every_reward_and_the_best_valued_serves() -> None:
    """The model against AROW, SGD and the estimators run by hand on the same events:
    each candidate's policy valued by DR with the candidates' mean score as its reward
    model; SGD takes over when its value is over AROW's by a standard error of the
    paired difference, and back."""
    model = DecisionAdapter.create(config())
    dim = model.spec.dim
    hand = [make_regressor("arow", dim), make_regressor("sgd", dim)]
    values = [Evaluation(), Evaluation()]
    gap = Difference()  # AROW's DR terms less SGD's (the pair (0, 1))
    serving, seen = 0, set()
    for i, ctx in enumerate(contexts(300)):
        rows, ev, reward = step(model, ctx, i)
        p, a = ev["p"], ev["a"]
        scores = [reg.predict_details(rows)[0] for reg in hand]
        shared = ((scores[0] + scores[1]) / 2).tolist()
        terms = []
        for s, value in zip(scores, values, strict=True):
            q = model.policy.probabilities(s, None, [], i + 1).tolist()
            terms.append(value.update(p[a], reward, *dr_parts(q, shared, a)))
        gap.add(terms[0] - terms[1])
        for reg in hand:
            reg.update(rows.take([a]), [reward])
        d = -gap.estimate if serving == 0 else gap.estimate  # the other's over the serving
        if d > SWITCH_Z * gap.stderr:
            serving = 1 - serving
        seen.add(serving)
        assert model.candidates is not None and model.candidates.serving == serving, i
        assert model.model is model.candidates.models[serving]
    assert seen == {0, 1}  # on this stream each candidate serves at some point
    assert [m.state_digest() for m in model.candidates.models] == [r.state_digest() for r in hand]
    assert [v.to_dict() for v in model.candidates.values] == [v.to_dict() for v in values]
    desc = model.describe()["reward_models"]
    assert desc["serving"] == ["arow_regression", "sgd_regression"][serving]
    assert desc["differences"]["arow_regression - sgd_regression"] == {
        "estimate": gap.estimate, "stderr": gap.stderr
    }  # fmt: skip
    # rank scores with the candidate serving
    body = {"context": contexts(1, 9)[0], "actions": ACTIONS}
    answer, _ = model.rank(body, SETTINGS, "x", 0)
    want = hand[serving].predict_details(model.encode_rank(body, SETTINGS).batch)[0]
    got = {r["id"]: r["score"] for r in answer["ranking"]}
    assert [got[a["id"]] for a in ACTIONS] == pytest.approx(want.tolist(), rel=1e-12)


@pytest.mark.parametrize("serving", [0, 1])
def test_a_checkpoint_holds_every_candidate(serving: int) -> None:
    """Read back with either candidate serving: the same digest, and after the same
    ranks and rewards the same state again."""
    cfg = config()
    model = DecisionAdapter.create(cfg)
    stream = contexts(120)
    for i, ctx in enumerate(stream[:80]):
        step(model, ctx, i)
    assert model.candidates is not None
    model.candidates.serving = serving  # (which serves is the estimates' call; here, set)
    model.model = model.candidates.models[serving]
    blob = bytes(model.snapshot()())
    back = DecisionKind.from_checkpoint(cfg, blob)
    assert back.state_digest() == model.state_digest()
    assert back.model.algorithm == ("arow", "sgd")[serving]
    for i, ctx in enumerate(stream[80:], start=80):
        step(model, ctx, i)
        step(back, ctx, i)
    assert back.state_digest() == model.state_digest()
    # a digest sees the candidate not serving too
    other = back.candidates.others()[0]
    other.update(back.encode_rank({"context": stream[0], "actions": ACTIONS},
                                  SETTINGS).batch.take([0]), [5.0])  # fmt: skip
    assert back.state_digest() != model.state_digest()


def test_a_model_with_one_reward_model_has_no_candidates() -> None:
    model = DecisionAdapter.create(config(reward_model={"algorithm": "arow_regression"}))
    for i, ctx in enumerate(contexts(20)):
        step(model, ctx, i)
    from learners.artifact import loads

    art = loads(bytes(model.snapshot()()))
    assert model.candidates is None and "candidates" not in art.meta["decisions"]
    assert not [k for k in art.arrays if k.startswith("candidates.")]
    assert "reward_models" not in model.describe()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("decision-candidates")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def test_through_http_export_and_malformed_candidates(service: httpx.Client) -> None:
    c = service
    assert c.put("/models/dca", json=HASHED).status_code == 201
    play(c, "dca", range(30), rewarded=30)
    got = ok(c.get("/models/dca"))
    assert got["reward_model"] == "auto"
    cands = got["reward_models"]["candidates"]
    assert got["reward_models"]["serving"] in cands and set(cands) == {
        "arow_regression", "sgd_regression"
    }  # fmt: skip
    assert all(v["ips"]["n"] == 30 for v in cands.values())
    metrics = c.get("/metrics").text
    for name, v in cands.items():  # each candidate's estimates are gauges too
        gauge = (
            f'learnserve_decision_policy_value{{estimator="dr",model="dca",'
            f'policy="candidate:{name}"}}'
        )
        assert f"{gauge} {v['dr']['estimate']!r}" in metrics, gauge
    blob = export(c, "dca")
    r = put_artifact(c, "dca-copy", blob)
    assert r.status_code == 201 and r.json()["state_digest"] == got["state_digest"]
    assert ok(c.get("/models/dca-copy"))["reward_models"] == got["reward_models"]
    cases = {
        "no-array": (
            recrafted(blob, lambda a, m: [a.pop(_other_mu(blob))] and None),
            "candidates",
        ),
        "array-shape": (
            recrafted(blob, _array(_other_mu(blob), lambda v: v[:-1])),
            "candidates",
        ),
        "array-dtype": (
            recrafted(blob, _array(_other_mu(blob), lambda v: v.astype(np.float32))),
            "dtype float32",
        ),
        "no-candidates": (
            recrafted(blob, _set("decisions.candidates", None)),
            "meta.decisions.candidates",
        ),
        "values": (
            recrafted(blob, _set("decisions.candidates.values", [{"ips": 1}])),
            "meta.decisions.candidates.values[0]",
        ),
        "gaps": (
            recrafted(
                blob,
                _set(
                    "decisions.candidates.gaps",
                    [{"kind": "difference", "n": 3, "mean": 0.1, "m2": -1.0}],
                ),
            ),
            "meta.decisions.candidates.gaps[0]",
        ),
        "gaps-count": (
            recrafted(blob, _set("decisions.candidates.gaps", [])),
            "meta.decisions.candidates.gaps",
        ),
        "serving": (
            recrafted(blob, _set("decisions.candidates.serving", 5)),
            "meta.decisions.candidates",
        ),
        "counts": (
            recrafted(blob, _set("decisions.candidates.counts", [[1, 2], [-1, 0]])),
            "counts",
        ),
        "digest": (
            recrafted(blob, _array(_other_mu(blob), lambda v: v + 1.0)),
            "meta.decisions and counts) has the digest",
        ),
    }
    for case, (bad, words) in cases.items():
        r = put_artifact(c, f"dca-bad-{case}", bad)
        assert r.status_code == 422, (case, r.text)
        detail = r.json()["detail"]
        assert detail["field"] == "artifact" and words in detail["message"], (case, detail)
    # an odd value anywhere in the candidates: a 422 naming the artifact, never a 500
    odd: list[Any] = ["x", None, -1, 1.5, [1], [[1, 2]], {"a": 1}, 1e300, True, []]
    fields = ["", ".names", ".serving", ".values", ".gaps", ".counts"]
    for i, (f, value) in enumerate((f, v) for f in fields for v in odd):
        r = put_artifact(
            c, f"dca-odd-{i}", recrafted(blob, _set(f"decisions.candidates{f}", value))
        )
        assert r.status_code == 422, (f, value, r.text)
        assert r.json()["detail"]["field"] == "artifact", (f, value, r.text)


def _other_mu(blob: bytes) -> str:
    from learners.artifact import loads

    return next(k for k in loads(blob).arrays if k.startswith("candidates.") and k.endswith("mu"))


def test_an_export_with_sgd_serving_imports(service: httpx.Client) -> None:
    """An export whose reward model (the artifact's own) is the second candidate: the
    import builds AROW from its arrays, and the copy ranks as the original."""
    cfg = config()
    model = DecisionAdapter.create(cfg)
    for i, ctx in enumerate(contexts(300)):
        step(model, ctx, i)
        if model.candidates is not None and model.candidates.serving == 1:
            break
    assert model.candidates is not None and model.model.algorithm == "sgd"
    digest = model.state_digest()
    meta = {"service": {"model": "x", "config": cfg, "version": i + 1,
                        "examples_learned": i + 1, "state_digest": digest}}  # fmt: skip
    r = put_artifact(service, "dca-sgd", bytes(model.snapshot(meta)()))
    assert r.status_code == 201, r.text
    assert r.json()["state_digest"] == model.state_digest()
    got = ok(service.get("/models/dca-sgd"))
    assert got["reward_models"]["serving"] == "sgd_regression"
    body = {"context": contexts(1, 9)[0], "actions": ACTIONS, "event_id": "probe"}
    answer = ok(service.post("/models/dca-sgd/rank", json=body))
    want, _ = model.rank(body, SETTINGS, "probe", 0)
    assert answer["ranking"] == want["ranking"] and answer["action"] == want["action"]
