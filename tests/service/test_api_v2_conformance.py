"""The Open Inference Protocol as its clients read it (issue #20, defect 6), with NVIDIA's
``tritonclient.http`` against small models trained here (no data set needed).

- A path or method the server does not serve answers the protocol's ``{"error": ...}``
  (404/405), so the client shows the server's message, not a decoding failure.
- What a request asks of its outputs is done or refused with a 400 naming the part:
  ``classification`` (tritonclient's ``class_count``) answers the classification
  extension's top-k strings; ``binary_data_output``/``binary_data`` must be booleans and
  ``true`` answers the bytes after the JSON; an output named twice, shared memory and
  unknown output parameters are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread, dense_model

tc = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

KEY = "conformance-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
ROWS = np.array([[1.0, 0.2, -0.5], [-0.3, 1.5, 0.1], [0.0, -0.2, 2.0], [0.5, 0.5, 0.5]])


def _examples(labels: list[Any]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(60):
        k = i % 3
        x = rng.normal(scale=0.3, size=3)
        x[k] += 1.5
        out.append({"x": x.tolist(), "y": labels[k]})
    return out


def _lambdamart() -> bytes:
    from learners.ranking.lambdamart import LambdaMART

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.clip((X[:, 0] * 2 + 2).round(), 0, 4).astype(int)
    blob: bytes = (
        LambdaMART(n_estimators=3, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 3).to_bytes()
    )
    return blob


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("v2conf")
    settings = Settings(data_dir=str(data_dir), api_keys={KEY: ["predict", "update", "admin"]})
    with ServerThread(settings) as srv, srv.client(headers=AUTH) as c:
        for name, labels in (("animals", ["cat", "dog", "eel"]), ("digits", [0, 1, 2])):
            assert c.put(f"/models/{name}", json=dense_model(3, "arow")).status_code == 201
            r = c.post("/update", json={"model": name, "examples": _examples(labels)})
            assert r.status_code == 200, r.text
        r = c.put(
            "/models/ltr/artifact",
            content=_lambdamart(),
            headers={"content-type": "application/octet-stream"},
        )
        assert r.status_code == 201, r.text
        yield srv.url


def client(url: str) -> Any:
    return tc.InferenceServerClient(url=url.removeprefix("http://"))


def x_input(binary: bool = True) -> Any:
    x = tc.InferInput("x", list(ROWS.shape), "FP64")
    x.set_data_from_numpy(ROWS, binary_data=binary)
    return x


def predict(url: str, model: str) -> list[dict[str, Any]]:
    body = {"model": model, "instances": [{"x": r} for r in ROWS.tolist()]}
    r = httpx.post(f"{url}/predict", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    preds: list[dict[str, Any]] = r.json()["predictions"]
    return preds


def infer_raw(url: str, body: Any, model: str = "animals") -> httpx.Response:
    return httpx.post(f"{url}/v2/models/{model}/infer", json=body, headers=AUTH)


def body_with(outputs: Any = None, parameters: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "inputs": [
            {"name": "x", "shape": list(ROWS.shape), "datatype": "FP64", "data": ROWS.tolist()}
        ]
    }
    if outputs is not None:
        body["outputs"] = outputs
    if parameters is not None:
        body["parameters"] = parameters
    return body


def refused(r: httpx.Response, field: str, words: str) -> None:
    assert r.status_code == 400, r.text
    err = r.json()
    assert err["field"] == field and words in err["error"], err


# ------------------------------------------------------------- paths and methods


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("get_model_config", ("animals",)),
        ("get_inference_statistics", ("animals",)),
        ("get_model_repository_index", ()),
        ("load_model", ("animals",)),
        ("unload_model", ("animals",)),
        ("get_log_settings", ()),
        ("get_trace_settings", ()),
        ("get_system_shared_memory_status", ()),
        ("get_cuda_shared_memory_status", ()),
    ],
)
def test_unserved_extensions_answer_the_protocols_error(url: str, call: str, args: tuple) -> None:
    with pytest.raises(InferenceServerException) as e:
        getattr(client(url), call)(*args, headers=dict(AUTH))
    assert e.value.status() == "404", e.value.message()
    assert "is not served" in e.value.message() and "decoding" not in e.value.message()


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("GET", "/v2/models/animals/config", 404, None),
        ("GET", "/v2/models/animals/stats", 404, None),
        ("POST", "/v2/repository/index", 404, None),
        ("POST", "/v2/repository/models/animals/load", 404, None),
        ("GET", "/v2/anything/at/all", 404, None),
        ("GET", "/v2/models", 404, None),
        ("GET", "/v2/models/animals/infer", 405, "POST, OPTIONS"),
        ("DELETE", "/v2/models/animals", 405, "GET, OPTIONS"),
        ("POST", "/v2/health/live", 405, "GET, OPTIONS"),
        ("PUT", "/v2", 405, "GET, OPTIONS"),
    ],
)
def test_unserved_paths_and_methods(
    url: str, method: str, path: str, status: int, allow: str | None
) -> None:
    r = httpx.request(method, url + path, headers=AUTH)
    assert r.status_code == status, r.text
    err = r.json()
    assert set(err) == {"error", "code"} and path in err["error"], err
    if allow is not None:
        assert r.headers["allow"] == allow and allow in err["error"]
    # the service's own routes keep their error body
    r = httpx.get(f"{url}/models/animals/config", headers=AUTH)
    assert r.status_code == 404 and r.json()["detail"]["error"] == "not_found"


def test_server_metadata_lists_classification(url: str) -> None:
    meta = client(url).get_server_metadata(headers=AUTH)
    assert {"binary_tensor_data", "classification"} <= set(meta["extensions"])


# ---------------------------------------------------------------- classification


def top_k(pred: dict[str, Any], classes: list[Any], k: int) -> list[str]:
    """The classification extension's strings for one /predict answer."""
    scores = [pred["scores"][str(c)] for c in classes]
    order = sorted(range(len(classes)), key=lambda j: (-scores[j], j))[:k]
    return [f"{scores[j]!r}:{j}:{classes[j]}" for j in order]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize(("model", "k"), [("animals", 2), ("digits", 1), ("digits", 50)])
def test_classification_answers_top_k(url: str, model: str, k: int, binary: bool) -> None:
    outputs = [
        tc.InferRequestedOutput("scores", binary_data=binary, class_count=k),
        tc.InferRequestedOutput("classes", binary_data=binary),
        tc.InferRequestedOutput("label", binary_data=binary),
    ]
    res = client(url).infer(model, [x_input()], outputs=outputs, headers=dict(AUTH))
    classes = res.as_numpy("classes").tolist()
    classes = [c.decode() if isinstance(c, bytes) else c for c in classes]
    top = res.as_numpy("scores")
    assert top.shape == (len(ROWS), min(k, 3))
    expected = predict(url, model)
    for row, pred in zip(top.tolist(), expected, strict=True):
        got = [v.decode() if isinstance(v, bytes) else v for v in row]
        assert got == top_k(pred, classes, k)
        assert got[0].split(":", 2)[2] == str(pred["label"])  # the best class is the label
    out = {o["name"]: o for o in res.get_response()["outputs"]}
    assert out["scores"]["datatype"] == "BYTES" and out["scores"]["shape"] == [len(ROWS), min(k, 3)]


@pytest.mark.parametrize(
    ("model", "outputs", "words"),
    [
        (
            "animals",
            [{"name": "label", "parameters": {"classification": 2}}],
            "offered on 'scores'",
        ),
        ("ltr", [{"name": "score", "parameters": {"classification": 1}}], "this model ranks"),
        ("animals", [{"name": "scores", "parameters": {"classification": 0}}], "integer >= 1"),
        ("animals", [{"name": "scores", "parameters": {"classification": -3}}], "integer >= 1"),
        ("animals", [{"name": "scores", "parameters": {"classification": True}}], "integer"),
        ("animals", [{"name": "scores", "parameters": {"classification": "2"}}], "integer"),
        ("animals", [{"name": "scores", "parameters": {"classification": 2.0}}], "integer"),
    ],
)
def test_classification_that_cannot_be_done_is_refused(
    url: str, model: str, outputs: list[Any], words: str
) -> None:
    refused(
        infer_raw(url, body_with(outputs), model), "outputs[0].parameters.classification", words
    )


def test_classification_refusal_reaches_tritonclient(url: str) -> None:
    out = tc.InferRequestedOutput("label", class_count=2)
    with pytest.raises(InferenceServerException) as e:
        client(url).infer("animals", [x_input()], outputs=[out], headers=dict(AUTH))
    assert e.value.status() == "400" and "outputs[0].parameters.classification" in e.value.message()


# ------------------------------------------------------------------- binary data


def split_binary(r: httpx.Response) -> dict[str, Any]:
    """Each output of a binary answer, decoded from the bytes after the JSON."""
    n = int(r.headers["inference-header-content-length"])
    head = r.json() if n == len(r.content) else __import__("orjson").loads(r.content[:n])
    rest, out = r.content[n:], {}
    for o in head["outputs"]:
        size = o["parameters"]["binary_data_size"]
        blob, rest = rest[:size], rest[size:]
        dtype = {"FP64": "<f8", "INT64": "<i8"}.get(o["datatype"])
        out[o["name"]] = np.frombuffer(blob, dtype=dtype).tolist() if dtype else blob
    assert rest == b""
    return out


def test_binary_data_output_true_answers_bytes(url: str) -> None:
    as_json = infer_raw(url, body_with())
    assert as_json.headers["content-type"] == "application/json"
    values = {o["name"]: o["data"] for o in as_json.json()["outputs"]}
    r = infer_raw(url, body_with(parameters={"binary_data_output": True}), "digits")
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    binary = split_binary(r)
    plain = {o["name"]: o["data"] for o in infer_raw(url, body_with(), "digits").json()["outputs"]}
    assert binary.keys() == plain.keys() and binary["scores"] == plain["scores"]
    assert binary["label"] == plain["label"] and binary["score"] == plain["score"]
    # per output, binary_data overrides the request's default
    outs = [{"name": "label", "parameters": {"binary_data": False}}, {"name": "score"}]
    r = infer_raw(url, body_with(outs, {"binary_data_output": True}))
    n = int(r.headers["inference-header-content-length"])
    head = __import__("orjson").loads(r.content[:n])
    assert head["outputs"][0]["data"] == values["label"]
    assert head["outputs"][1]["parameters"]["binary_data_size"] == 8 * len(ROWS)
    # tritonclient asks binary_data_output when it names no output
    res = client(url).infer("digits", [x_input()], headers=dict(AUTH))
    assert res.as_numpy("label").tolist() == plain["label"]


@pytest.mark.parametrize("value", ["true", 1, 0, [], {}])
def test_binary_flags_must_be_booleans(url: str, value: Any) -> None:
    r = infer_raw(url, body_with(parameters={"binary_data_output": value}))
    refused(r, "parameters.binary_data_output", "true or false")
    r = infer_raw(url, body_with([{"name": "label", "parameters": {"binary_data": value}}]))
    refused(r, "outputs[0].parameters.binary_data", "true or false")


# --------------------------------------------------------------- what is asked


def test_an_output_named_twice_is_refused(url: str) -> None:
    outs = [{"name": "label"}, {"name": "score"}, {"name": "label"}]
    refused(infer_raw(url, body_with(outs)), "outputs[2].name", "asked for twice (also outputs[0])")
    both = [tc.InferRequestedOutput("score"), tc.InferRequestedOutput("score", binary_data=False)]
    with pytest.raises(InferenceServerException) as e:
        client(url).infer("animals", [x_input()], outputs=both, headers=dict(AUTH))
    assert e.value.status() == "400" and "twice" in e.value.message()


def test_shared_memory_and_unknown_output_parameters_are_refused(url: str) -> None:
    out = tc.InferRequestedOutput("label")
    out.set_shared_memory("region", 64)
    with pytest.raises(InferenceServerException) as e:
        client(url).infer("animals", [x_input()], outputs=[out], headers=dict(AUTH))
    assert e.value.status() == "400" and "shared memory is not supported" in e.value.message()
    outs = [{"name": "label", "parameters": {"top": 3}}]
    refused(infer_raw(url, body_with(outs)), "outputs[0].parameters.top", "not an output parameter")


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (body_with(parameters=[]), "parameters", "an object"),
        (body_with(outputs={"name": "label"}), "outputs", "an array"),
        (body_with(outputs=["label"]), "outputs[0]", "an object"),
        (body_with(outputs=[{"name": ["label"]}]), "outputs[0].name", "not one of"),
        (
            body_with(outputs=[{"name": "label", "parameters": 3}]),
            "outputs[0].parameters",
            "object",
        ),
    ],
)
def test_malformed_outputs_are_named(url: str, body: Any, field: str, words: str) -> None:
    refused(infer_raw(url, body), field, words)


def test_no_outputs_or_an_empty_list_answers_all(url: str) -> None:
    names = {o["name"] for o in infer_raw(url, body_with()).json()["outputs"]}
    assert names == {"label", "score", "scores", "classes", "confidence"}
    r = infer_raw(url, body_with(outputs=[]))
    assert {o["name"] for o in r.json()["outputs"]} == names


def test_null_is_absent(url: str) -> None:
    body = body_with(parameters={"binary_data_output": None})
    body["outputs"] = None
    r = infer_raw(url, body)
    assert r.status_code == 200 and len(r.json()["outputs"]) == 5, r.text
    nulls = {"binary_data": None, "classification": None}
    outs = [{"name": "label", "parameters": None}, {"name": "scores", "parameters": nulls}]
    r = infer_raw(url, {**body_with(outs), "parameters": None})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    assert [o["shape"] for o in r.json()["outputs"]] == [[len(ROWS)], [len(ROWS), 3]]
