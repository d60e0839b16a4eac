"""One Content-Type rule for every route that reads JSON (issue #20, defect 11): a
``charset`` parameter, if any, must be ``utf-8``, else 415 naming ``Content-Type``. The
v2 ``infer`` route accepted ``charset=latin-1`` while ``/update`` refused it.

Every operation of ``/openapi.json`` whose body may be JSON is sent ``{}`` with each
charset (the model named does not exist: nothing is created or learned).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread

KEY = {"X-API-Key": "charset-key"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("charset")
    settings = Settings(
        data_dir=str(data_dir), api_keys={"charset-key": ["predict", "update", "admin"]}
    )
    with ServerThread(settings) as srv:
        yield srv.url


def json_operations(url: str) -> list[tuple[str, str, list[str]]]:
    spec: dict[str, Any] = httpx.get(f"{url}/openapi.json", timeout=30).json()
    out = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            content = op.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                concrete = path.replace("{name}", "charset-absent").replace("{version}", "1")
                out.append((method.upper(), concrete, list(content)))
    return out


def send(url: str, method: str, path: str, ctype: str) -> httpx.Response:
    headers = {**KEY, "Content-Type": ctype}
    return httpx.request(method, url + path, content=b"{}", headers=headers, timeout=30)


def field_of(r: httpx.Response) -> str | None:
    body = r.json()
    field: str | None = (body.get("detail") or body).get("field")
    return field


@pytest.mark.parametrize("charset", ["latin-1", "iso-8859-1", "utf-16", '"windows-1252"'])
def test_every_json_route_refuses_a_charset_other_than_utf8(url: str, charset: str) -> None:
    ops = json_operations(url)
    paths = {p for _, p, _ in ops}
    assert {"/update", "/predict", "/models/charset-absent/update"} <= paths
    assert "/v2/models/charset-absent/infer" in paths and len(ops) >= 8
    for method, path, types in ops:
        for media in types:  # the v2 infer's octet-stream carries a JSON header too
            if media == "application/octet-stream" and not path.startswith("/v2"):
                continue  # an artifact: bytes, no charset to speak of
            r = send(url, method, path, f"{media}; charset={charset}")
            assert r.status_code == 415, (method, path, media, r.status_code, r.text)
            assert field_of(r) == "Content-Type" and "UTF-8" in r.text, (method, path)


@pytest.mark.parametrize("charset", ["utf-8", "UTF-8", '"utf-8"', "utf8"])
def test_every_json_route_reads_utf8(url: str, charset: str) -> None:
    for method, path, _ in json_operations(url):
        r = send(url, method, path, f"application/json; charset={charset}")
        assert r.status_code != 415, (method, path, r.text)
