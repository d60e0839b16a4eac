"""``POST /models/{name}/update`` and ``/models/{name}/predict``: the model from the
path, the same bodies, answered alike by the hot ASGI layer and FastAPI's routes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.service.serving import dense_model
from tests.service.test_api_hot import both_stacks

EXAMPLES = [{"x": [1.0, 0.0, 0.5], "y": "a"}, {"x": [-1.0, 0.2, 0.0], "y": "b"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir: Path = tmp_path_factory.mktemp("paths")
    app = create_app(Settings(data_dir=str(data_dir)))
    with TestClient(both_stacks(app), raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 120
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "service never became ready"
            time.sleep(0.05)
        assert c.put("/models/m", json=dense_model(3)).status_code == 201
        assert c.put("/models/other", json=dense_model(3)).status_code == 201
        yield c


@pytest.mark.parametrize("prefix", ["", "/plain"])
def test_update_and_predict_by_path(client: TestClient, prefix: str) -> None:
    before = client.get("/models/m").json()["version"]
    # No "model" in the body, and the same name repeated: both are the path's model.
    r = client.post(f"{prefix}/models/m/update", json={"examples": EXAMPLES})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer.pop("correct") in (0, 1, 2)  # examples predicted right before learning
    assert answer == {"model": "m", "applied": 2, "version": before + 1}
    r = client.post(f"{prefix}/models/m/update", json={"model": "m", "examples": EXAMPLES})
    assert r.status_code == 200 and r.json()["version"] == before + 2, r.text
    assert client.get("/models/other").json()["version"] == 0  # nothing went elsewhere
    r = client.post(f"{prefix}/models/m/predict", json={"instances": [{"x": [1.0, 0.0, 0.5]}]})
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "m" and r.json()["version"] == before + 2
    assert r.json()["predictions"][0]["label"] == "a"


@pytest.mark.parametrize("prefix", ["", "/plain"])
@pytest.mark.parametrize("action", ["update", "predict"])
def test_a_body_model_that_differs_is_422(client: TestClient, prefix: str, action: str) -> None:
    version = client.get("/models/m").json()["version"]
    # (each action's own member only: another one is refused as unknown, naming it)
    rows = {"update": {"examples": EXAMPLES}, "predict": {"instances": [{"x": [1.0, 0, 0]}]}}
    body = {"model": "other", **rows[action]}
    r = client.post(f"{prefix}/models/m/{action}", json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail["field"] == "model" and "'other'" in detail["message"], detail
    assert client.get("/models/m").json()["version"] == version  # nothing learned
    assert client.get("/models/other").json()["version"] == 0


def test_unknown_model_and_paths(client: TestClient) -> None:
    r = client.post("/models/ghost/predict", json={"instances": [{"x": [1.0, 0, 0]}]})
    assert r.status_code == 404 and r.json()["detail"]["field"] == "model"
    assert client.post("/models/m/unknown", json={}).status_code in (404, 405)
    assert client.post("/models/m/update/extra", json={}).status_code in (404, 405)
    assert client.get("/models/m/predict").status_code in (404, 405)


def test_openapi_documents_both_paths(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for action in ("update", "predict"):
        op = paths[f"/models/{{name}}/{action}"]["post"]
        assert "requestBody" in op and "path" in op["description"]
        assert any(p["name"] == "name" and p["in"] == "path" for p in op["parameters"])
