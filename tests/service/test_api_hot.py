"""The plain-ASGI hot routes (service/api/hot.py) answer exactly as FastAPI's routes do.

One app, served in-process; requests under ``/plain/...`` go through FastAPI's own
stack (routes in service/api/learn.py), the others through the hot layer. Every
case — success, each error, a bug — must give the same status, body and headers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from service.api.hot import route_path
from service.app import create_app
from service.settings import Settings
from tests.service.serving import dense_model

KEYS = {"all": ["predict", "update", "admin"], "reader": ["predict"]}
ALL = {"X-API-Key": "all", "content-type": "application/json"}


def both_stacks(app: FastAPI) -> Any:
    plain = FastAPI.build_middleware_stack(app)

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/plain/"):
            scope = dict(scope, path=scope["path"][len("/plain") :], app=app)
            await plain(scope, receive, send)
        else:
            await app(scope, receive, send)

    return asgi


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir: Path = tmp_path_factory.mktemp("hot")
    app = create_app(Settings(data_dir=str(data_dir), api_keys=KEYS, max_body_bytes=4096))
    # The plain stack re-raises a bug after answering 500 (as under uvicorn): no re-raise here.
    with TestClient(both_stacks(app), raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 60
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "service never became ready"
            time.sleep(0.05)
        assert c.put("/models/m", json=dense_model(3), headers=ALL).status_code == 201
        examples = [{"x": [1.0, 0.0, 2.0], "y": "a"}, {"x": [0.0, 1.0, -1.0], "y": 7}]
        r = c.post("/update", json={"model": "m", "examples": examples}, headers=ALL)
        assert r.status_code == 200, r.text
        c.app_under_test = app
        yield c


def post_both(c: TestClient, path: str, content: bytes, headers: dict[str, str]) -> tuple[Any, Any]:
    hot = c.post(path, content=content, headers=headers)
    plain = c.post("/plain" + path, content=content, headers=headers)
    return hot, plain


def same(hot: Any, plain: Any) -> None:
    assert hot.status_code == plain.status_code, (hot.text, plain.text)
    assert hot.json() == plain.json()
    for h in ("content-type", "retry-after", "www-authenticate"):
        assert hot.headers.get(h) == plain.headers.get(h), h


ONE = b'{"model": "m", "examples": [{"x": [1, 2, 3], "y": "a"}]}'
V2 = b'{"id": "q", "inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP64", "data": [1, 2, 3]}]}'  # noqa: E501
PREDICT = json.dumps({"model": "m", "instances": [{"x": [1.0, 2.0, 3.0]}]}).encode()

CASES = [
    ("/predict", PREDICT, ALL, 200),
    ("/predict", PREDICT, {}, 401),
    ("/predict", PREDICT, {"X-API-Key": "nope"}, 401),
    ("/update", ONE, {"X-API-Key": "reader"}, 403),
    ("/predict", b"{not json", ALL, 422),
    ("/predict", b"", ALL, 422),
    ("/predict", b"[1, 2]", ALL, 422),
    ("/predict", b'{"model": "ghost", "instances": [{"x": [1, 2, 3]}]}', ALL, 404),
    ("/predict", b'{"model": "m", "instances": [{"x": [1, NaN, 3]}]}', ALL, 422),
    ("/predict", b'{"model": "m", "instances": [{"x": [1, 2]}]}', ALL, 422),
    ("/predict", b'{"model": "m", "instances": []}', ALL, 422),
    ("/predict", b'{"model": "m", "instances": [{"x": [1, 2, 3]}], "min_version": 99}', ALL, 422),
    ("/update", b'{"model": "m", "examples": [{"x": [1, 2, 3]}]}', ALL, 422),
    ("/update", b'{"model": "m", "examples": [{"x": [1, 2, 3], "y": 1.5}]}', ALL, 422),
    ("/update", ONE + b" " * 5000, ALL, 413),
    # the Open Inference Protocol's infer (service.api.v2_infer), its own error body
    ("/v2/models/m/infer", V2, ALL, 200),
    ("/v2/models/m/infer", V2, {}, 401),
    ("/v2/models/m/versions/1/infer", V2, {"X-API-Key": "reader"}, 200),
    ("/v2/models/m/versions/99/infer", V2, ALL, 404),
    ("/v2/models/ghost/infer", V2, ALL, 404),
    ("/v2/models/m/infer", b"{not json", ALL, 400),
    ("/v2/models/m/infer", V2.replace(b"[1, 3]", b"[1, 2]"), ALL, 400),
    ("/v2/models/m/infer", V2 + b" " * 5000, ALL, 413),
    ("/v2/models/m/infer", V2, {"X-API-Key": "all", "content-type": "text/plain"}, 415),
]  # fmt: skip


@pytest.mark.parametrize(("path", "content", "headers", "status"), CASES)
def test_hot_route_answers_like_the_fastapi_route(
    client: TestClient, path: str, content: bytes, headers: dict[str, str], status: int
) -> None:
    before = client.get("/models/m", headers=ALL).json()
    hot, plain = post_both(client, path, content, headers)
    assert hot.status_code == status, hot.text
    same(hot, plain)
    if status != 200:
        after = client.get("/models/m", headers=ALL).json()
        assert after["version"] == before["version"]  # a refused request changes nothing
        assert after["state_digest"] == before["state_digest"]


def test_update_through_both_routes_learns_once_each(client: TestClient) -> None:
    body = b'{"model": "m", "examples": [{"x": [0.5, 0.5, 0.5], "y": "a"}]}'
    v0 = client.get("/models/m", headers=ALL).json()["version"]
    hot, plain = post_both(client, "/update", body, ALL)
    assert (hot.status_code, plain.status_code) == (200, 200)
    for r, v in ((hot, v0 + 1), (plain, v0 + 2)):
        answer = r.json()
        assert answer.pop("correct") in (0, 1)
        assert answer == {"model": "m", "applied": 1, "version": v}


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        yield b'{"model": "m", "examples": ['
        for _ in range(200):
            yield b'{"x": [1, 2, 3], "y": "a"},'

    r = client.post("/update", content=chunks(), headers=ALL)
    assert r.status_code == 413
    assert r.json()["detail"]["error"] == "too_large"


def test_other_methods_and_paths_fall_through_to_fastapi(client: TestClient) -> None:
    assert client.get("/predict", headers=ALL).status_code == 405
    assert client.post("/predict/extra", headers=ALL).status_code == 404


def test_a_bug_is_a_500_with_the_error_body_and_the_service_goes_on(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = client.app_under_test.state.engine.models["m"].adapter

    def broken(*args: Any) -> Any:
        raise RuntimeError("injected bug")

    monkeypatch.setattr(adapter, "predict", broken)
    monkeypatch.setattr(adapter, "predict_raw", broken)  # (the compiled path of dense rows)
    hot, plain = post_both(client, "/predict", PREDICT, ALL)
    assert hot.status_code == 500
    same(hot, plain)
    assert hot.json()["detail"]["error"] == "internal_error"
    assert "injected bug" in caplog.text  # logged with the traceback
    monkeypatch.undo()
    assert client.post("/predict", content=PREDICT, headers=ALL).status_code == 200


def test_metrics_count_hot_routes_per_model(client: TestClient) -> None:
    client.post("/predict", content=PREDICT, headers=ALL)
    text = client.get("/metrics", headers=ALL).text
    assert 'learnserve_requests_total{model="m",route="/predict",status="200"}' in text
    assert 'learnserve_requests_total{model="",route="/predict",status="401"}' in text


def test_repeated_headers_read_as_starlette_does(client: TestClient) -> None:
    """The first of repeated headers counts, on both stacks alike."""
    for headers in ([("X-API-Key", "all"), ("X-API-Key", "nope")],
                    [("X-API-Key", "nope"), ("X-API-Key", "all")]):  # fmt: skip
        hot = client.post("/predict", content=PREDICT, headers=headers)
        plain = client.post("/plain/predict", content=PREDICT, headers=headers)
        same(hot, plain)


def test_route_path_strips_the_root_path() -> None:
    assert route_path({"path": "/api/predict", "root_path": "/api"}) == "/predict"
    assert route_path({"path": "/predict", "root_path": ""}) == "/predict"
    assert route_path({"path": "/apix/predict", "root_path": "/api"}) == "/apix/predict"
    assert route_path({"path": "/predict"}) == "/predict"


def test_a_client_that_leaves_is_counted_499_not_500(client: TestClient) -> None:
    app = client.app_under_test
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/predict", "raw_path": b"/predict",
            "root_path": "", "query_string": b"", "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
            "headers": [(b"x-api-key", b"all"), (b"content-type", b"application/json")],
        }  # fmt: skip
        await app(scope, receive, send)

    client.portal.call(run)  # type: ignore[union-attr]
    assert sent == []  # nothing answered to nobody
    text = client.get("/metrics", headers=ALL).text
    assert 'learnserve_requests_total{model="",route="/predict",status="499"}' in text
