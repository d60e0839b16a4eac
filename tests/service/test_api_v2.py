"""The Open Inference Protocol (KServe v2 REST) with a client nobody here wrote:
NVIDIA's ``tritonclient.http`` against a ``learnserve serve`` subprocess.

Models trained on real data: AROW on an MNIST slice (784 dense features, integer
labels), a LambdaMART fitted by the library on LightGBM's lambdarank example (300
features), an LL-SVM on scikit-learn's bundled 8x8 digits (64 integer features,
string labels "d0".."d9", so labels travel as BYTES). Every output must equal what
``POST /predict`` answers for the same rows, with the tensors sent as JSON and as
binary data (the binary tensor data extension), FP32 and FP64 (and INT32 for the
digits' integer features).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.conftest import require_data
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve

tc = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

KEY = "v2-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_BATCH = 1000


@dataclass
class Served:
    url: str
    digits: np.ndarray  # MNIST test rows (float64 in [0, 1])
    ranks: np.ndarray  # lambdarank test rows, dense
    small: np.ndarray  # held-out 8x8 digits rows (integers 0..16)
    small_labels: list[str]  # their true labels


def _mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from learners.io.idx import read_mnist

    d = require_data("mnist")
    X, y = read_mnist(d, "train")
    Xt, _ = read_mnist(d, "test")
    return X[:3000], y[:3000], Xt[:200]


def _lambdamart() -> tuple[bytes, np.ndarray]:
    from learners.io.svmlight import read_svmlight
    from learners.ranking.lambdamart import LambdaMART

    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    m = LambdaMART(n_estimators=15, num_leaves=15, min_data_in_leaf=20)
    m.fit(tr.X, tr.y, tr.group_sizes)
    return m.to_bytes(), te.X.to_dense()[:150]


def _llsvm() -> tuple[bytes, np.ndarray, list[str]]:
    from sklearn.datasets import load_digits

    from learners.llsvm.model import LLSVM

    X, labels = load_digits(return_X_y=True)
    y = np.array([f"d{v}" for v in labels])
    m = LLSVM(n_anchors=20, n_neighbours=3, passes=5, seed=0).fit(X[:1500], y[:1500])
    return m.to_bytes(), X[-100:], y[-100:].tolist()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    X, y, Xt = _mnist()
    ltr, ranks = _lambdamart()
    local, small, small_labels = _llsvm()
    port = free_port()
    env = {
        "LEARNSERVE_DATA_DIR": str(tmp_path_factory.mktemp("v2")),
        "LEARNSERVE_API_KEYS": f"{KEY}=predict+update+admin,reader=predict,writer=update",
        "LEARNSERVE_MAX_BATCH_EXAMPLES": str(MAX_BATCH),
    }
    proc = start_learnserve(port, env)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as c:
            dense = {"kind": "dense", "dim": 784}
            assert c.put("/models/digits", json={"algorithm": "arow", "features": dense}).is_success
            for i in range(0, len(X), MAX_BATCH):
                ex = [
                    {"x": r, "y": int(v)}
                    for r, v in zip(
                        X[i : i + MAX_BATCH].tolist(), y[i : i + MAX_BATCH], strict=True
                    )
                ]
                r = c.post("/update", json={"model": "digits", "examples": ex})
                assert r.status_code == 200, r.text
            sparse = {"algorithm": "pa", "features": {"kind": "sparse", "dim": 10}}
            assert c.put("/models/sparse", json=sparse).is_success
            fresh = {"algorithm": "cw", "features": {"kind": "dense", "dim": 2}}
            assert c.put("/models/fresh", json=fresh).is_success  # learns nothing
            octets = {"content-type": "application/octet-stream"}
            for name, blob in (("ltr", ltr), ("small-digits", local)):
                r = c.put(f"/models/{name}/artifact", content=blob, headers=octets)
                assert r.status_code == 201, r.text
        yield Served(url, Xt, ranks, small, small_labels)
    finally:
        stop_process(proc)
        log = Path(proc.log_path).read_text(errors="replace")
        assert "Traceback" not in log, log[-6000:]


def client(s: Served) -> Any:
    return tc.InferenceServerClient(url=s.url.removeprefix("http://"))


def predict(s: Served, model: str, X: np.ndarray) -> list[dict[str, Any]]:
    body = {"model": model, "instances": [{"x": r} for r in X.tolist()]}
    r = httpx.post(f"{s.url}/predict", json=body, headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    preds: list[dict[str, Any]] = r.json()["predictions"]
    return preds


def infer(s: Served, model: str, X: np.ndarray, datatype: str, binary: bool, **kw: Any) -> Any:
    x = tc.InferInput("x", list(X.shape), datatype)
    x.set_data_from_numpy(X, binary_data=binary)
    # a copy: tritonclient adds Inference-Header-Content-Length to the dict it is given
    return client(s).infer(model, [x], headers=dict(AUTH), **kw)


def test_health_and_server_metadata(served: Served) -> None:
    c = client(served)
    assert c.is_server_live() and c.is_server_ready()  # no key needed
    meta = c.get_server_metadata(headers=AUTH)
    assert meta["name"] == "learnserve" and "binary_tensor_data" in meta["extensions"]
    assert c.is_model_ready("digits", headers=AUTH)
    assert c.is_model_ready("ltr", headers=AUTH) and c.is_model_ready("small-digits", headers=AUTH)
    assert not c.is_model_ready("nope", headers=AUTH)
    assert not c.is_model_ready("sparse", headers=AUTH)  # no tensor input: not served here
    assert not c.is_model_ready("digits")  # no key


def test_model_metadata(served: Served) -> None:
    c = client(served)
    m = c.get_model_metadata("digits", headers=AUTH)
    assert m["platform"] == "learnserve_linear" and m["parameters"]["algorithm"] == "arow"
    assert m["inputs"] == [{"name": "x", "datatype": "FP64", "shape": [-1, 784]}]
    outs = {o["name"]: (o["datatype"], o["shape"]) for o in m["outputs"]}
    assert outs == {
        "label": ("INT64", [-1]),
        "score": ("FP64", [-1]),
        "scores": ("FP64", [-1, -1]),
        "classes": ("INT64", [-1]),
        "confidence": ("FP64", [-1]),
    }
    assert int(m["versions"][0]) == 3  # three /update batches: the log position
    v = c.get_model_metadata("digits", model_version=m["versions"][0], headers=AUTH)
    assert v == m
    small = c.get_model_metadata("small-digits", headers=AUTH)
    outs = {o["name"]: (o["datatype"], o["shape"]) for o in small["outputs"]}
    assert outs["label"] == ("BYTES", [-1]) and outs["scores"] == ("FP64", [-1, 10])
    ltr = c.get_model_metadata("ltr", headers=AUTH)
    assert ltr["inputs"][0]["shape"] == [-1, 300]
    assert [o["name"] for o in ltr["outputs"]] == ["score"]
    with pytest.raises(InferenceServerException) as e:
        c.get_model_metadata("digits", model_version="99", headers=AUTH)
    assert e.value.status() == "404" and "serves version 3" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        c.get_model_metadata("sparse", headers=AUTH)
    assert e.value.status() == "400" and "POST /predict" in e.value.message()


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("datatype", ["FP32", "FP64"])
def test_arow_mnist_equals_predict(served: Served, datatype: str, binary: bool) -> None:
    X = served.digits.astype(np.float32 if datatype == "FP32" else np.float64)
    expected = predict(served, "digits", X.astype(np.float64))
    outputs = [
        tc.InferRequestedOutput(n, binary_data=binary)
        for n in ("label", "score", "scores", "classes", "confidence")
    ]
    res = infer(served, "digits", X, datatype, binary, outputs=outputs, request_id="req-7")
    assert res.get_response()["id"] == "req-7"
    assert res.get_response()["model_version"] == "3"
    classes = res.as_numpy("classes").tolist()
    assert sorted(classes) == list(range(10))
    assert res.as_numpy("label").tolist() == [p["label"] for p in expected]
    assert res.as_numpy("score").tolist() == [p["score"] for p in expected]
    assert res.as_numpy("confidence").tolist() == [p["confidence"] for p in expected]
    scores = res.as_numpy("scores")
    assert scores.shape == (len(X), 10)
    assert scores.tolist() == [[p["scores"][str(c)] for c in classes] for p in expected]
    # the model is a real digit classifier (pinned on this slice: 3000 examples learnt)
    _, yt = _test_labels()
    accuracy = float(np.mean(res.as_numpy("label") == yt))
    assert accuracy == pytest.approx(0.89, abs=0.02)  # measured: 0.89


def _test_labels() -> tuple[np.ndarray, np.ndarray]:
    from learners.io.idx import read_mnist

    Xt, yt = read_mnist(require_data("mnist"), "test")
    return Xt[:200], yt[:200]


@pytest.mark.parametrize("binary", [True, False])
def test_lambdamart_equals_predict(served: Served, binary: bool) -> None:
    expected = [p["score"] for p in predict(served, "ltr", served.ranks)]
    res = infer(served, "ltr", served.ranks, "FP64", binary)  # every output, binary by default
    assert res.as_numpy("score").tolist() == expected
    assert len(set(expected)) > 10  # the trees do separate the rows
    r32 = infer(served, "ltr", served.ranks.astype(np.float32), "FP32", binary)
    assert r32.as_numpy("score").tolist() == [
        p["score"] for p in predict(served, "ltr", served.ranks.astype(np.float32))
    ]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("datatype", ["FP64", "INT32"])
def test_llsvm_equals_predict(served: Served, datatype: str, binary: bool) -> None:
    expected = predict(served, "small-digits", served.small)
    X = served.small.astype(np.int32 if datatype == "INT32" else np.float64)
    res = infer(served, "small-digits", X, datatype, binary)
    labels = [v.decode() for v in res.as_numpy("label").tolist()]
    assert labels == [p["label"] for p in expected]
    assert res.as_numpy("score").tolist() == [p["score"] for p in expected]
    classes = [v.decode() for v in res.as_numpy("classes").tolist()]
    assert res.as_numpy("scores").tolist() == [[p["scores"][c] for c in classes] for p in expected]
    assert res.as_numpy("confidence") is None  # LL-SVM has none
    assert np.mean(np.array(labels) == np.array(served.small_labels)) > 0.8


def _post(s: Served, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{s.url}{path}", json=body, headers={**AUTH, **(headers or {})})


def _input(shape: list[int], data: Any, datatype: str = "FP64") -> dict[str, Any]:
    return {"inputs": [{"name": "x", "shape": shape, "datatype": datatype, "data": data}]}


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        (_input([1, 300], [0.5] * 299), 400, "inputs[0].data", "299 values"),
        (_input([1, 30], [0.5] * 30), 400, "inputs[0].shape", "rows of 300"),
        (_input([0, 300], []), 400, "inputs[0].shape", "empty"),
        (_input([MAX_BATCH + 1, 300], []), 413, "inputs[0].shape", "exceed the limit"),
        (_input([1, 300], [1e39] + [0.0] * 299, "FP32"), 400, "inputs[0].data", "[0, 0] is inf"),
        (_input([1, 300], [True] + [0.0] * 299), 400, "inputs[0].data[0]", "got boolean"),
        (_input([1, 300], [1.5] * 300, "INT64"), 400, "inputs[0].data[0]", "an integer"),
        (_input([1, 300], [300] * 300, "UINT8"), 400, "inputs[0].data", "outside [0, 255]"),
        (_input([1, 300], ["a"] * 300, "BYTES"), 400, "inputs[0].datatype", "not a number"),
        ({"inputs": []}, 400, "inputs", "one input"),
        ({**_input([1, 300], [0.0] * 300), "id": 5}, 400, "id", "string"),
        (
            {**_input([1, 300], [0.0] * 300), "outputs": [{"name": "label"}]},
            400,
            "outputs[0].name",
            "not one of",
        ),
    ],
)
def test_bad_requests_are_named(
    served: Served, body: Any, status: int, field: str, words: str
) -> None:
    r = _post(served, "/v2/models/ltr/infer", body)
    assert r.status_code == status, r.text
    err = r.json()
    assert field in err["error"] and words in err["error"], err
    assert err["field"] == field


def test_binary_nan_and_truncated_data_are_refused(served: Served) -> None:
    X = served.ranks[:2].copy()
    X[1, 7] = np.nan
    with pytest.raises(InferenceServerException) as e:
        infer(served, "ltr", X, "FP64", True)
    assert e.value.status() == "400" and "element [1, 7] is nan" in e.value.message()
    head = b'{"inputs":[{"name":"x","shape":[1,300],"datatype":"FP64",'
    head += b'"parameters":{"binary_data_size":2400}}]}'
    r = httpx.post(
        f"{served.url}/v2/models/ltr/infer",
        content=head + b"\0" * 100,
        headers={**AUTH, "Inference-Header-Content-Length": str(len(head))},
    )
    assert r.status_code == 400 and "2400 bytes announced, 100 follow" in r.json()["error"]


def test_errors_of_models_versions_and_keys(served: Served) -> None:
    ok = _input([1, 300], [0.0] * 300)
    r = _post(served, "/v2/models/nope/infer", ok)
    assert r.status_code == 404 and r.json()["error"] == "model 'nope' does not exist"
    r = _post(served, "/v2/models/ltr/versions/7/infer", ok)
    assert r.status_code == 404 and "serves version 1" in r.json()["error"]
    r = _post(served, "/v2/models/ltr/versions/1/infer", ok)
    assert r.status_code == 200 and r.json()["model_version"] == "1"
    r = _post(served, "/v2/models/sparse/infer", _input([1, 10], [0.0] * 10))
    assert r.status_code == 400 and "not a fixed-width tensor" in r.json()["error"]
    r = _post(served, "/v2/models/fresh/infer", _input([1, 2], [0.0, 1.0]))
    assert r.status_code == 409 and r.json()["code"] == "not_fitted"
    assert not client(served).is_model_ready("fresh", headers=AUTH)
    r = httpx.post(f"{served.url}/v2/models/ltr/infer", json=ok)
    assert r.status_code == 401 and "API key" in r.json()["error"]
    r = _post(served, "/v2/models/ltr/infer", ok, {"Authorization": "Bearer writer"})
    assert r.status_code == 403 and "'predict' scope" in r.json()["error"]
    r = _post(served, "/v2/models/ltr/infer", ok, {"Authorization": "Bearer reader"})
    assert r.status_code == 200
    r = httpx.post(
        f"{served.url}/v2/models/ltr/infer",
        content=b"{}",
        headers={**AUTH, "content-type": "text/plain"},
    )
    assert r.status_code == 415 and "error" in r.json()
    x = tc.InferInput("x", [1, 300], "FP64")
    x.set_data_from_numpy(served.ranks[:1])
    with pytest.raises(InferenceServerException) as e:
        client(served).infer("ltr", [x], headers=dict(AUTH), request_compression_algorithm="gzip")
    assert e.value.status() == "415" and "Content-Encoding 'gzip'" in e.value.message()


def test_metrics_count_v2_routes_per_model(served: Served) -> None:
    infer(served, "ltr", served.ranks[:3], "FP64", True)
    _post(served, "/v2/models/ltr/infer", _input([1, 2], [0.0, 1.0]))
    lines = httpx.get(f"{served.url}/metrics", headers=AUTH).text.splitlines()

    def has(name: str, *labels: str) -> bool:  # label order differs with several workers
        return any(ln.startswith(name + "{") and all(lb in ln for lb in labels) for ln in lines)

    route = 'route="/v2/models/{name}/infer"'
    assert has("learnserve_requests_total", route, 'model="ltr"', 'status="200"')
    assert has("learnserve_requests_total", route, 'model="ltr"', 'status="400"')
    assert has("learnserve_request_errors_total", route, 'status="400"', 'error="invalid_input"')


def test_not_ready_until_restored(tmp_path: Path) -> None:
    """Before the models are restored: live, but not ready; model routes answer 503."""
    import asyncio

    from service.app import create_app
    from service.engine.facade import Engine
    from service.settings import Settings
    from service.store import open_store

    settings = Settings(data_dir=str(tmp_path))
    app = create_app(settings)
    app.state.engine = Engine(open_store(None, tmp_path), settings)  # nothing restored

    async def get(method: str, path: str, **kw: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.request(method, path, **kw)

    assert asyncio.run(get("GET", "/v2/health/live")).status_code == 200
    for method, path in (
        ("GET", "/v2/health/ready"),
        ("GET", "/v2/models/m"),
        ("GET", "/v2/models/m/ready"),
        ("POST", "/v2/models/m/infer"),
    ):
        r = asyncio.run(get(method, path, json=_input([1, 2], [0.0, 1.0])))
        assert r.status_code == 503, (path, r.text)
        assert r.headers["retry-after"] == "1" and "starting" in r.json()["error"]
