"""POST /update and /predict over real HTTP: results, label types, every input error."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from learners.features import FeatureSpec
from learners.linear import make_classifier
from service.api.errors import http_status
from service.errors import ServiceError
from service.settings import Settings
from tests.service.serving import ServerThread, dense_model

JSON = {"content-type": "application/json"}

MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=str(tmp_path_factory.mktemp("learn-api")),
        max_body_bytes=MAX_BODY,
        max_batch_examples=50,
        max_features_per_example=20,
        min_version_wait_seconds=0.3,
    )
    with ServerThread(settings) as srv, srv.client() as c:
        c.server_settings = srv.app.state.settings  # type: ignore[attr-defined]
        yield c


def err(r: httpx.Response) -> dict:
    d = r.json()["detail"]
    assert {"error", "message"} <= set(d)
    return d


def make(client: httpx.Client, name: str, body: dict) -> None:
    r = client.put(f"/models/{name}", json=body)
    assert r.status_code in (200, 201), r.text


def digest(client: httpx.Client, name: str) -> tuple[int, str]:
    info = client.get(f"/models/{name}").json()
    return info["version"], info["state_digest"]


def blobs(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 4)) + np.where(y[:, None] == 1, 1.5, -1.5)
    return X, ["+1" if v else "-1" for v in y]


def test_update_then_predict_is_bit_exact_with_the_library(client: httpx.Client) -> None:
    make(client, "exact", dense_model(4, "arow", r=0.5))
    ref = make_classifier("arow", dim=4, params={"r": 0.5})
    spec = FeatureSpec.dense(4)
    X, y = blobs(120, 0)
    version = 0
    for start in range(0, 120, 30):
        rows = X[start : start + 30].tolist()
        labels = y[start : start + 30]
        r = client.post(
            "/update",
            json={"model": "exact", "examples": [{"x": a, "y": b} for a, b in zip(rows, labels)]},
        )
        assert r.status_code == 200, r.text
        version += 1
        res = ref.update(spec.encode(rows), labels)
        # correct: the batch's progressive (predict-then-learn) hits, as the learner counts
        assert r.json() == {
            "model": "exact",
            "applied": 30,
            "version": version,
            "correct": res.correct,
        }
    info = client.get("/models/exact").json()
    assert info["state_digest"] == ref.state_digest()
    assert info["examples_learned"] == 120 and info["version"] == 4
    assert sorted(info["labels"]) == ["+1", "-1"]
    assert info["online_metrics"]["accuracy"] > 0.8
    assert info["online_metrics"]["window_examples"] == 120
    Xt, yt = blobs(20, 1)
    r = client.post(
        "/predict", json={"model": "exact", "instances": [{"x": a} for a in Xt.tolist()]}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "exact" and body["version"] == 4
    expect = ref.predict_details(spec.encode(Xt.tolist()))
    for got, want in zip(body["predictions"], expect):
        assert got["label"] == want.label
        assert got["score"] == pytest.approx(want.score, rel=1e-12)
        assert set(got["scores"]) == {"+1", "-1"}
    acc = np.mean([p["label"] == t for p, t in zip(body["predictions"], yt)])
    assert acc >= 0.8


def test_labels_keep_their_json_type(client: httpx.Client) -> None:
    make(client, "ints", {"algorithm": "pa", "features": {"kind": "sparse", "dim": 10}})
    ex = [{"x": {"1": 1.0}, "y": 1}, {"x": {"2": 1.0}, "y": 0}, {"x": {"3": 1.0}, "y": "+0"}]
    assert client.post("/update", json={"model": "ints", "examples": ex}).status_code == 200
    preds = client.post(
        "/predict", json={"model": "ints", "instances": [{"x": {"1": 1.0}}, {"x": {"3": 1.0}}]}
    ).json()["predictions"]
    assert preds[0]["label"] == 1 and isinstance(preds[0]["label"], int)
    assert preds[1]["label"] == "+0"
    # scores are keyed by label; JSON object keys are strings, so 0 and "0" cannot both be
    # labels of one model (tests/service/test_api_inputs.py)
    assert "1" in preds[0]["scores"]
    labels = client.get("/models/ints").json()["labels"]
    assert labels == [1, 0, "+0"]


def test_hashed_named_features(client: httpx.Client) -> None:
    make(client, "named", {"algorithm": "scw1", "features": {"kind": "hashed", "bits": 12}})
    ex = [
        {"x": {"age": 39, "job": "clerk"}, "y": "lo"},
        {"x": {"age": 52, "job": "manager"}, "y": "hi"},
    ] * 5
    r = client.post("/update", json={"model": "named", "examples": ex})
    assert r.status_code == 200 and r.json()["applied"] == 10
    r = client.post(
        "/predict", json={"model": "named", "instances": [{"x": {"age": 50, "job": "manager"}}]}
    )
    assert r.json()["predictions"][0]["label"] == "hi"


def test_predict_before_learning_is_409(client: httpx.Client) -> None:
    make(client, "empty", dense_model(2))
    r = client.post("/predict", json={"model": "empty", "instances": [{"x": [1, 2]}]})
    assert r.status_code == 409 and err(r)["error"] == "not_fitted"


def test_unknown_model_is_404(client: httpx.Client) -> None:
    r = client.post("/update", json={"model": "ghost", "examples": [{"x": [1], "y": 1}]})
    assert r.status_code == 404 and err(r)["error"] == "model_not_found"
    r = client.post("/predict", json={"model": "ghost", "instances": [{"x": [1]}]})
    assert r.status_code == 404


GOOD = {"x": [1.0, 2.0, 3.0, 4.0], "y": "+1"}


@pytest.mark.parametrize(
    ("examples", "field", "words"),
    [
        ([GOOD, {"x": [1, 2, 3], "y": "+1"}], "examples[1].x", "has 3 values, expected 4"),
        ([GOOD, GOOD, {"x": [1, 2, "a", 4], "y": "+1"}], "examples[2].x[2]", "must be a number"),
        ([{"x": [1, 2, True, 4], "y": "+1"}], "examples[0].x[2]", "must be a number"),
        ([{"x": [1, 2, None, 4], "y": "+1"}], "examples[0].x[2]", "must be a number"),
        ([{"x": {"0": 1.0}, "y": "+1"}], "examples[0].x", "list of 4 numbers"),
        ([{"x": "1,2,3,4", "y": "+1"}], "examples[0].x", "list"),
        ([GOOD, {"x": [1, 2, 3, 4], "y": 1.5}], "examples[1].y", "string or an integer"),
        ([{"x": [1, 2, 3, 4], "y": True}], "examples[0].y", "string or an integer"),
        ([{"x": [1, 2, 3, 4], "y": ""}], "examples[0].y", "empty"),
        ([{"x": [1, 2, 3, 4], "y": None}], "examples[0].y", "string or an integer"),
        ([{"x": [1, 2, 3, 4]}], "examples[0].y", "required"),
        ([{"y": "+1"}], "examples[0].x", "required"),
        ([GOOD, [1, 2, 3, 4]], "examples[1]", "object"),
        ([], "examples", "empty"),
        ([{"x": [], "y": "+1"}], "examples[0].x", "has 0 values, expected 4"),
    ],
)  # fmt: skip
def test_update_rejects_bad_examples_and_changes_nothing(
    client: httpx.Client, examples: list, field: str, words: str
) -> None:
    make(client, "strict", dense_model(4, "cw"))
    client.post("/update", json={"model": "strict", "examples": [GOOD]})
    before = digest(client, "strict")
    r = client.post("/update", json={"model": "strict", "examples": examples})
    assert r.status_code == 422, r.text
    d = err(r)
    assert d["error"] == "invalid_input" and d["field"] == field and words in d["message"], d
    assert d["message"].startswith(field)
    assert digest(client, "strict") == before


def test_sparse_errors_name_the_key(client: httpx.Client) -> None:
    make(client, "sp", {"algorithm": "pa1", "features": {"kind": "sparse", "dim": 20}})
    cases = [
        ({"3": 1.0, "25": 1.0}, 'examples[0].x["25"]'),
        ({"3": 1.0, "a": 1.0}, 'examples[0].x["a"]'),
        ({"3": 1.0, "4": "x"}, 'examples[0].x["4"]'),
        ({str(i): 1.0 for i in range(21)}, None),  # too many features -> 413
    ]
    for x, field in cases:
        r = client.post("/update", json={"model": "sp", "examples": [{"x": x, "y": "a"}]})
        assert r.status_code in (413, 422), r.text
        if field is not None:
            assert err(r)["field"] == field
    assert digest(client, "sp")[0] == 0


def test_nan_and_infinity_are_refused(client: httpx.Client) -> None:
    make(client, "nan", dense_model(4))
    before = digest(client, "nan")
    # Python's json writes NaN/Infinity tokens (not strict JSON): read leniently so
    # the error names the example and the field that holds the non-finite value.
    for bad, problem in (
        (math.nan, "value is NaN"),
        (math.inf, "value is infinite"),
        (-math.inf, "value is infinite"),
    ):
        body = json.dumps({"model": "nan", "examples": [GOOD, {"x": [1, 2, bad, 4], "y": "-1"}]})
        r = client.post("/update", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert err(r)["field"] == "examples[1].x[2]" and problem in err(r)["message"], r.text
    raw = b'{"model": "nan", "examples": [{"x": [1, 2, 1e400, 4], "y": "+1"}]}'
    r = client.post("/update", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and err(r)["field"] == "examples[0].x[2]", r.text
    raw = b'{"model": "nan", "instances": [{"x": [1, 2, -1e999, 4]}]}'
    r = client.post("/predict", content=raw, headers=JSON)
    assert r.status_code == 422 and err(r)["field"] == "instances[0].x[2]", r.text
    # sparse rows name the key
    make(client, "nan-sp", {"algorithm": "arow", "features": {"kind": "sparse", "dim": 30}})
    body = json.dumps({"model": "nan-sp", "examples": [{"x": {"17": math.nan}, "y": "a"}]})
    r = client.post("/update", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and err(r)["message"] == 'examples[0].x["17"]: value is NaN', r.text
    assert digest(client, "nan-sp")[0] == 0
    assert digest(client, "nan") == before


def test_bad_top_level_fields(client: httpx.Client) -> None:
    make(client, "top", dense_model(4))
    for body, field in [
        ({"examples": [GOOD]}, "model"),
        ({"model": 3, "examples": [GOOD]}, "model"),
        ({"model": "top", "examples": {"x": 1}}, "examples"),
        ({"model": "top"}, "examples"),
    ]:
        r = client.post("/update", json=body)
        assert r.status_code == 422 and err(r)["field"] == field, r.text
    for body, field in [
        ({"model": "top", "instances": []}, "instances"),
        ({"model": "top", "instances": [{"x": [1, 2, 3, 4]}], "min_version": -1}, "min_version"),
        ({"model": "top", "instances": [{"x": [1, 2, 3, 4]}], "min_version": "3"}, "min_version"),
        ({"model": "top", "instances": [{"x": [1, 2]}]}, "instances[0].x"),
    ]:
        r = client.post("/predict", json=body)
        assert r.status_code == 422 and err(r)["field"] == field, r.text
    assert client.post("/update", content=b"", headers=JSON).status_code == 422
    assert client.post("/update", content=b"[1]", headers=JSON).status_code == 422


def test_body_and_batch_limits_are_413(client: httpx.Client) -> None:
    make(client, "big", dense_model(4))
    before = digest(client, "big")
    r = client.post("/update", json={"model": "big", "examples": [GOOD] * 51})
    assert r.status_code == 413 and err(r)["field"] == "examples", r.text
    r = client.post("/predict", json={"model": "big", "instances": [{"x": GOOD["x"]}] * 51})
    assert r.status_code == 413
    huge = json.dumps({"model": "big", "examples": [GOOD] * 40, "pad": "x" * MAX_BODY}).encode()
    r = client.post("/update", content=huge, headers={"content-type": "application/json"})
    assert r.status_code == 413 and err(r)["error"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: cut off while streaming
        for i in range(0, len(huge), 8192):
            yield huge[i : i + 8192]

    r = client.post("/update", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert digest(client, "big") == before


def test_min_version(client: httpx.Client) -> None:
    make(client, "mv", dense_model(4))
    v = client.post("/update", json={"model": "mv", "examples": [GOOD]}).json()["version"]
    ok = client.post(
        "/predict", json={"model": "mv", "instances": [{"x": GOOD["x"]}], "min_version": v}
    )
    assert ok.status_code == 200 and ok.json()["version"] >= v
    r = client.post(
        "/predict", json={"model": "mv", "instances": [{"x": GOOD["x"]}], "min_version": v + 5}
    )
    # Beyond the log's end: refused at once, never waited for.
    assert r.status_code == 422 and err(r)["field"] == "min_version"
    assert f"ahead of the model's log (last position {v})" in err(r)["message"]


def test_metrics_use_route_templates_and_model_names(client: httpx.Client) -> None:
    make(client, "met", dense_model(4))
    client.post("/update", json={"model": "met", "examples": [GOOD, {**GOOD, "y": "-1"}]})
    client.post("/predict", json={"model": "met", "instances": [{"x": GOOD["x"]}]})
    client.get("/models/met")
    text = client.get("/metrics").text
    assert 'learnserve_requests_total{model="met",route="/update",status="200"}' in text
    assert 'learnserve_requests_total{model="met",route="/models/{name}",status="200"}' in text
    assert 'learnserve_request_duration_seconds_count{model="met",route="/predict"}' in text
    assert 'learnserve_examples_learned_total{model="met"} 2.0' in text
    assert 'learnserve_examples_accepted_total{model="met"} 2.0' in text
    assert 'learnserve_model_version{model="met"} 1.0' in text
    assert 'learnserve_online_accuracy{model="met"}' in text
    assert 'learnserve_store_up{store="sqlite"} 1.0' in text
    assert 'learnserve_models{kind="linear"}' in text
    assert "/models/met" not in text  # raw paths never become labels


def test_log_loss_and_auc_gauges_are_the_window_figures(client: httpx.Client) -> None:
    """The binary figures of ``online_metrics`` reach /metrics: log loss at every entry,
    the AUC from the once-a-second loop."""
    import re
    import time

    make(client, "bin", dense_model(4))
    rng = np.random.default_rng(3)
    for _ in range(5):
        X = rng.normal(size=(40, 4))
        ex = [{"x": x.tolist(), "y": "+1" if x[0] + 0.3 * x[1] > 0 else "-1"} for x in X]
        assert client.post("/update", json={"model": "bin", "examples": ex}).status_code == 200
    om = client.get("/models/bin").json()["online_metrics"]
    assert 0.5 < om["roc_auc"] <= 1.0 and 0 < om["log_loss"] < 0.7, om

    def gauge(name: str) -> float | None:
        m = re.search(rf'^{name}{{model="bin"}} (\S+)$', client.get("/metrics").text, re.M)
        return None if m is None else float(m.group(1))

    assert gauge("learnserve_online_log_loss") == pytest.approx(om["log_loss"], rel=1e-12)
    deadline = time.monotonic() + 10  # the loop refreshes it within about a second
    while gauge("learnserve_online_roc_auc") != om["roc_auc"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gauge("learnserve_online_roc_auc") == pytest.approx(om["roc_auc"], rel=1e-12)
    # The model becomes multiclass: no AUC any more, so the gauge turns NaN (a gap), not
    # its last binary value.
    make(client, "grows", {**dense_model(4), "metrics": {"window": 40}})

    def grows_auc() -> str | None:
        m = re.search(r'^learnserve_online_roc_auc{model="grows"} (\S+)$',
                      client.get("/metrics").text, re.M)  # fmt: skip
        return None if m is None else m.group(1)

    for labels in (("+1", "-1"), ("+1", "-1", "x")):
        X = rng.normal(size=(40, 4))
        ex = [{"x": x.tolist(), "y": labels[i % len(labels)]} for i, x in enumerate(X)]
        assert client.post("/update", json={"model": "grows", "examples": ex}).status_code == 200
        binary = len(labels) == 2  # then a value; once multiclass, NaN
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            auc = grows_auc()
            if (auc not in (None, "NaN")) if binary else auc == "NaN":
                break
            time.sleep(0.2)
    shown = [ln for ln in client.get("/metrics").text.splitlines() if '{model="grows"}' in ln]
    assert 'learnserve_online_roc_auc{model="grows"} NaN' in shown, shown
    assert client.get("/models/grows").json()["online_metrics"]["roc_auc"] is None
    # A model that has seen one label has no AUC (NaN: no negatives), so no series, also
    # after the once-a-second loop has been round (2.5 s) since its update.
    make(client, "one-label", dense_model(4))
    ex = [{"x": [1.0, 0.0, 0.0, 0.0], "y": "+1"}]
    assert client.post("/update", json={"model": "one-label", "examples": ex}).status_code == 200
    time.sleep(2.5)
    text = client.get("/metrics").text
    assert 'learnserve_online_log_loss{model="one-label"}' in text
    assert 'learnserve_online_roc_auc{model="one-label"}' not in text


def test_dense_fast_path_builds_exactly_the_checked_batch() -> None:
    """The numpy fast path for dense rows gives the same log payload as FeatureSpec.encode."""
    import orjson

    from service.models.linear import LinearAdapter

    s = Settings()
    a = LinearAdapter.create(LinearAdapter.normalize_config(dense_model(4), s))
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(50, 4)).round(3).tolist()
    rows[0] = [1, 0, 2, -3]  # ints and zeros
    rows[1] = [0.0, 0, 0, 1e-300]
    body = {"model": "m", "examples": [{"x": r, "y": i % 3} for i, r in enumerate(rows)]}
    raw = orjson.dumps(body)
    assert a.parse_update(body, s, raw) == a.parse_update(body, s)
    # Values numpy would coerce silently still go through the checked path.
    for bad in ([1, 2, "3", 4], [1, 2, True, 4], [1, 2, None, 4], [[1], 2, 3, 4]):
        body = {"model": "m", "examples": [{"x": bad, "y": 1}]}
        with pytest.raises(Exception) as e:
            a.parse_update(body, s, orjson.dumps(body))
        assert isinstance(e.value, ServiceError) and http_status(e.value) == 422, bad


@pytest.mark.parametrize("density", [0.05, 0.5, 1.0])
def test_log_payload_round_trips_exactly(density: float) -> None:
    from learners.features import Batch
    from service.models.payload import PayloadError, decode_payload, encode_payload

    rng = np.random.default_rng(11)
    X = rng.normal(size=(40, 9))
    X[rng.random(X.shape) > density] = 0.0
    X[5] = 0.0  # an all-zero row
    b = Batch.from_dense(X)
    labels = ["+1", 2, "x"] * 13 + [1]
    sizes = []
    for dense in (False, True):
        blob = encode_payload(b, labels, dense=dense)
        sizes.append(len(blob))
        got, meta = decode_payload(blob, 9)
        assert meta["y"] == labels
        for k in ("indptr", "indices", "values"):
            a, e = getattr(got, k), getattr(b, k)
            assert a.dtype == e.dtype and np.array_equal(a, e), k
        with pytest.raises(PayloadError):
            decode_payload(blob[:-1], 9)
    assert sizes[1] <= sizes[0]  # the matrix form is used only when smaller


def test_big_bodies_are_encoded_off_the_loop_with_the_same_result(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every body takes the thread path
    monkeypatch.setattr(client.server_settings, "parse_in_thread_bytes", 0)
    make(client, "offload", dense_model(4, "pa2"))
    ref = make_classifier("pa2", dim=4, params={})
    X, y = blobs(30, 5)
    r = client.post(
        "/update",
        json={"model": "offload", "examples": [{"x": a, "y": b} for a, b in zip(X.tolist(), y)]},
    )
    assert r.status_code == 200
    ref.update(FeatureSpec.dense(4).encode(X.tolist()), y)
    assert digest(client, "offload") == (1, ref.state_digest())
    r = client.post("/update", json={"model": "offload", "examples": [{"x": [1, 2], "y": "a"}]})
    assert r.status_code == 422 and err(r)["field"] == "examples[0].x"


@pytest.mark.parametrize("shape", [(1, 6), (1, 1), (7, 5), (30, 3)])
def test_dense_batch_equals_from_dense(shape: tuple[int, int]) -> None:
    from learners.features import Batch
    from service.models.payload import dense_batch

    rng = np.random.default_rng(sum(shape))
    X = rng.normal(size=shape)
    X[rng.random(shape) < 0.4] = 0.0
    X[0] = 0.0 if shape[0] > 1 else X[0]
    want, got = Batch.from_dense(X), dense_batch(X)
    assert got.dim == want.dim
    for k in ("indptr", "indices", "values"):
        a, e = getattr(got, k), getattr(want, k)
        assert a.dtype == e.dtype and np.array_equal(a, e), k
