"""Export and import of online models over real HTTP, on real data (a9a).

A model learns a9a on one service (embedded SQLite); its state is exported
(``GET /models/{name}/state``), imported into another model of the same service and
into a second service on another store (a real Redis), and all of them must hold the
same ``state_digest``, also after the same further updates. ``learners.load`` of the
exported artifact predicts what ``/predict`` answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import learners
from learners.artifact import dumps, loads
from learners.features import FeatureSpec
from learners.io.svmlight import read_svmlight
from learners.linear import make_classifier
from learners.llsvm.model import LLSVM
from service.settings import Settings
from tests.conftest import require_data
from tests.service.serving import ServerThread

DIM = 124  # a9a: indices 1..123
OCTETS = {"content-type": "application/octet-stream"}


@pytest.fixture(scope="module")
def a9a() -> tuple[list[dict[str, float]], list[int]]:
    data = read_svmlight(require_data("a9a", "a9a"), n_features=DIM, zero_based=True)
    X = data.X
    rows = []
    for i in range(3000):
        a, b = X.indptr[i], X.indptr[i + 1]
        pairs = zip(X.indices[a:b].tolist(), X.values[a:b].tolist(), strict=True)
        rows.append({str(j): v for j, v in pairs})
    return rows, [int(y) for y in data.y[:3000]]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("export-a")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def learn(c: httpx.Client, name: str, rows: list[Any], ys: list[Any], batch: int = 250) -> int:
    version = 0
    for s in range(0, len(rows), batch):
        ex = [{"x": x, "y": y} for x, y in zip(rows[s : s + batch], ys[s : s + batch])]
        r = c.post(f"/models/{name}/update", json={"examples": ex})
        assert r.status_code == 200, r.text
        version = r.json()["version"]
    return version


def digest(c: httpx.Client, name: str) -> str:
    r = c.get(f"/models/{name}")
    assert r.status_code == 200, r.text
    return str(r.json()["state_digest"])


def put_artifact(c: httpx.Client, name: str, blob: bytes) -> httpx.Response:
    return c.put(f"/models/{name}", content=blob, headers=OCTETS)


def test_round_trip_on_a9a_across_stores(
    service: httpx.Client, a9a: tuple[list[Any], list[int]], redis_url: str, tmp_path: Path
) -> None:
    rows, ys = a9a
    body = {"algorithm": "arow", "params": {"r": 0.5}, "features": {"kind": "sparse", "dim": DIM}}
    assert service.put("/models/a9a-src", json=body).status_code == 201
    assert learn(service, "a9a-src", rows[:2000], ys[:2000]) == 8
    r = service.get("/models/a9a-src/state")
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    blob = r.content
    src_digest = digest(service, "a9a-src")
    assert r.headers["x-state-digest"] == src_digest and r.headers["x-model-version"] == "8"
    meta = loads(blob).meta
    assert meta["features"] == {"kind": "sparse", "dim": DIM}
    assert meta["service"]["version"] == 8 and meta["service"]["examples_learned"] == 2000
    assert meta["service"]["config"]["algorithm"] == "arow"

    # the same service, another model
    r = put_artifact(service, "a9a-copy", blob)
    assert r.status_code == 201, r.text
    info = r.json()
    assert info["state_digest"] == src_digest and info["version"] == 0
    assert info["examples_learned"] == 2000 and info["config"]["imported"] == loads(blob).checksum
    assert put_artifact(service, "a9a-copy", blob).status_code == 200  # idempotent
    assert service.put("/models/a9a-copy", json=body).status_code == 409  # not the import

    # another service process on another store (Redis)
    other = Settings(data_dir=str(tmp_path), redis_url=redis_url)
    with ServerThread(other) as srv, srv.client() as c2:
        r = put_artifact(c2, "a9a-redis", blob)
        assert r.status_code == 201, r.text
        assert r.json()["state_digest"] == src_digest
        # the same further updates: the same digests everywhere, after each batch
        for s in range(2000, 3000, 250):
            part = (rows[s : s + 250], ys[s : s + 250])
            learn(service, "a9a-src", *part)
            learn(service, "a9a-copy", *part)
            learn(c2, "a9a-redis", *part)
            d = digest(service, "a9a-src")
            assert digest(service, "a9a-copy") == d and digest(c2, "a9a-redis") == d
        assert d != src_digest

    # the library reads the export and predicts what /predict answers
    model = learners.load(blob)
    assert model.state_digest() == src_digest and model.features_ == FeatureSpec.sparse(DIM)
    r = service.get("/models/a9a-src/state")
    model = learners.load(r.content)
    test = rows[:300]
    served = service.post("/models/a9a-src/predict", json={"instances": [{"x": x} for x in test]})
    assert served.status_code == 200
    preds = model.predict_details(model.features_.encode(test))
    for p, s in zip(preds, served.json()["predictions"], strict=True):
        assert p.label == s["label"] and p.score == s["score"] and p.confidence == s["confidence"]
    accuracy = np.mean([p.label == y for p, y in zip(preds, ys[:300], strict=True)])
    assert accuracy > 0.8  # AROW on a9a: ~0.84 (REFERENCE_RESULTS.md)


def test_library_model_imports(service: httpx.Client) -> None:
    """A model trained with the library is imported once its features_ is set."""
    spec = FeatureSpec.dense(3)
    clf = make_classifier("scw1", 3, {"C": 0.5})
    clf.update(spec.encode([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]] * 5), ["x", "y"] * 5)
    r = put_artifact(service, "lib-nofeatures", clf.to_bytes())
    assert r.status_code == 422 and "meta.features" in r.json()["detail"]["message"]
    assert service.get("/models/lib-nofeatures").status_code == 404
    clf.features_ = spec
    r = put_artifact(service, "lib", clf.to_bytes())
    assert r.status_code == 201, r.text
    assert r.json()["state_digest"] == clf.state_digest() and r.json()["labels"] == ["x", "y"]
    served = service.post("/models/lib/predict", json={"instances": [{"x": [1.0, 0.5, 0.0]}]})
    want = clf.predict_details(spec.encode([[1.0, 0.5, 0.0]]))[0]
    assert served.json()["predictions"][0]["score"] == want.score


def test_bad_artifacts_create_nothing(service: httpx.Client) -> None:
    clf = make_classifier("arow", 4, {})
    clf.features_ = FeatureSpec.dense(4)
    good = clf.to_bytes()
    corrupt = bytearray(good)
    corrupt[-40] ^= 0xFF
    batch_model = LLSVM(n_anchors=2, n_neighbours=1, passes=1).fit(
        np.random.default_rng(0).normal(size=(20, 3)), [0, 1] * 10
    )
    cases = {
        "truncated": (good[:-10], "truncated"),
        "garbage": (b"not an artifact at all, just bytes", "magic"),
        "corrupt": (bytes(corrupt), "checksum"),
        "wrong-kind": (dumps("demo", {}, {"w": np.zeros(2)}), "'demo'"),
        "batch-kind": (batch_model.to_bytes(), "PUT /models/{name}/artifact"),
        "empty": (b"", "empty"),
    }
    for name, (blob, words) in cases.items():
        r = put_artifact(service, f"bad-{name}", blob)
        assert r.status_code == 422, (name, r.text)
        detail = r.json()["detail"]
        assert detail["field"] == "artifact" and words in detail["message"], (name, detail)
        assert service.get(f"/models/bad-{name}").status_code == 404, name


def test_state_and_weights_of_batch_model_are_409(service: httpx.Client) -> None:
    blob = (
        LLSVM(n_anchors=2, n_neighbours=1, passes=1)
        .fit(np.random.default_rng(1).normal(size=(20, 3)), [0, 1] * 10)
        .to_bytes()
    )
    r = service.put("/models/batchy/artifact", content=blob, headers=OCTETS)
    assert r.status_code == 201, r.text
    for path in ("/models/batchy/state", "/models/batchy/weights"):
        r = service.get(path)
        assert r.status_code == 409 and r.json()["detail"]["error"] == "not_online", path
    assert service.get("/models/nope/weights").status_code == 404


def test_sklearn_coef_equals_service_weights(
    service: httpx.Client, a9a: tuple[list[Any], list[int]]
) -> None:
    """The same AROW on the same 1000 a9a rows in the same order: the weights the
    service shows are the estimator's coef_ (positive class = classes_[1] = +1)."""
    from learners.linear.sklearn import AROWClassifier

    rows, ys = a9a
    X = np.zeros((1000, DIM))
    for i, x in enumerate(rows[:1000]):
        for j, v in x.items():
            X[i, int(j)] = v
    body = {"algorithm": "arow", "params": {"r": 1.0}, "features": {"kind": "dense", "dim": DIM}}
    assert service.put("/models/a9a-dense", json=body).status_code == 201
    learn(service, "a9a-dense", X.tolist(), ys[:1000], batch=1000)
    est = AROWClassifier(r=1.0).partial_fit(X, np.array(ys[:1000]))
    assert est.coef_.shape == (1, DIM) and est.intercept_.tolist() == [0.0]
    r = service.get("/models/a9a-dense/weights", params={"top": 20, "label": "1"})
    assert r.status_code == 200, r.text
    (cls,) = r.json()["classes"]
    assert cls["label"] == 1 and len(cls["positive"]) == 20 and len(cls["negative"]) == 20
    for e in cls["positive"] + cls["negative"]:
        assert e["weight"] == est.coef_[0, e["index"]]
        assert e["variance"] == est.model_.state().sigma[0, e["index"]]
        assert "names" not in e
    assert [e["weight"] for e in cls["positive"]] == sorted(
        (e["weight"] for e in cls["positive"]), reverse=True
    )
    w = est.coef_[0]
    assert cls["positive"][0]["weight"] == w.max() and cls["negative"][0]["weight"] == w.min()
    both = service.get("/models/a9a-dense/weights", params={"top": 3}).json()["classes"]
    assert [c["label"] for c in both] == [-1, 1]  # first seen first
    assert [e["weight"] for e in both[0]["positive"]] == [-e["weight"] for e in cls["negative"][:3]]
    for params, field in (({"top": 0}, "top"), ({"top": 1001}, "top"), ({"label": "7"}, "label")):
        r = service.get("/models/a9a-dense/weights", params=params)
        assert r.status_code == 422 and r.json()["detail"]["field"] == field, r.text
