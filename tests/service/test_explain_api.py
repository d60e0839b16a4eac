"""``POST /models/{name}/explain`` through real HTTP: every feature an input makes, the
model's weight for its column and what it adds to the score, for each feature kind.
The contributions must add up to the scores ``/predict`` answers (the audit explains the
served score, not an approximation of it), the names must be the encoder's own (hashed
again, each gives its column), and bad inputs are 4xx naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from learners.feature_keys import murmurhash3_32
from service.settings import Settings
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import ok
from tests.service.test_records_api import RECORDS

KEYS = {"reader": ["predict"], "admin": ["predict", "update", "admin"]}
ADMIN = {"Authorization": "Bearer admin"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data = tmp_path_factory.mktemp("explain")
    with ServerThread(Settings(data_dir=str(data), api_keys=KEYS)) as srv, srv.client() as c:
        c.headers.update(ADMIN)
        yield c


def train(
    c: httpx.Client, name: str, features: dict[str, Any], ex: list[Any], algorithm: str = "arow"
) -> None:
    r = c.put(f"/models/{name}", json={"algorithm": algorithm, "features": features})
    assert r.status_code == 201, r.text
    ok(c.post("/update", json={"model": name, "examples": ex}))


def scores_agree(c: httpx.Client, name: str, xs: list[Any]) -> list[dict[str, Any]]:
    """The explanations of ``xs``, after checking contributions = value x weight and
    that their sums are /predict's scores, label by label."""
    got = ok(c.post(f"/models/{name}/explain", json={"instances": [{"x": x} for x in xs]}))
    preds = ok(c.post("/predict", json={"model": name, "instances": [{"x": x} for x in xs]}))
    labels = got["labels"]
    for e, p in zip(got["explanations"], preds["predictions"], strict=True):
        for f in e["features"]:
            assert f["contributions"] == pytest.approx([f["value"] * w for w in f["weights"]])
        sums = np.sum([f["contributions"] for f in e["features"]], axis=0)
        assert sums == pytest.approx(e["scores"], abs=1e-12)
        assert e["scores"] == pytest.approx([p["scores"][str(lab)] for lab in labels], abs=1e-9)
    explained: list[dict[str, Any]] = got["explanations"]
    return explained


def test_records_model_names_every_feature(client: httpx.Client) -> None:
    rng = np.random.default_rng(1)
    ex = [{"x": {"age": float(rng.integers(18, 90)), "job": str(rng.choice(["a", "b", "c"])),
                 "text": str(rng.choice(["good day", "bad night", "so so"]))},
           "y": str(rng.choice(["p", "n", "m"]))} for _ in range(200)]  # fmt: skip
    train(client, "rec", RECORDS, ex)
    x = {"age": 39, "job": "a", "text": "Good DAY"}
    (e,) = scores_agree(client, "rec", [x, {"job": "b"}])[:1]
    names = [f["name"] for f in e["features"]]
    assert names[:3] == ["^constant", "age", "job=a"]
    assert {"text^good", "text^day", "text~ go", "text~day "} <= set(names)
    for f in e["features"]:  # the documented hash: anyone can find a name's column
        assert f["index"] == murmurhash3_32(f["name"]) & (2**16 - 1)
        assert len(f["weights"]) == 3  # one per label: a multiclass model
    assert e["features"][1]["value"] == pytest.approx(np.log1p(39))
    one = ok(client.post("/models/rec/explain", json={"x": x}))
    assert one["explanations"] == [e] and one["version"] == 1
    assert one["features"]["kind"] == "records"


def test_records_with_statistics_explain_with_the_current_ones(client: httpx.Client) -> None:
    standardize = {"type": "numeric", "transform": "standardize"}
    features = {**RECORDS, "fields": {**RECORDS["fields"], "age": standardize}}
    ex = [{"x": {"age": 20.0 + 3 * i, "job": "ab"[i % 2]}, "y": "pq"[i % 2]} for i in range(30)]
    train(client, "std", features, ex)
    ages = [e["x"]["age"] for e in ex]
    (e,) = scores_agree(client, "std", [{"age": 50.0, "job": "a"}])
    (age,) = [f for f in e["features"] if f["name"] == "age"]
    z = (50.0 - np.mean(ages)) / np.std(ages)  # (x - mean) / sqrt(m2 / n) of those learned
    assert age["value"] == pytest.approx(z, rel=1e-9)
    weights = ok(client.get("/models/std/weights"))
    assert weights["feature_names"] is None  # not recorded (yet) for such a model
    assert "names" not in weights["classes"][0]["positive"][0]


def test_hashed_binary_model(client: httpx.Client) -> None:
    ex = [{"x": {"age": 30.0 + i % 7, "job": "clerk" if i % 2 else "boss"}, "y": i % 2}
          for i in range(60)]  # fmt: skip
    train(client, "hash", {"kind": "hashed", "bits": 12}, ex)
    (e,) = scores_agree(client, "hash", [{"age": 3.0, "job": "clerk", "new": 1.0}])
    by_name = {f["name"]: f for f in e["features"]}
    assert list(by_name) == ["age", "job=clerk", "new"]
    assert by_name["job=clerk"]["value"] == 1.0
    assert by_name["new"]["weights"] == [0.0, 0.0]  # never seen: no weight
    w0, w1 = by_name["job=clerk"]["weights"]
    assert w0 == -w1 != 0.0  # a binary model scores its second label with -w
    assert by_name["age"]["index"] == murmurhash3_32("age") & 4095


def test_dense_and_sparse_models_give_index_and_value(client: httpx.Client) -> None:
    train(client, "dense", {"kind": "dense", "dim": 4},
          [{"x": [1.0, 0.0, float(i % 3), 1.0], "y": "ab"[i % 2]} for i in range(20)])  # fmt: skip
    (e,) = scores_agree(client, "dense", [[0.5, 0.0, 2.0, 0.0]])
    assert [(f["name"], f["index"], f["value"]) for f in e["features"]] == [
        (None, 0, 0.5),
        (None, 2, 2.0),
    ]
    ex = [{"x": {"1": 1.0, str(2 + i % 3): 1.0}, "y": "ab"[i % 2]} for i in range(20)]
    train(client, "sparse", {"kind": "sparse", "dim": 10, "index_base": 1}, ex)
    (e,) = scores_agree(client, "sparse", [{"3": 2.0, "10": -1.0}])
    assert [(f["name"], f["index"], f["value"]) for f in e["features"]] == [
        ("3", 2, 2.0),
        ("10", 9, -1.0),
    ]


def test_an_overflowing_contribution_is_refused_naming_the_input(client: httpx.Client) -> None:
    # small inputs make large weights (PA reaches a margin of 1: w = 50 each here)
    train(client, "big", {"kind": "dense", "dim": 2},
          [{"x": [0.01, 0.01], "y": "a"}, {"x": [-0.01, -0.01], "y": "b"}], "pa")  # fmt: skip
    w = ok(client.post("/models/big/explain", json={"x": [1.0, 1.0]}))["explanations"][0]
    assert all(abs(f["weights"][0]) > 2 for f in w["features"])
    huge = [1.7e308, 1.7e308]
    r = client.post("/predict", json={"model": "big", "instances": [{"x": huge}]})
    assert r.status_code == 422  # /predict refuses it too
    body = {"instances": [{"x": [1.0, 1.0]}, {"x": huge}]}
    r = client.post("/models/big/explain", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"]["field"] == "instances[1].x"


def test_a_promoted_follower_is_what_is_explained(client: httpx.Client) -> None:
    ex = [{"x": {"a": float(i % 5), "b": "xy"[i % 2]}, "y": "pq"[i % 3 == 0]} for i in range(40)]
    features = {"kind": "hashed", "bits": 10}
    r = client.put("/models/lead", json={"algorithm": "arow", "features": features})
    assert r.status_code == 201, r.text
    body = {"algorithm": "pa", "features": features, "follows": "lead"}
    assert client.put("/models/chal", json=body).status_code == 201
    ok(client.post("/update", json={"model": "lead", "examples": ex}))
    x = {"a": 2.0, "b": "x"}
    (own,) = scores_agree(client, "lead", [x])
    ok(client.post("/models/lead/promote", json={"follower": "chal"}))
    got = ok(client.post("/models/lead/explain", json={"x": x}))
    assert got["serving"] == "chal" and got["model"] == "lead"
    (promoted,) = scores_agree(client, "lead", [x])  # = /predict's scores, now chal's
    assert promoted == ok(client.post("/models/chal/explain", json={"x": x}))["explanations"][0]
    assert promoted["scores"] != own["scores"]  # PA learned other weights than AROW


def test_a_ranker_has_one_weight_vector(client: httpx.Client) -> None:
    body = {"algorithm": "ranksvm", "features": {"kind": "sparse", "dim": 3}}
    assert client.put("/models/rank", json=body).status_code == 201
    items = [{"x": {"0": 1.0, "1": float(r)}, "relevance": r} for r in range(3)]
    ok(client.post("/update", json={"model": "rank", "queries": [{"qid": 1, "items": items}]}))
    x = {"1": 2.0, "2": 1.0}
    got = ok(client.post("/models/rank/explain", json={"x": x}))
    assert got["labels"] == [None]
    (e,) = got["explanations"]
    query = {"qid": 2, "items": [{"x": x}]}
    pred = ok(client.post("/predict", json={"model": "rank", "queries": [query]}))
    assert e["scores"] == pytest.approx(pred["predictions"][0]["scores"], abs=1e-12)
    assert [(f["name"], f["value"]) for f in e["features"]] == [("1", 2.0), ("2", 1.0)]
    assert e["features"][0]["weights"][0] > 0  # relevance grows with feature 1


def test_a_model_that_learned_nothing_has_no_labels(client: httpx.Client) -> None:
    assert client.put("/models/fresh", json={"algorithm": "pa", "features": RECORDS}).is_success
    got = ok(client.post("/models/fresh/explain", json={"x": {"job": "a"}}))
    assert got["labels"] == [] and got["explanations"][0]["scores"] == []
    assert [f["name"] for f in got["explanations"][0]["features"]] == ["^constant", "job=a"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"x": {"age": "old"}}, 422, "x.age"),
        ({"x": [1, 2]}, 422, "x"),
        ({"instances": [{"x": {}}, {"x": {"job": 3}}]}, 422, "instances[1].x.job"),
        ({"instances": [{"x": {}, "y": 1}]}, 422, "instances[0].y"),
        ({"instances": []}, 422, "instances"),
        ({"instances": [{"x": {}}] * 101}, 413, "instances"),
        ({"x": {}, "instances": [{"x": {}}]}, 422, "instances"),
        ({"y": "a"}, 422, "x"),
        ({"x": {"text": "ab" * 60_000}}, 422, "x.text"),
    ],
)
def test_bad_bodies_are_refused_naming_the_field(
    client: httpx.Client, body: Any, status: int, field: str
) -> None:
    if client.get("/models/rec").status_code == 404:
        train(client, "rec", RECORDS, [{"x": {"job": "a"}, "y": "p"}])
    r = client.post("/models/rec/explain", json=body)
    assert r.status_code == status, r.text
    assert r.json()["detail"]["field"] == field, r.text


def test_scope_content_type_and_unknown_model(client: httpx.Client, tmp_path: Path) -> None:
    if client.get("/models/rec").status_code == 404:
        train(client, "rec", RECORDS, [{"x": {"job": "a"}, "y": "p"}])
    url = "/models/rec/explain"
    reader = {"Authorization": "Bearer reader"}
    assert client.post(url, json={"x": {}}, headers=reader).status_code == 200  # predict scope
    assert client.post(url, json={"x": {}}, headers={"Authorization": ""}).status_code == 401
    assert client.post(url, content=b'{"x": {}}', headers={"content-type": "text/plain"}
                       ).status_code == 415  # fmt: skip
    assert client.post(url, content=b"{", headers={"content-type": "application/json"}
                       ).status_code == 422  # fmt: skip
    assert client.post("/models/none/explain", json={"x": {}}).status_code == 404


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("kind", ["dense", "sparse", "hashed"])
def test_explanations_add_up_to_predict_for_every_kind_and_intercept(
    client: httpx.Client, kind: str, intercept: bool
) -> None:
    """Issue 32 item 6: a hashed model with an intercept explained without ``^constant``."""
    rng = np.random.default_rng(7)

    def x_of(v: np.ndarray) -> Any:
        if kind == "dense":
            return v.round(3).tolist()
        if kind == "sparse":
            return {str(j): round(float(t), 3) for j, t in enumerate(v) if t > 0}
        return {f"f{j}": round(float(t), 3) for j, t in enumerate(v) if t > 0}

    size = {"dim": 5} if kind != "hashed" else {"bits": 8}
    features = {"kind": kind, **size, "intercept": intercept}
    name = f"explain-{kind}-{intercept}"
    ex = [{"x": x_of(v), "y": "a" if v.sum() > 0 else "b"} for v in rng.normal(size=(40, 5))]
    train(client, name, features, ex)
    inputs = [x_of(v) for v in rng.normal(size=(5, 5))] + [[0.0] * 5 if kind == "dense" else {}]
    got = ok(client.post(f"/models/{name}/explain", json={"instances": [{"x": x} for x in inputs]}))
    served = ok(
        client.post(f"/models/{name}/predict", json={"instances": [{"x": x} for x in inputs]})
    )
    for e, p in zip(got["explanations"], served["predictions"], strict=True):
        assert e["scores"] == pytest.approx([p["scores"][str(lab)] for lab in got["labels"]])
        names = [f["name"] for f in e["features"]]
        assert ("^constant" in names) == (intercept and kind == "hashed"), names


@pytest.mark.parametrize(
    "algorithm", ["arow_regression", "pa_regression", "pa1_regression", "sgd_regression"]
)
@pytest.mark.parametrize("kind", ["dense", "hashed"])
def test_a_regressors_explanation_is_its_prediction(
    client: httpx.Client, algorithm: str, kind: str
) -> None:
    """A regressor predicts m + w·x: explain's score is /predict's value, the baseline m
    (the targets' running mean) plus the contributions, unless SGD clipped it."""
    rng = np.random.default_rng(3)

    def x_of(v: np.ndarray) -> Any:
        if kind == "dense":
            return v.round(3).tolist()
        return {f"f{j}": round(float(t), 3) for j, t in enumerate(v)}

    features = {"kind": kind, "dim": 4} if kind == "dense" else {"kind": kind, "bits": 8}
    name = f"explain-reg-{algorithm}-{kind}"
    ex = [{"x": x_of(v), "y": float(50 + 3 * v[0] - v[1])} for v in rng.normal(size=(60, 4))]
    train(client, name, {**features, "intercept": True}, ex, algorithm)
    inputs = [x_of(v) for v in rng.normal(size=(4, 4))] + [x_of(np.full(4, 40.0))]
    got = ok(client.post(f"/models/{name}/explain", json={"instances": [{"x": x} for x in inputs]}))
    served = ok(client.post(f"/models/{name}/predict",
                            json={"instances": [{"x": x} for x in inputs]}))  # fmt: skip
    assert got["labels"] == [None]
    clipped = []
    for e, p in zip(got["explanations"], served["predictions"], strict=True):
        assert e["scores"] == [p["value"]]
        assert 45 < e["baseline"] < 55  # the targets' mean
        total = e["baseline"] + sum(f["contributions"][0] for f in e["features"])
        clipped.append(e["clipped"])
        if not e["clipped"]:
            assert total == pytest.approx(p["value"], rel=1e-9)
        else:
            assert total != pytest.approx(p["value"], rel=1e-9)
    # far outside the data: SGD clips to the targets seen, the others extrapolate
    assert clipped[-1] == (algorithm == "sgd_regression") and not any(clipped[:-1])
