"""Protocol hygiene: content types, UTF-8 only, reserved names, misplaced feature
fields and the body timeout (issue #10, "contract and protocol hygiene").

Both stacks are asked (the hot plain-ASGI routes and FastAPI's, see
``test_api_hot.both_stacks``); the body timeout is tried on a real socket.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.service.serving import ServerThread, dense_model
from tests.service.test_api_hot import both_stacks

ONE = b'{"model": "m", "examples": [{"x": [1, 2, 3], "y": "a"}]}'
PREDICT = b'{"model": "m", "instances": [{"x": [1.0, 2.0, 3.0]}]}'
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data_dir: Path = tmp_path_factory.mktemp("protocol")
    app = create_app(Settings(data_dir=str(data_dir)))
    with TestClient(both_stacks(app)) as c:
        deadline = time.monotonic() + 60
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "service never became ready"
            time.sleep(0.05)
        assert c.put("/models/m", json=dense_model(3)).status_code == 201
        yield c


def version(c: TestClient) -> int:
    v: int = c.get("/models/m").json()["version"]
    return v


def detail(r: Any) -> dict[str, Any]:
    d: dict[str, Any] = r.json()["detail"]
    return d


NOT_JSON = [
    None,  # no Content-Type at all: what fetch() sends for a Blob without a type
    "text/plain",  # a CORS "simple request": no preflight
    "text/plain; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "application/json; charset=utf-16",
]


@pytest.mark.parametrize("ctype", NOT_JSON)
@pytest.mark.parametrize("path", ["/update", "/plain/update", "/predict", "/plain/predict"])
def test_hot_routes_refuse_other_content_types_with_415(
    client: TestClient, path: str, ctype: str | None
) -> None:
    v0 = version(client)
    headers = {} if ctype is None else {"content-type": ctype}
    body = ONE if path.endswith("update") else PREDICT
    r = client.post(path, content=body, headers=headers)
    assert r.status_code == 415, r.text
    d = detail(r)
    assert d["error"] == "unsupported_media_type" and d["field"] == "Content-Type"
    assert "application/json" in d["message"]
    assert version(client) == v0  # nothing learned


@pytest.mark.parametrize(
    "ctype",
    ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"],
)
def test_json_with_parameters_is_accepted(client: TestClient, ctype: str) -> None:
    for path in ("/update", "/plain/update"):
        r = client.post(path, content=ONE, headers={"content-type": ctype})
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("ctype", [None, "text/plain"])
def test_fastapi_json_routes_refuse_other_content_types(
    client: TestClient, ctype: str | None
) -> None:
    headers = {} if ctype is None else {"content-type": ctype}
    body = json.dumps(dense_model(3)).encode()
    r = client.put("/models/other", content=body, headers=headers)
    assert r.status_code == 415, r.text
    assert detail(r)["field"] == "Content-Type"
    assert client.get("/models/other").status_code == 404  # not created
    r = client.put("/models/m/active", content=b'{"version": 1}', headers=headers)
    assert r.status_code == 415, r.text


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/json"])
def test_artifact_upload_takes_octet_stream_only(client: TestClient, ctype: str | None) -> None:
    headers = {} if ctype is None else {"content-type": ctype}
    r = client.put("/models/art/artifact", content=b"LSCK not an artifact", headers=headers)
    assert r.status_code == 415, r.text
    assert "application/octet-stream" in detail(r)["message"]
    r = client.put(
        "/models/art/artifact",
        content=b"LSCK not an artifact",
        headers={"content-type": "application/octet-stream"},
    )
    assert r.status_code == 422 and detail(r)["field"] == "artifact", r.text  # read as before


def _encodings() -> list[bytes]:
    text = ONE.decode()
    return [
        b"\xef\xbb\xbf" + ONE,  # UTF-8 with a BOM
        text.encode("utf-16"),  # with a BOM
        text.encode("utf-16-le"),
        text.encode("utf-16-be"),
        text.encode("utf-32"),
        text.encode("utf-32-le"),
    ]


@pytest.mark.parametrize("raw", _encodings())
@pytest.mark.parametrize("path", ["/update", "/plain/update", "/predict", "/plain/predict"])
def test_only_utf8_bodies_without_bom(client: TestClient, path: str, raw: bytes) -> None:
    v0 = version(client)
    r = client.post(path, content=raw, headers=JSON)
    assert r.status_code == 422, r.text
    assert detail(r)["field"] == "body"
    assert version(client) == v0


def test_put_model_refuses_a_utf16_body(client: TestClient) -> None:
    raw = json.dumps(dense_model(3)).encode("utf-16")
    r = client.put("/models/u16", content=raw, headers=JSON)
    assert r.status_code == 422 and detail(r)["field"] == "body", r.text


def test_invalid_utf8_inside_a_string_is_refused(client: TestClient) -> None:
    raw = b'{"model": "m", "examples": [{"x": {"a\xff": 1}, "y": "a"}]}'
    r = client.post("/plain/update", content=raw, headers=JSON)
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_reserved(client: TestClient, name: str) -> None:
    # "%2E" keeps the client from normalising the segment away (as it would "/models/..").
    quoted = name.replace(".", "%2E")
    r = client.put(f"/models/{quoted}", json=dense_model(3))
    assert r.status_code == 422, r.text
    assert detail(r)["field"] == "name" and "reserved" in detail(r)["message"]


def test_dot_names_are_refused_by_the_stores() -> None:
    from service.store.base import validate_name

    for name in (".", ".."):
        with pytest.raises(ValueError, match="reserved"):
            validate_name(name)
    assert validate_name("...") == "..."  # only the two path segments


@pytest.mark.parametrize(
    ("features", "field"),
    [
        ({"kind": "dense", "dim": 4, "bits": 3}, "features.bits"),
        ({"kind": "sparse", "dim": 4, "bits": 3}, "features.bits"),
        ({"kind": "hashed", "bits": 20, "dim": 5}, "features.dim"),
    ],
)
def test_feature_fields_of_another_kind_are_refused(
    client: TestClient, features: dict[str, Any], field: str
) -> None:
    body = {"algorithm": "arow", "features": features}
    r = client.put("/models/misfit", json=body)
    assert r.status_code == 422, r.text
    assert detail(r)["field"] == field
    ranker = {"algorithm": "ranksvm", "features": features}
    r = client.put("/models/misfit", json=ranker)
    assert r.status_code == 422 and detail(r)["field"] == field, r.text
    assert client.get("/models/misfit").status_code == 404


# ---------------------------------------------------------------- body timeout


def _send_then_stall(port: int, request: bytes) -> tuple[bytes, float]:
    """Send ``request`` (headers and part of a body), then nothing; return the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request)
        t0 = time.monotonic()
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:  # the server closed the connection
                break
            chunks.append(chunk)
        return b"".join(chunks), time.monotonic() - t0


def _head(path: str, length: int, ctype: str = "application/json") -> bytes:
    return (
        f"{path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    "start",
    ["POST /update", "POST /predict", "PUT /models/slow"],
)
def test_a_stalled_body_is_408_and_the_connection_closed(tmp_path: Path, start: str) -> None:
    settings = Settings(data_dir=str(tmp_path), body_timeout_seconds=0.5)
    with ServerThread(settings) as srv:
        # Headers announce 1000 bytes; 20 arrive, then the client goes quiet.
        answer, _ = _send_then_stall(srv.port, _head(start, 1000) + ONE[:20])
        status_line, _, rest = answer.partition(b"\r\n")
        assert b" 408 " in status_line, answer
        body = json.loads(rest.partition(b"\r\n\r\n")[2])
        assert body["detail"]["error"] == "request_timeout"
        assert body["detail"]["field"] == "body"
        with srv.client() as c:
            assert c.get("/models/slow").status_code == 404  # nothing created


def test_a_trickled_body_is_408(tmp_path: Path) -> None:
    """A byte every 0.1 s keeps the connection busy, but the whole body has a deadline."""
    settings = Settings(data_dir=str(tmp_path), body_timeout_seconds=0.5)
    with ServerThread(settings) as srv, srv.client() as c:
        assert c.put("/models/m", json=dense_model(3)).status_code == 201
        with socket.create_connection(("127.0.0.1", srv.port), timeout=20) as s:
            s.sendall(_head("POST /update", len(ONE)))
            answer = b""
            for byte in ONE:
                try:
                    s.sendall(bytes([byte]))
                except OSError:  # closed by the server after its answer
                    break
                s.settimeout(0.1)
                try:
                    answer += s.recv(65536)
                except TimeoutError:
                    continue
                if answer:
                    break
            s.settimeout(20)
            while b"\r\n\r\n" not in answer:
                more = s.recv(65536)
                if not more:
                    break
                answer += more
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert c.get("/models/m").json()["version"] == 0  # nothing learned


def test_a_body_within_the_timeout_is_served(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), body_timeout_seconds=5.0)
    with ServerThread(settings) as srv, srv.client() as c:
        assert c.put("/models/m", json=dense_model(3)).status_code == 201
        r = c.post("/update", content=ONE, headers=JSON)
        assert r.status_code == 200, r.text


def test_body_timeout_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEARNSERVE_BODY_TIMEOUT_SECONDS", "2.5")
    assert Settings().body_timeout_seconds == 2.5
    assert Settings.model_fields["body_timeout_seconds"].default == 30.0


@pytest.mark.parametrize("k", ["5", 0, 101, None, 2.5])
def test_k_is_checked_for_every_model(client: TestClient, k: Any) -> None:
    """Documented for /predict (FastXML reads it): a bad one is refused on any model."""
    # (m must have learned a label for the good k to answer: this test may run first)
    assert client.post("/update", content=ONE, headers=JSON).status_code == 200
    body = {"model": "m", "instances": [{"x": [1.0, 2.0, 3.0]}], "k": k}
    for path in ("/predict", "/plain/predict"):
        r = client.post(path, json=body)
        assert r.status_code == 422 and detail(r)["field"] == "k", r.text
    r = client.post("/predict", json={**body, "k": 3})
    assert r.status_code == 200, r.text
