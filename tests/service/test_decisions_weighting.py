"""A decision model's ``weighting``: what its reward model learns each reward as, checked
against a regressor fed the same rows by hand, through HTTP (rank + reward)."""

from __future__ import annotations

from collections.abc import Iterator
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

BITS = 12


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("weighting")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def actions() -> list[dict[str, Any]]:
    return [{"id": f"a{i}", "features": {"topic": f"t{i % 3}"}} for i in range(5)]


@pytest.mark.parametrize("algorithm", ["arow_regression", "sgd_regression"])
@pytest.mark.parametrize("weighting", ["none", "ips", "dr"])
def test_each_reward_is_learned_as_the_weighting_says(
    service: httpx.Client, weighting: str, algorithm: str
) -> None:
    name = f"w-{weighting}-{algorithm}"
    body = {"algorithm": "decision", "features": {"kind": "hashed", "bits": BITS},
            "reward_model": {"algorithm": algorithm}, "weighting": weighting}  # fmt: skip
    r = service.put(f"/models/{name}", json=body)
    assert r.status_code == 201, r.text
    settings = Settings(data_dir="/tmp/unused")
    config = DecisionAdapter.normalize_config(body, settings)
    spec = FeatureSpec.hashed(BITS, intercept=True)
    reg = make_regressor(learner_algorithm(config["algorithm"]), spec.dim, config["params"])
    rng = np.random.default_rng(1)
    acts = actions()
    targets, log = [], []
    for i in range(60):
        ctx = {"u": int(rng.integers(0, 3)), "d": "m" if i % 2 else "w"}
        a = service.post(f"/models/{name}/rank", json={"context": ctx, "actions": acts,
                                                      "event_id": f"e{i}"}).json()  # fmt: skip
        reward = float(int(a["action"][1:]) % 3 == ctx["u"])
        r = service.post(f"/models/{name}/reward", json={"event_id": f"e{i}", "reward": reward})
        assert r.status_code == 200, r.text
        feats = next(x["features"] for x in acts if x["id"] == a["action"])
        row = crossed_batch(spec.dim, hashed_context(ctx),
                            [{"id": a["action"], "features": feats}], 10_000, True)  # fmt: skip
        p = a["probability"]
        if weighting == "dr":  # towards ŝ + (r − ŝ)/p, weight 1
            s = float(reg.predict_details(row)[0][0])
            target, weight = s + (reward - s) / p, 1.0
        else:
            target, weight = reward, (1.0 / p if weighting == "ips" else 1.0)
        targets.append(target)
        log.append((ctx, reward))
        reg.update(row, [target], [weight])
    info = service.get(f"/models/{name}").json()
    assert info["rewards_learned"] == 60
    # the adapter in process fed the same decisions and rewards: its reward model is the
    # hand-fed regressor's, and its whole state (estimates too) the service's
    model = DecisionAdapter.create(config)
    for i, (ctx, reward) in enumerate(log):
        _, record = model.rank({"context": ctx, "actions": acts}, settings, f"e{i}", 0)
        batch, ev = df.decode_event(record, model.spec.dim)
        ev = {k: v for k, v in ev.items() if k not in ("s", "rank")}
        model.apply(df.reward_entry([(batch, ev)], [reward]))
    assert str(reg.state_digest()) == str(model.model.state_digest())
    assert model.state_digest() == info["state_digest"]
    if weighting == "dr":  # the targets are estimates, not rewards: some leave [0, 1]
        assert any(not 0.0 <= t <= 1.0 for t in targets)
