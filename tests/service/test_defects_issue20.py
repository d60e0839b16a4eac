"""Issue #20 over real HTTP: requests that answered 500 (or were read loosely) now score
or are refused with a 4xx naming the field.

- ``/predict`` on a LambdaMART trained from 1-based SVMlight data (LightGBM's
  lambdarank example, ``index_base`` 1) with an instance without features
  (``{"x": {}}``), alone or among others, in ``instances`` and in ``queries[].items[]``:
  scored as an empty row (every feature 0.0), as the library scores it.
- ``POST /v2/models/{name}/infer`` with a field of the wrong JSON type (``datatype``
  ``[]``, ``{}``, ``["FP32"]``; ``name``, ``parameters``, ``outputs[].name``...): 400
  in the protocol's error shape (``{"error", "code", "field"}``), naming the field.
- ``Inference-Header-Content-Length`` read as a canonical decimal (``+86``, ``8_6``,
  `` 86 ``, ``086`` refused with 400), not with ``int()``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from learners import artifact
from learners.features import Batch
from learners.io.svmlight import read_svmlight
from learners.ranking.lambdamart import LambdaMART
from service.api.errors import ApiError
from service.api.v2_tensors import split_request
from service.settings import Settings
from tests.conftest import require_data
from tests.service.serving import ServerThread

DIM = 300  # LightGBM's lambdarank example: features 1..300 in its (1-based) files


@dataclass
class Served:
    client: httpx.Client
    url: str
    model: LambdaMART
    rows: np.ndarray  # held-out rows of the test file, dense (column j = file feature j+1)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", n_features=DIM, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=DIM, query_file=d / "rank.test.query")
    m = LambdaMART(n_estimators=10, num_leaves=15, min_data_in_leaf=20)
    m.fit(tr.X, tr.y, tr.group_sizes)
    m.meta_["index_base"] = 1  # as `learnserve train lambdamart` sets for a 1-based file
    zero = LambdaMART.from_bytes(m.to_bytes())
    zero.meta_["index_base"] = 0
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("issue20")))
    with ServerThread(settings) as srv, srv.client() as c:
        octets = {"content-type": "application/octet-stream"}
        for name, model in (("ltr", m), ("ltr0", zero)):
            r = c.put(f"/models/{name}/artifact", content=model.to_bytes(), headers=octets)
            assert r.status_code == 201, r.text
        yield Served(c, srv.url, m, te.X.to_dense()[:20])


def sparse(row: np.ndarray, base: int = 1) -> dict[str, float]:
    return {str(j + base): v for j, v in enumerate(row.tolist()) if v}


def empty_row_score(m: LambdaMART) -> float:
    empty = Batch(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), DIM)
    s = float(m.predict(empty)[0])
    assert s == float(m.predict(np.zeros((1, DIM)))[0])  # absent features are 0.0
    return s


# ---------------------------------------------------------------- 1. {"x": {}} on 1-based keys


def test_an_instance_without_features_scores_as_an_empty_row(served: Served) -> None:
    c, m = served.client, served.model
    blank = empty_row_score(m)
    for name in ("ltr", "ltr0"):
        r = c.post("/predict", json={"model": name, "instances": [{"x": {}}]})
        assert r.status_code == 200, r.text
        assert r.json()["predictions"] == [{"score": blank}]
    # among rows with features: each row scores as it would alone
    X = served.rows[:3]
    body = {"model": "ltr", "instances": [{"x": {}}, {"x": sparse(X[0])}, {"x": {}}]}
    r = c.post("/predict", json=body)
    assert r.status_code == 200, r.text
    assert [p["score"] for p in r.json()["predictions"]] == [blank, m.predict(X[:1])[0], blank]


def test_a_query_item_without_features_scores_as_an_empty_row(served: Served) -> None:
    c, m = served.client, served.model
    blank = empty_row_score(m)
    X = served.rows[:4]
    queries = [
        {"qid": "all-empty", "items": [{"x": {}}, {"x": {}}]},
        {"qid": "mixed", "items": [{"x": sparse(X[0])}, {"x": {}}, {"x": sparse(X[1])}]},
    ]
    r = c.post("/predict", json={"model": "ltr", "queries": queries})
    assert r.status_code == 200, r.text
    a, b = r.json()["predictions"]
    assert a == {"qid": "all-empty", "scores": [blank, blank], "order": [0, 1]}
    expected = [m.predict(X[:1])[0], blank, m.predict(X[1:2])[0]]
    assert b["scores"] == expected
    assert b["order"] == np.argsort(-np.array(expected), kind="stable").tolist()
    # the whole request empty rows only, as queries
    r = c.post("/predict", json={"model": "ltr", "queries": [{"items": [{"x": {}}]}]})
    assert r.status_code == 200 and r.json()["predictions"][0]["scores"] == [blank], r.text
    # a 0 key is still outside the 1-based keys, next to an empty row
    body = {"model": "ltr", "instances": [{"x": {}}, {"x": {"0": 1.0}}]}
    r = c.post("/predict", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"]["field"] == 'instances[1].x["0"]'


# ---------------------------------------------------------------- 2. v2 infer: wrong JSON types


def ok_body() -> dict[str, Any]:
    return {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, DIM], "data": [0.0] * DIM}]}


def edit(fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = ok_body()
    fn(body)
    return body


def set_input(key: str, value: Any) -> dict[str, Any]:
    return edit(lambda b: b["inputs"][0].__setitem__(key, value))


def set_output(value: Any) -> dict[str, Any]:
    return edit(lambda b: b.__setitem__("outputs", [value]))


WRONG_TYPES = [
    (set_input("datatype", []), "inputs[0].datatype"),
    (set_input("datatype", {}), "inputs[0].datatype"),
    (set_input("datatype", ["FP32"]), "inputs[0].datatype"),
    (set_input("datatype", {"FP32": 1}), "inputs[0].datatype"),
    (set_input("datatype", 32), "inputs[0].datatype"),
    (set_input("name", ["x"]), "inputs[0].name"),
    (set_input("name", {"x": 1}), "inputs[0].name"),
    (set_input("shape", {"rows": 1}), "inputs[0].shape"),
    (set_input("shape", [[1], [DIM]]), "inputs[0].shape"),
    (set_input("shape", [1.0, DIM]), "inputs[0].shape"),
    (set_input("data", {"0": 1.0}), "inputs[0].data"),
    (set_input("parameters", []), "inputs[0].parameters"),
    (set_input("parameters", "binary"), "inputs[0].parameters"),
    (set_input("parameters", {"binary_data_size": [8]}), "inputs[0].parameters.binary_data_size"),
    (edit(lambda b: b.__setitem__("inputs", {"x": 1})), "inputs"),
    (edit(lambda b: b.__setitem__("inputs", [["x"]])), "inputs"),
    (edit(lambda b: b.__setitem__("parameters", ["binary_data_output"])), "parameters"),
    (
        edit(lambda b: b.__setitem__("parameters", {"binary_data_output": "true"})),
        "parameters.binary_data_output",
    ),
    (edit(lambda b: b.__setitem__("outputs", {"name": "score"})), "outputs"),
    (set_output("score"), "outputs[0]"),
    (set_output(["score"]), "outputs[0]"),
    (set_output({"name": ["score"]}), "outputs[0].name"),
    (set_output({"name": {"score": 1}}), "outputs[0].name"),
    (set_output({"name": None}), "outputs[0].name"),
    (set_output({"name": "score", "parameters": []}), "outputs[0].parameters"),
    (
        set_output({"name": "score", "parameters": {"binary_data": "yes"}}),
        "outputs[0].parameters.binary_data",
    ),
    (edit(lambda b: b.__setitem__("id", ["req"])), "id"),
]


@pytest.mark.parametrize(
    ("body", "field"), WRONG_TYPES, ids=[f"{i}-{f}" for i, (_, f) in enumerate(WRONG_TYPES)]
)
def test_v2_infer_refuses_wrong_json_types_naming_the_field(
    served: Served, body: dict[str, Any], field: str
) -> None:
    for path in ("/v2/models/ltr/infer", "/v2/models/ltr/versions/1/infer"):
        r = served.client.post(path, json=body)
        assert r.status_code == 400, (field, r.status_code, r.text)
        err = r.json()
        assert set(err) == {"error", "code", "field"}, err  # the protocol's error shape
        assert err["code"] == "invalid_input" and err["field"] == field, err
        assert err["error"].startswith(f"{field}: "), err


def test_v2_infer_still_answers_the_right_types(served: Served) -> None:
    X = served.rows[:2]
    body = {
        "id": "r1",
        "inputs": [{"name": "x", "datatype": "FP64", "shape": [2, DIM], "data": X.tolist(),
                    "parameters": {}}],
        "outputs": [{"name": "score", "parameters": {"binary_data": False}}],
        "parameters": {"binary_data_output": False},
    }  # fmt: skip
    r = served.client.post("/v2/models/ltr/infer", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["id"] == "r1" and out["outputs"][0]["data"] == served.model.predict(X).tolist()


# ---------------------------------------------------------------- Inference-Header-Content-Length


def binary_request(X: np.ndarray) -> tuple[bytes, int]:
    head = orjson.dumps(
        {"inputs": [{"name": "x", "datatype": "FP64", "shape": list(X.shape),
                     "parameters": {"binary_data_size": X.nbytes}}],
         "parameters": {"binary_data_output": True}}
    )  # fmt: skip
    return head + X.astype("<f8").tobytes(), len(head)


def raw_post(url: str, path: str, body: bytes, headers: list[tuple[str, str]]) -> tuple[int, Any]:
    """POST with header values sent byte for byte (httpx refuses some of them)."""
    host, port = url.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}",
             "Connection: close", *(f"{k}: {v}" for k, v in headers)]  # fmt: skip
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, orjson.loads(payload) if status != 200 else payload


def test_header_length_is_a_canonical_decimal(served: Served) -> None:
    X = served.rows[:2]
    body, n = binary_request(X)
    path = "/v2/models/ltr/infer"
    r = served.client.post(path, content=body, headers={"Inference-Header-Content-Length": str(n)})
    assert r.status_code == 200, r.text
    got = r.content[int(r.headers["inference-header-content-length"]) :]
    assert np.frombuffer(got, "<f8").tolist() == served.model.predict(X).tolist()
    field = "Inference-Header-Content-Length"
    for value in (f"+{n}", f"{n // 10}_{n % 10}", f"0{n}", f"{n}.0", f"{n}e0", "0x" + f"{n:x}"):
        status, err = raw_post(served.url, path, body, [(field, value)])
        assert status == 400, (value, status, err)
        assert err["field"] == field and err["code"] == "invalid_input", err
    # the parser itself (HTTP strips the spaces around a header value before it)
    for value in (f" {n} ", f"{n} ", f"\t{n}", "\u0668\u0666", "²", f"{n}\n", ""):
        with pytest.raises(ApiError) as e:
            split_request(body, value)
        assert e.value.status == 400 and e.value.field == field, value
    req, rest = split_request(body, str(n))
    assert req["inputs"][0]["name"] == "x" and rest == X.astype("<f8").tobytes()


# ---------------------------------------------------------------- the import's default limits


def test_import_limits_default_to_what_a_deploy_applies() -> None:
    """``learnserve import lightgbm`` refuses what a default-configured service's deploy
    would: the same ``max_model_bytes`` and ``max_artifact_bytes``."""
    fields = Settings.model_fields
    assert fields["max_model_bytes"].default == artifact.DEFAULT_MAX_MODEL_BYTES
    assert fields["max_artifact_bytes"].default == artifact.DEFAULT_MAX_ARTIFACT_BYTES
