"""Batch models over real HTTP: deploy artifacts, predict, versions, rollback, restart."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from learners.linear import make_classifier
from learners.llsvm.model import LLSVM
from learners.ranking.lambdamart import LambdaMART
from service.settings import Settings
from tests.service.serving import ServerThread, dense_model

D = 5


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("artifacts"))


@pytest.fixture(scope="module")
def client(data_dir: str) -> Iterator[httpx.Client]:
    with ServerThread(Settings(data_dir=data_dir)) as srv, srv.client() as c:
        yield c


def rankers() -> tuple[LambdaMART, LambdaMART, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, D))
    y = np.clip((X[:, 0] * 2 + X[:, 1] + 2).round(), 0, 4).astype(int)
    groups = [20] * 10
    a = LambdaMART(n_estimators=5, num_leaves=4, min_data_in_leaf=5).fit(X, y, groups)
    b = LambdaMART(n_estimators=12, num_leaves=8, min_data_in_leaf=5).fit(X, y, groups)
    return a, b, rng.normal(size=(7, D))


def put_artifact(c: httpx.Client, name: str, blob: bytes) -> httpx.Response:
    return c.put(
        f"/models/{name}/artifact",
        content=blob,
        headers={"content-type": "application/octet-stream"},
    )


def test_deploy_predict_version_rollback(client: httpx.Client) -> None:
    a, b, Xt = rankers()
    r = put_artifact(client, "rank", a.to_bytes())
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 1 and r.json()["kind"] == "lambdamart" and r.json()["created"]
    inst = [{"x": row} for row in Xt.tolist()]
    got = client.post("/predict", json={"model": "rank", "instances": inst}).json()
    assert got["version"] == 1
    assert [p["score"] for p in got["predictions"]] == pytest.approx(a.predict(Xt).tolist())
    # Sparse instances (0-based indices) score the same.
    sparse = [{"x": {str(j): v for j, v in enumerate(row)}} for row in Xt.tolist()]
    got_sp = client.post("/predict", json={"model": "rank", "instances": sparse}).json()
    assert [p["score"] for p in got_sp["predictions"]] == pytest.approx(a.predict(Xt).tolist())

    r = put_artifact(client, "rank", b.to_bytes())
    assert r.status_code == 201 and r.json()["version"] == 2 and not r.json()["created"]
    got = client.post("/predict", json={"model": "rank", "instances": inst}).json()
    assert got["version"] == 2
    assert [p["score"] for p in got["predictions"]] == pytest.approx(b.predict(Xt).tolist())

    arts = client.get("/models/rank/artifacts").json()
    assert arts["active"] == 2 and [v["version"] for v in arts["versions"]] == [1, 2]
    info = client.get("/models/rank").json()
    assert info["kind"] == "lambdamart" and info["version"] == 2
    assert info["state_digest"] == arts["versions"][1]["checksum"]

    r = client.put("/models/rank/active", json={"version": 1})
    assert r.status_code == 200 and r.json()["version"] == 1
    got = client.post("/predict", json={"model": "rank", "instances": inst}).json()
    assert [p["score"] for p in got["predictions"]] == pytest.approx(a.predict(Xt).tolist())
    assert client.put("/models/rank/active", json={"version": 9}).status_code == 404
    assert client.put("/models/rank/active", json={"version": 0}).status_code == 422
    text = client.get("/metrics").text
    assert 'learnserve_deploys_total{model="rank"} 2.0' in text
    assert 'learnserve_rollbacks_total{model="rank"} 1.0' in text


def test_classifier_artifact(client: httpx.Client) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, D))
    y = np.where(X[:, 0] + X[:, 2] > 0, "yes", "no")
    m = LLSVM(n_anchors=4, n_neighbours=2, passes=2).fit(X, y)
    assert put_artifact(client, "loc", m.to_bytes()).status_code == 201
    Xt = rng.normal(size=(10, D))
    preds = client.post(
        "/predict", json={"model": "loc", "instances": [{"x": r} for r in Xt.tolist()]}
    ).json()["predictions"]
    assert [p["label"] for p in preds] == m.predict(Xt).tolist()
    assert set(preds[0]["scores"]) == {"yes", "no"}


def test_bad_artifacts(client: httpx.Client) -> None:
    a, _, _ = rankers()
    blob = a.to_bytes()
    damaged = blob[:-40] + bytes(40)
    for bad, words in [
        (damaged, "checksum"),
        (b"not an artifact at all", "artifact"),
        (blob[: len(blob) // 2], "artifact"),
        (make_classifier("pa", dim=3, params={}).to_bytes(), "not a batch model kind"),
    ]:
        r = put_artifact(client, "bad", bad)
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == "artifact" and words in r.json()["detail"]["message"]
    assert put_artifact(client, "bad", b"").status_code == 422
    assert client.get("/models/bad").status_code == 404  # nothing was created


def test_kinds_do_not_mix(client: httpx.Client) -> None:
    a, _, _ = rankers()
    assert client.put("/models/online1", json=dense_model(D)).status_code == 201
    r = put_artifact(client, "online1", a.to_bytes())
    assert r.status_code == 409
    assert put_artifact(client, "batch1", a.to_bytes()).status_code == 201
    assert client.put("/models/batch1", json=dense_model(D)).status_code == 409
    r = client.post("/update", json={"model": "batch1", "examples": [{"x": [0] * D, "y": 1}]})
    assert r.status_code == 409 and r.json()["detail"]["error"] == "not_online"
    r = client.post("/predict", json={"model": "batch1", "instances": [{"x": [0] * (D + 1)}]})
    assert r.status_code == 422 and r.json()["detail"]["field"] == "instances[0].x"
    assert client.get("/models/online1/artifacts").status_code == 409


def test_active_version_survives_restart(client: httpx.Client, data_dir: str) -> None:
    a, b, Xt = rankers()
    put_artifact(client, "keep", a.to_bytes())
    put_artifact(client, "keep", b.to_bytes())
    client.put("/models/keep/active", json={"version": 1})
    with ServerThread(Settings(data_dir=data_dir)) as srv2, srv2.client() as c2:
        got = c2.post(
            "/predict", json={"model": "keep", "instances": [{"x": r} for r in Xt.tolist()]}
        ).json()
        assert got["version"] == 1
        assert [p["score"] for p in got["predictions"]] == pytest.approx(a.predict(Xt).tolist())
