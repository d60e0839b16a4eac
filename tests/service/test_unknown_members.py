"""Unknown top-level members of ``/update``, ``/predict`` and v2 ``infer`` bodies are
refused, naming the member (issue 31 item 2): a typo such as ``minversion`` or a member
the service does not have (``idempotency_key``: the key is a header) was ignored, so the
client believed it had been read.

The compiled scanners (dense, sparse, hashed and raw-records examples; dense instances;
a batch model's sparse instances) take only bodies of ``model`` and the examples or
instances, and leave any other body to the general path, which refuses the member: each
valid body below is checked to be one the scanner takes (so the refusal is checked on
the body the fast path would otherwise read), and a refused body changes no model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from service.models.fast_json_dense_instances import scan_dense_instances
from service.models.fast_json_instances import scan_sparse_instances
from service.settings import Settings
from tests.learners.artifact_tools import valid_blobs
from tests.service.serving import ServerThread

JSON = {"content-type": "application/json"}
RECORDS = {
    "kind": "records",
    "bits": 12,
    "fields": {"age": {"type": "numeric"}, "job": {"type": "categorical"}},
}
FEATURES: dict[str, dict[str, Any]] = {
    "dense": {"kind": "dense", "dim": 3},
    "sparse": {"kind": "sparse", "dim": 8},
    "hashed": {"kind": "hashed", "bits": 10},
    "records": RECORDS,
}
X: dict[str, Any] = {
    "dense": [0.5, -1.0, 2.0],
    "sparse": {"1": 0.5, "7": -1.0},
    "hashed": {"colour=red": 1.0, "size": 2.5},
    "records": {"age": 39, "job": "clerk"},
}
UNKNOWN = [("minversion", 3), ("idempotency_key", "k-1"), ("Examples", [])]


class Served:
    def __init__(self, srv: ServerThread, client: httpx.Client) -> None:
        self.srv, self.c = srv, client

    def handle(self, name: str) -> Any:
        return self.srv.app.state.engine.models[name]

    def version(self, name: str) -> int:
        r = self.c.get(f"/models/{name}")
        assert r.status_code == 200, r.text
        return int(r.json()["version"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("unknown-members")))
    # (a long timeout: the first records update may compile the records kernels)
    with ServerThread(settings) as srv, srv.client(timeout=900.0) as c:
        for name, features in FEATURES.items():
            r = c.put(f"/models/{name}", json={"algorithm": "arow", "features": features})
            assert r.status_code == 201, r.text
            body = {"model": name, "examples": [{"x": X[name], "y": y} for y in ("a", "b")]}
            assert c.post("/update", json=body).status_code == 200
        r = c.put(
            "/models/ranker/artifact", content=valid_blobs()["lambdamart"],
            headers={"content-type": "application/octet-stream"},
        )  # fmt: skip
        assert r.status_code == 201, r.text
        yield Served(srv, c)


def with_member(body: dict[str, Any], member: str, value: Any, where: str) -> bytes:
    """``body`` with ``member`` first or last (the scanners read members in order)."""
    items = list(body.items())
    items = [(member, value), *items] if where == "first" else [*items, (member, value)]
    return orjson.dumps(dict(items))


def refused(r: httpx.Response, member: str) -> None:
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail["field"] == member, detail
    assert detail["message"].startswith(f"{member}: unknown field"), detail


@pytest.mark.parametrize("kind", list(FEATURES))
@pytest.mark.parametrize(("member", "value"), UNKNOWN)
@pytest.mark.parametrize("where", ["first", "last"])
def test_update_refuses_an_unknown_member_on_every_kind(
    served: Served, kind: str, member: str, value: Any, where: str
) -> None:
    c, added = served.c, (member, value, where)
    body = {"model": kind, "examples": [{"x": X[kind], "y": "a"}]}
    adapter = served.handle(kind).adapter
    assert adapter.parse_update_raw(orjson.dumps(body), served.srv.settings) is not None
    before = served.version(kind)
    refused(
        c.post("/update", content=with_member(body, member, value, where), headers=JSON), member
    )
    on_path = with_member({"examples": body["examples"]}, *added)
    refused(c.post(f"/models/{kind}/update", content=on_path, headers=JSON), member)
    keyed = {**JSON, "idempotency-key": f"{kind}-{member}-{where}"}
    refused(
        c.post("/update", content=with_member(body, member, value, where), headers=keyed), member
    )
    by_id = {"model": kind, "examples": [{"id": "never-predicted", "y": "a"}]}  # delayed labels
    refused(
        c.post("/update", content=with_member(by_id, member, value, where), headers=JSON), member
    )
    assert served.version(kind) == before  # nothing was learned
    # the valid body is unchanged: learned (by the scanner), and answered as before
    r = c.post("/update", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == 200 and r.json()["version"] == before + 1, r.text


@pytest.mark.parametrize("kind", list(FEATURES))
@pytest.mark.parametrize(("member", "value"), UNKNOWN)
@pytest.mark.parametrize("where", ["first", "last"])
def test_predict_refuses_an_unknown_member_on_every_kind(
    served: Served, kind: str, member: str, value: Any, where: str
) -> None:
    c, added = served.c, (member, value, where)
    body = {"model": kind, "instances": [{"x": X[kind]}]}
    if kind == "dense":  # the compiled dense-instances scanner reads the valid body
        assert scan_dense_instances(orjson.dumps(body), 3, 100) is not None
    want = c.post("/predict", content=orjson.dumps(body), headers=JSON)
    assert want.status_code == 200, want.text
    refused(
        c.post("/predict", content=with_member(body, member, value, where), headers=JSON), member
    )
    on_path = with_member({"instances": body["instances"]}, *added)
    refused(c.post(f"/models/{kind}/predict", content=on_path, headers=JSON), member)
    tracked = {"model": kind, "instances": [{"x": X[kind], "id": f"p-{member}-{where}"}]}
    refused(
        c.post("/predict", content=with_member(tracked, member, value, where), headers=JSON), member
    )
    # the documented members are still read
    again = {**body, "min_version": 0, "k": 5}
    r = c.post("/predict", content=orjson.dumps(again), headers=JSON)
    assert r.status_code == 200 and r.json() == want.json(), r.text


@pytest.mark.parametrize("where", ["first", "last"])
def test_batch_model_sparse_instances_refuse_an_unknown_member(served: Served, where: str) -> None:
    rows = [{"x": {str(j): 0.1 * (i + j) for j in range(5)}} for i in range(60)]
    body = {"model": "ranker", "instances": rows}
    raw = orjson.dumps(body)
    assert len(raw) > 2048 and scan_sparse_instances(raw, 5, 0, 1000, 1000) is not None
    want = served.c.post("/predict", content=raw, headers=JSON)
    assert want.status_code == 200, want.text
    bad = with_member(body, "minversion", 1, where)
    refused(served.c.post("/predict", content=bad, headers=JSON), "minversion")


def test_v2_infer_refuses_an_unknown_member(served: Served) -> None:
    tensor = {"name": "x", "datatype": "FP64", "shape": [1, 3], "data": X["dense"]}
    body = {"inputs": [tensor]}
    r = served.c.post("/v2/models/dense/infer", json=body)
    assert r.status_code == 200, r.text
    for member in ("output", "model_name"):
        r = served.c.post("/v2/models/dense/infer", json={**body, member: []})
        assert r.status_code == 400, r.text  # the protocol's status for invalid input
        assert r.json()["field"] == member and r.json()["error"].startswith(f"{member}: unknown")
    r = served.c.post("/v2/models/dense/infer", json={**body, "id": "r", "parameters": {},
                                                      "outputs": [{"name": "label"}]})  # fmt: skip
    assert r.status_code == 200, r.text


def test_the_openapi_document_forbids_other_members(served: Served) -> None:
    schemas = served.c.get("/openapi.json").json()["components"]["schemas"]
    for name in ("UpdateRequest", "PredictRequest", "UpdateByPathRequest",
                 "PredictByPathRequest", "V2InferRequest"):  # fmt: skip
        assert schemas[name]["additionalProperties"] is False, name
