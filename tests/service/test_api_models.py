"""PUT/GET/DELETE /models over real HTTP (embedded SQLite store), plus health and docs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread, dense_model


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("models-api")), max_dim=1 << 20)
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def err(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"detail"}, body
    assert {"error", "message"} <= set(body["detail"]), body
    return body["detail"]


def test_health_and_ready(client: httpx.Client) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert r.headers["x-worker"].isdigit()
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True and r.json()["store"] == "sqlite"


def test_create_is_idempotent_and_conflicts(client: httpx.Client) -> None:
    body = dense_model(4, "arow", r=0.5)
    r = client.put("/models/m-create", json=body)
    assert r.status_code == 201, r.text
    info = r.json()
    assert info["name"] == "m-create" and info["kind"] == "linear" and info["version"] == 0
    assert info["config"]["algorithm"] == "arow"
    assert info["config"]["params"] == {"r": 0.5, "covariance": "diagonal"}  # defaults filled
    assert info["config"]["features"] == {"kind": "dense", "dim": 4}
    assert len(info["state_digest"]) == 64
    r2 = client.put("/models/m-create", json=body)
    assert r2.status_code == 200 and r2.json()["state_digest"] == info["state_digest"]
    r3 = client.put("/models/m-create", json=dense_model(4, "arow", r=2.0))
    assert r3.status_code == 409 and err(r3)["error"] == "conflict"
    r4 = client.put("/models/m-create", json=dense_model(5, "arow", r=0.5))
    assert r4.status_code == 409


def test_list_get_delete(client: httpx.Client) -> None:
    for name in ("m-list-a", "m-list-b"):
        assert client.put(f"/models/{name}", json=dense_model(3, "pa")).status_code == 201
    names = {m["name"] for m in client.get("/models").json()["models"]}
    assert {"m-list-a", "m-list-b"} <= names
    got = client.get("/models/m-list-a").json()
    assert got["config"]["algorithm"] == "pa"
    assert got["online_metrics"]["accuracy"] is None and got["last_checkpoint"] is None
    assert client.delete("/models/m-list-a").status_code == 204
    r = client.get("/models/m-list-a")
    assert r.status_code == 404 and err(r)["error"] == "model_not_found"
    assert client.delete("/models/m-list-a").status_code == 404
    names = {m["name"] for m in client.get("/models").json()["models"]}
    assert "m-list-a" not in names and "m-list-b" in names


def test_delete_removes_stored_state(client: httpx.Client) -> None:
    """Re-creating a deleted name starts from scratch (log and state are gone)."""
    client.put("/models/m-recreate", json=dense_model(2, "pa"))
    r = client.post(
        "/update", json={"model": "m-recreate", "examples": [{"x": [1, 0], "y": "a"}] * 3}
    )
    assert r.json()["version"] == 1
    assert client.delete("/models/m-recreate").status_code == 204
    r = client.put("/models/m-recreate", json=dense_model(2, "pa"))
    assert r.status_code == 201 and r.json()["version"] == 0 and r.json()["labels"] == []
    r = client.post("/update", json={"model": "m-recreate", "examples": [{"x": [1, 0], "y": "a"}]})
    assert r.json()["version"] == 1


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"algorithm": "svm", "features": {"kind": "dense", "dim": 3}}, "algorithm", "svm"),
        ({"features": {"kind": "dense", "dim": 3}}, "algorithm", "must be one of"),
        (dense_model(3, "arow", r=-1.0), "params.r", "params.r"),
        (dense_model(3, "arow", bogus=1), "params.bogus", "bogus"),
        ({**dense_model(3, "pa"), "params": [1]}, "params", "object"),
        ({"algorithm": "pa", "features": {"kind": "dense", "dim": 0}}, "features", "dim"),
        ({"algorithm": "pa", "features": {"kind": "dense", "dim": 3.5}}, "features", "dim"),
        ({"algorithm": "pa", "features": {"kind": "tfidf", "dim": 3}}, "features", "kind"),
        ({"algorithm": "pa", "features": {"kind": "hashed", "bits": 40}}, "features", "bits"),
        ({"algorithm": "pa", "features": {"kind": "sparse", "dim": 1 << 21}}, "features", "limit"),
        ({"algorithm": "pa"}, "features", "features"),
        ({**dense_model(3), "extra": 1}, "extra", "unknown"),
    ],
)  # fmt: skip
def test_create_rejects_bad_bodies(
    client: httpx.Client, body: dict, field: str, words: str
) -> None:
    r = client.put("/models/m-bad", json=body)
    assert r.status_code == 422, r.text
    d = err(r)
    assert d["error"] == "invalid_input" and d["field"] == field and words in d["message"]
    assert client.get("/models/m-bad").status_code == 404


@pytest.mark.parametrize("name", ["a" * 65, "bad name", "é", "semi;colon", "x!y", "a+b"])
def test_bad_names(client: httpx.Client, name: str) -> None:
    r = client.put(f"/models/{name}", json=dense_model())
    assert r.status_code == 422 and err(r)["field"] == "name", r.text


def test_name_charset_limits(client: httpx.Client) -> None:
    name = "A.b_c-9" + "z" * 57  # 64 characters
    assert client.put(f"/models/{name}", json=dense_model()).status_code == 201
    assert client.get(f"/models/{name}").status_code == 200


def test_create_rejects_non_json(client: httpx.Client) -> None:
    r = client.put(
        "/models/m-json", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "not valid JSON" in err(r)["message"]
    r = client.put("/models/m-json", json=[1, 2])
    assert r.status_code == 422 and "object" in err(r)["message"]


def test_unknown_route_and_method_use_the_error_shape(client: httpx.Client) -> None:
    r = client.get("/nope")
    assert r.status_code == 404 and err(r)["error"] == "not_found"
    r = client.patch("/models/x", json={})
    assert r.status_code == 405 and err(r)["error"] == "method_not_allowed"


def test_openapi_documents_every_body_with_an_example(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    comps = spec["components"]["schemas"]
    for route, method, model in [
        ("/models/{name}", "put", "ModelCreate"),
        ("/update", "post", "UpdateRequest"),
        ("/predict", "post", "PredictRequest"),
        ("/models/{name}/active", "put", "ActivateRequest"),
    ]:
        ref = spec["paths"][route][method]["requestBody"]["content"]["application/json"]["schema"]
        assert ref == {"$ref": f"#/components/schemas/{model}"}
        assert comps[model]["examples"], model
    for name in ("UpdateResponse", "PredictResponse", "ErrorBody"):
        assert comps[name]["examples"], name
    art = spec["paths"]["/models/{name}/artifact"]["put"]["requestBody"]["content"]
    assert "application/octet-stream" in art
    assert client.get("/docs").status_code == 200
