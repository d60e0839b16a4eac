"""Online regression through real HTTP: PA and AROW regressors created with ``PUT``,
taught with ``/update`` (finite numbers as ``y``), asked with ``/predict`` (``value``,
AROW's ``variance`` and 90 % ``interval``); refusals that name the field and leave the
model unchanged; the service's state equals the in-process learner fed the same rows,
for one request of N and N requests of one, after a restart and through export and
import; progressive MAE, RMSE and R² in ``GET /models/{name}`` and ``/metrics``;
delayed targets by id; a regressor challenging a regressor; v2's FP64 outputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from learners.features import FeatureSpec
from learners.regression import make_regressor
from service.settings import Settings
from tests.service.serving import ServerThread

DIM = 6
OCTETS = {"content-type": "application/octet-stream"}


def stream(n: int, seed: int = 3) -> tuple[list[list[float]], list[float]]:
    """A linear target with noise, on a scale far from 1 (prices around 250 000)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, DIM))
    w = np.array([3.0, -2.0, 0.5, 0.0, 1.0, -1.5])
    y = 250_000.0 + 20_000.0 * (X @ w) + rng.normal(scale=5_000.0, size=n)
    return X.round(6).tolist(), y.round(2).tolist()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("regression")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def put(c: httpx.Client, name: str, algorithm: str, features: dict[str, Any] | None = None,
        **extra: Any) -> httpx.Response:  # fmt: skip
    body = {"algorithm": algorithm, "features": features or {"kind": "dense", "dim": DIM}}
    r = c.put(f"/models/{name}", json={**body, **extra})
    assert r.status_code in (200, 201), r.text
    return r


def learn(c: httpx.Client, name: str, X: list[Any], y: list[float], batch: int) -> int:
    version = 0
    for s in range(0, len(X), batch):
        ex = [{"x": x, "y": t} for x, t in zip(X[s : s + batch], y[s : s + batch], strict=True)]
        r = c.post(f"/models/{name}/update", json={"examples": ex})
        assert r.status_code == 200, r.text
        version = r.json()["version"]
    return version


def digest(c: httpx.Client, name: str) -> str:
    r = c.get(f"/models/{name}")
    assert r.status_code == 200, r.text
    return str(r.json()["state_digest"])


@pytest.mark.parametrize("algorithm", ["pa", "pa1", "pa2", "arow", "sgd"])
def test_the_service_learns_what_the_learner_learns(service: httpx.Client, algorithm: str) -> None:
    X, y = stream(300)
    name = f"reg-{algorithm}"
    put(service, name, f"{algorithm}_regression")
    learn(service, name, X, y, batch=50)
    put(service, f"{name}-one", f"{algorithm}_regression")
    learn(service, f"{name}-one", X[:40], y[:40], batch=1)
    learn(service, f"{name}-one", X[40:], y[40:], batch=260)
    # in process: the same rows, with the intercept the service adds by default
    spec = FeatureSpec.dense(DIM, intercept=True)
    reg = make_regressor(algorithm, spec.dim, {})
    reg.features_ = spec
    reg.update(spec.encode(X), y)
    assert digest(service, name) == digest(service, f"{name}-one") == reg.state_digest()
    Q, _ = stream(5, seed=9)
    r = service.post(f"/models/{name}/predict", json={"instances": [{"x": q} for q in Q]})
    assert r.status_code == 200, r.text
    answers = r.json()["predictions"]
    values, variances = reg.predict_details(spec.encode(Q))
    assert [a["value"] for a in answers] == values.tolist()
    if algorithm == "arow":
        assert variances is not None
        assert [a["variance"] for a in answers] == variances.tolist()
        for a in answers:
            lo, hi = a["interval"]
            assert lo < a["value"] < hi
            assert hi - a["value"] == pytest.approx(1.6448536269514722 * a["variance"] ** 0.5)
    else:
        assert all(set(a) == {"value"} for a in answers)
    # the progressive figures, against the running mean's error on the same stream
    om = service.get(f"/models/{name}").json()["online_metrics"]
    assert om["cumulative"]["examples"] == 300
    mean_mae = float(np.mean(np.abs(np.array(y) - np.mean(y))))
    assert 0 < om["cumulative"]["mae"] < mean_mae
    assert om["rmse"] >= om["mae"]
    assert om["r2"] > 0.5  # the stream is linear: far better than its mean
    if algorithm == "arow":
        assert 0.6 < om["interval_coverage"] <= 1.0
    else:
        assert om["interval_coverage"] is None


BAD_TARGETS = [
    ("3.5", "str"),
    (True, "bool"),
    (None, "NoneType"),
    ([1.0], "list"),
]


@pytest.mark.parametrize("bad,what", BAD_TARGETS)
def test_a_target_that_is_no_finite_number_is_refused_naming_it(
    service: httpx.Client, bad: Any, what: str
) -> None:
    put(service, "reg-bad", "arow_regression")
    before = digest(service, "reg-bad")
    ex = [{"x": [0.0] * DIM, "y": 1.0}, {"x": [1.0] * DIM, "y": bad}]
    r = service.post("/models/reg-bad/update", json={"examples": ex})
    assert r.status_code == 422, r.text
    err = r.json()["detail"]
    assert err["field"] == "examples[1].y" and what in err["message"], err
    assert digest(service, "reg-bad") == before


def test_non_finite_and_huge_targets_are_refused(service: httpx.Client) -> None:
    put(service, "reg-huge", "pa1_regression")
    before = digest(service, "reg-huge")
    for raw in (b"1e400", b"-1e999", b"NaN", b"Infinity", b"1" + b"0" * 400):
        body = b'{"examples": [{"x": [1, 2, 3, 4, 5, 6], "y": ' + raw + b"}]}"
        r = service.post("/models/reg-huge/update", content=body,
                         headers={"content-type": "application/json"})  # fmt: skip
        assert 400 <= r.status_code < 500, (raw, r.text)
    assert digest(service, "reg-huge") == before
    # finite, but the target's square overflows the running statistics: the whole
    # request is refused, naming the example, and the model is unchanged
    for y in (1e300, -1e300):
        ex = [{"x": [1.0] * DIM, "y": 1.0}, {"x": [1.0] * DIM, "y": y}]
        r = service.post("/models/reg-huge/update", json={"examples": ex})
        assert r.status_code == 422, r.text
        err = r.json()["detail"]
        assert err["field"] == "examples[1].y" and "the target" in err["message"], r.text
        assert digest(service, "reg-huge") == before
    # huge feature values with an ordinary target: the features are named
    ex = [{"x": [1.0] * DIM, "y": 1.0}, {"x": [1e300] * DIM, "y": 2.0}]
    r = service.post("/models/reg-huge/update", json={"examples": ex})
    assert r.status_code == 422, r.text
    assert r.json()["detail"]["field"] == "examples[1].x", r.text
    assert digest(service, "reg-huge") == before
    r = service.post("/models/reg-huge/update", json={"examples": [{"x": [1.0] * 5, "y": 1.0}]})
    assert r.status_code == 422 and "examples[0].x" in r.json()["detail"]["field"], r.text
    r = service.post("/models/nope-reg/update", json={"examples": [{"x": [1.0], "y": 1.0}]})
    assert r.status_code == 404


def test_an_unknown_regression_param_is_refused(service: httpx.Client) -> None:
    body = {"algorithm": "arow_regression", "params": {"C": 1.0},
            "features": {"kind": "dense", "dim": 3}}  # fmt: skip
    r = service.put("/models/reg-param", json=body)
    assert r.status_code == 422 and "params" in r.json()["detail"]["field"], r.text
    body["params"] = {"r": -1.0}
    r = service.put("/models/reg-param", json=body)
    assert r.status_code == 422 and r.json()["detail"]["field"] == "params.r", r.text


def test_sparse_and_hashed_regressors_serve_values(service: httpx.Client) -> None:
    X, y = stream(200)
    for name, features, rows in (
        ("reg-sparse", {"kind": "sparse", "dim": DIM},
         [{str(j): v for j, v in enumerate(x) if v} for x in X]),
        ("reg-hashed", {"kind": "hashed", "bits": 12},
         [{f"f{j}": v for j, v in enumerate(x)} for x in X]),
    ):  # fmt: skip
        put(service, name, "arow_regression", features)
        learn(service, name, rows, y, batch=20)
        spec = FeatureSpec.from_config({**features, "intercept": True})
        reg = make_regressor("arow", spec.dim, {})
        reg.update(spec.encode(rows), y)
        assert digest(service, name) == reg.state_digest(), name
        r = service.post(f"/models/{name}/predict", json={"instances": [{"x": rows[0]}]})
        assert r.json()["predictions"][0]["value"] == reg.predict(spec.encode(rows[:1]))[0]


def test_metrics_export_the_regression_gauges(service: httpx.Client) -> None:
    X, y = stream(100)
    put(service, "reg-gauges", "arow_regression")
    learn(service, "reg-gauges", X, y, batch=25)
    text = service.get("/metrics").text
    om = service.get("/models/reg-gauges").json()["online_metrics"]
    for key in ("mae", "rmse", "r2", "interval_coverage"):
        line = next(
            s for s in text.splitlines()
            if s.startswith(f'learnserve_online_{key}{{model="reg-gauges"}}')
        )  # fmt: skip
        assert float(line.split()[-1]) == pytest.approx(om[key]), key


def test_export_and_import_keep_the_state(service: httpx.Client) -> None:
    X, y = stream(150)
    put(service, "reg-export", "arow_regression")
    learn(service, "reg-export", X, y, batch=30)
    blob = service.get("/models/reg-export/state")
    assert blob.status_code == 200
    r = service.put("/models/reg-imported", content=blob.content, headers=OCTETS)
    assert r.status_code in (200, 201), r.text
    assert digest(service, "reg-imported") == digest(service, "reg-export")
    X2, y2 = stream(40, seed=11)
    learn(service, "reg-export", X2, y2, batch=40)
    learn(service, "reg-imported", X2, y2, batch=7)
    assert digest(service, "reg-imported") == digest(service, "reg-export")


def test_a_restart_keeps_the_state_and_the_figures(tmp_path: Any) -> None:
    X, y = stream(120)
    settings = Settings(data_dir=str(tmp_path), checkpoint_every_updates=2)
    with ServerThread(settings) as srv, srv.client() as c:
        put(c, "reg", "arow_regression")
        learn(c, "reg", X, y, batch=10)
        before, figures = digest(c, "reg"), c.get("/models/reg").json()["online_metrics"]
    with ServerThread(settings) as srv, srv.client() as c:
        assert digest(c, "reg") == before
        assert c.get("/models/reg").json()["online_metrics"] == figures


def test_a_delayed_target_is_learned_once_and_scored_by_what_was_served(
    service: httpx.Client,
) -> None:
    X, y = stream(60)
    put(service, "reg-late", "arow_regression")
    learn(service, "reg-late", X[:50], y[:50], batch=50)
    r = service.post("/models/reg-late/predict", json={"instances": [{"x": X[50], "id": "e1"}]})
    assert r.status_code == 200, r.text
    served = r.json()["predictions"][0]["value"]
    learn(service, "reg-late", X[51:55], y[51:55], batch=4)  # the model moves on meanwhile
    before = service.get("/models/reg-late").json()["online_metrics"]["cumulative"]
    r = service.post("/models/reg-late/update", json={"examples": [{"id": "e1", "y": y[50]}]})
    assert r.status_code == 200, r.text
    after = service.get("/models/reg-late").json()["online_metrics"]["cumulative"]
    assert after["examples"] == before["examples"] + 1
    added = after["mae"] * after["examples"] - before["mae"] * before["examples"]
    assert added == pytest.approx(abs(y[50] - served), rel=1e-6)
    again = service.post("/models/reg-late/update", json={"examples": [{"id": "e1", "y": 1.0}]})
    assert again.status_code == 409, again.text  # an id is learned once


def test_a_regressor_follows_a_regressor_not_a_classifier(service: httpx.Client) -> None:
    X, y = stream(80)
    put(service, "reg-lead", "arow_regression")
    put(service, "reg-chal", "pa2_regression", follows="reg-lead")
    learn(service, "reg-lead", X, y, batch=20)
    chal = service.get("/models/reg-chal").json()
    assert chal["online_metrics"]["cumulative"]["examples"] == 80
    spec = FeatureSpec.dense(DIM, intercept=True)
    reg = make_regressor("pa2", spec.dim, {})
    reg.update(spec.encode(X), y)
    assert chal["state_digest"] == reg.state_digest()
    body = {"algorithm": "arow", "features": {"kind": "dense", "dim": DIM},
            "follows": "reg-lead"}  # fmt: skip
    r = service.put("/models/clf-chal", json=body)
    assert r.status_code in (409, 422), r.text


def test_v2_infer_answers_fp64_values(service: httpx.Client) -> None:
    X, y = stream(50)
    put(service, "reg-v2", "arow_regression")
    learn(service, "reg-v2", X, y, batch=50)
    meta = service.get("/v2/models/reg-v2").json()
    assert [o["name"] for o in meta["outputs"]] == ["value", "variance", "interval"]
    req = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, DIM],
                       "data": [v for x in X[:2] for v in x]}]}  # fmt: skip
    r = service.post("/v2/models/reg-v2/infer", json=req)
    assert r.status_code == 200, r.text
    out = {o["name"]: o for o in r.json()["outputs"]}
    mine = service.post("/models/reg-v2/predict", json={"instances": [{"x": x} for x in X[:2]]})
    values = [p["value"] for p in mine.json()["predictions"]]
    assert out["value"]["datatype"] == "FP64" and out["value"]["data"] == values
    assert out["interval"]["shape"] == [2, 2]


def test_explain_and_weights_are_in_the_targets_units(service: httpx.Client) -> None:
    X, y = stream(200)
    put(service, "reg-explain", "arow_regression")
    learn(service, "reg-explain", X, y, batch=50)
    info = service.get("/models/reg-explain").json()
    mean = info["target"]["mean"]
    assert mean == pytest.approx(float(np.mean(y)))
    r = service.post("/models/reg-explain/explain", json={"x": X[0]})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["labels"] == [None]
    e = got["explanations"][0]
    asked = service.post("/models/reg-explain/predict", json={"instances": [{"x": X[0]}]})
    value = asked.json()["predictions"][0]["value"]
    # the score is /predict's: the baseline (the targets' mean) plus the contributions
    assert e["scores"] == [value] and e["baseline"] == pytest.approx(mean) and not e["clipped"]
    total = e["baseline"] + sum(f["contributions"][0] for f in e["features"])
    assert total == pytest.approx(value, rel=1e-9)
    w = service.get("/models/reg-explain/weights", params={"top": 2}).json()["classes"][0]
    # feature 0 has the largest true weight (3 × 20 000 per unit): the top positive one
    assert w["positive"][0]["index"] == 0 and w["positive"][0]["variance"] > 0
    assert 40_000 < w["positive"][0]["weight"] < 80_000


def test_drift_reopens_an_arow_regressors_confidence(service: httpx.Client) -> None:
    X, y = stream(600)
    flipped = [-t + 500_000.0 for t in y[300:]]  # the relation changes sign at 300
    put(service, "reg-drift", "arow_regression",
        drift={"detector": "adwin", "on_detection": {"reopen_confidence": 1.0}})  # fmt: skip
    learn(service, "reg-drift", X[:300], y[:300], batch=50)
    q = {"instances": [{"x": X[0]}]}
    before = service.post("/models/reg-drift/predict", json=q).json()["predictions"][0]
    learn(service, "reg-drift", X[300:], flipped, batch=50)
    info = service.get("/models/reg-drift").json()
    assert info["drift"]["detections"] >= 1, info["drift"]
    after = service.post("/models/reg-drift/predict", json=q).json()["predictions"][0]
    assert after["variance"] > before["variance"]
    r = service.put("/models/reg-drift-pa", json={
        "algorithm": "pa_regression", "features": {"kind": "dense", "dim": DIM},
        "drift": {"detector": "adwin", "on_detection": {"reopen_confidence": 1.0}}})  # fmt: skip
    assert r.status_code == 422 and r.json()["detail"]["field"] == "drift.on_detection", r.text


def test_two_processes_on_one_redis_and_a_fresh_one_agree(redis_url: str, tmp_path: Any) -> None:
    """Updates sent to either of two processes on one Redis: both, and a third started
    afresh from the checkpoint and the log after it, hold the in-process learner's state
    and report the same progressive figures."""
    import os

    from tests.service.procs import free_port, stop_process
    from tests.service.serving import start_learnserve, start_learnserve_all

    X, y = stream(400, seed=4)
    spec = FeatureSpec.dense(DIM, intercept=True)
    reg = make_regressor("arow", spec.dim, {})
    reg.update(spec.encode(X), y)
    env = {
        **os.environ,
        "LEARNSERVE_REDIS_URL": redis_url,
        "LEARNSERVE_DATA_DIR": str(tmp_path),
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "3",
        "LEARNSERVE_LOG_RETAIN_ENTRIES": "2",
    }
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    try:
        cs = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for p in ports]
        put(cs[0], "m", "arow_regression")
        for k, s in enumerate(range(0, 400, 20)):
            ex = [{"x": x, "y": t} for x, t in zip(X[s : s + 20], y[s : s + 20], strict=True)]
            r = cs[k % 2].post("/update", json={"model": "m", "examples": ex})
            assert r.status_code == 200, r.text
        wait = {"model": "m", "instances": [{"x": X[0]}], "min_version": 20}
        seen = []
        for c in cs:
            assert c.post("/predict", json=wait).status_code == 200
            got = c.get("/models/m").json()
            seen.append((got["state_digest"], got["online_metrics"]))
        stop_process(procs.pop())
        port = free_port()
        procs.append(start_learnserve(port, env))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as fresh:
            assert fresh.post("/predict", json=wait).status_code == 200
            got = fresh.get("/models/m").json()
            seen.append((got["state_digest"], got["online_metrics"]))
            assert got["last_checkpoint"]["position"] >= 15
    finally:
        for p in procs:
            stop_process(p)
    assert [d for d, _ in seen] == [reg.state_digest()] * 3
    assert seen[0][1] == seen[1][1] == seen[2][1]


def test_importance_weights_reach_the_learner(service: httpx.Client) -> None:
    X, y = stream(120, seed=8)
    w = [1.0 + (k % 4) for k in range(120)]
    put(service, "reg-weights", "pa2_regression")
    ex = [{"x": x, "y": t, "weight": h} for x, t, h in zip(X, y, w, strict=True)]
    for s in range(0, 120, 30):
        r = service.post("/models/reg-weights/update", json={"examples": ex[s : s + 30]})
        assert r.status_code == 200, r.text
    spec = FeatureSpec.dense(DIM, intercept=True)
    reg = make_regressor("pa2", spec.dim, {})
    reg.update(spec.encode(X), y, w)
    unweighted = make_regressor("pa2", spec.dim, {})
    unweighted.update(spec.encode(X), y)
    assert digest(service, "reg-weights") == reg.state_digest() != unweighted.state_digest()
    bad = [{"x": X[0], "y": 1.0, "weight": 0}]
    r = service.post("/models/reg-weights/update", json={"examples": bad})
    assert r.status_code == 422 and r.json()["detail"]["field"] == "examples[0].weight"
