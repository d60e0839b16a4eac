"""The scope ``/openapi.json`` documents for each operation is the scope the server
enforces (issue #20, defect 5: ``POST /models/{name}/update`` and ``/predict`` were
documented as ``admin``; the server asks ``update`` and ``predict``).

Every documented operation is probed over real HTTP with no key and with keys holding
exactly one scope each. The enforced scope is the one key whose request gets past
authorization (neither 401 nor 403); an operation that needs none answers without a key.
The probes name a model that does not exist and send no body, so a request that gets
past authorization changes nothing (404, 415 or 422).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread

SCOPES = ("predict", "update", "admin")
KEYS = {f"only-{s}": [s] for s in SCOPES}
ABSENT = "scope-probe-absent"


@pytest.fixture(scope="module", params=[True, False], ids=["metrics-public", "metrics-private"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("scopes")
    settings = Settings(data_dir=str(data_dir), api_keys=KEYS, metrics_public=request.param)
    with ServerThread(settings) as srv:
        yield srv.url


def _status(url: str, method: str, path: str, key: str | None) -> int:
    headers = {} if key is None else {"X-API-Key": key}
    return httpx.request(method, url + path, headers=headers, timeout=30).status_code


def enforced_scope(url: str, method: str, path: str) -> str | None:
    """None when no key is needed, else the one scope whose key is let through."""
    if _status(url, method, path, None) not in (401, 403):
        return None
    passing = [s for s in SCOPES if _status(url, method, path, f"only-{s}") not in (401, 403)]
    assert len(passing) == 1, (method, path, passing)
    return passing[0]


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method, op in item.items():
            yield method, path, op


def test_documented_scope_is_the_enforced_scope(server: str) -> None:
    spec = httpx.get(f"{server}/openapi.json", timeout=30).json()
    both: list[dict[str, list[str]]] = [{"bearerAuth": []}, {"apiKeyHeader": []}]
    checked, wrong = 0, []
    for method, path, op in operations(spec):
        concrete = path.replace("{name}", ABSENT).replace("{version}", "1")
        enforced = enforced_scope(server, method, concrete)
        documented = op.get("x-required-scope")
        if documented != enforced:
            wrong.append(f"{method.upper()} {path}: documented {documented}, enforced {enforced}")
        assert op["security"] == (both if enforced else []), (method, path)
        checked += 1
    assert not wrong, "\n".join(wrong)
    assert checked >= 29  # every operation of the document (29 today) was probed


def test_by_path_routes_ask_update_and_predict(server: str) -> None:
    spec = httpx.get(f"{server}/openapi.json", timeout=30).json()
    paths = spec["paths"]
    assert paths["/models/{name}/update"]["post"]["x-required-scope"] == "update"
    assert paths["/models/{name}/predict"]["post"]["x-required-scope"] == "predict"
