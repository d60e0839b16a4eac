"""API keys and scopes over real HTTP; production refuses to start without keys."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError

from service.settings import Settings, parse_api_keys
from tests.service.serving import ServerThread, dense_model

KEYS = {
    "reader": ["predict"],
    "writer": ["predict", "update"],
    "root": ["predict", "update", "admin"],
}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("auth")), api_keys=KEYS)
    with ServerThread(settings) as srv:
        yield srv.url


def call(
    url: str,
    method: str,
    path: str,
    key: str | None,
    json: dict | None = None,
    header: str = "bearer",
) -> httpx.Response:
    headers = {}
    if key is not None:
        headers = {"Authorization": f"Bearer {key}"} if header == "bearer" else {"X-API-Key": key}
    return httpx.request(method, url + path, json=json, headers=headers, timeout=10)


def test_scopes(url: str) -> None:
    body = dense_model(2, "pa")
    assert call(url, "PUT", "/models/sec", None, body).status_code == 401
    r = call(url, "PUT", "/models/sec", "nope", body)
    assert r.status_code == 401 and r.json()["detail"]["message"] == "unknown API key"
    assert r.headers["www-authenticate"] == "Bearer"
    r = call(url, "PUT", "/models/sec", "writer", body)
    assert r.status_code == 403 and "admin" in r.json()["detail"]["message"]
    assert call(url, "PUT", "/models/sec", "root", body).status_code == 201

    upd = {"model": "sec", "examples": [{"x": [1, 0], "y": "a"}, {"x": [0, 1], "y": "b"}]}
    assert call(url, "POST", "/update", None, upd).status_code == 401
    assert call(url, "POST", "/update", "reader", upd).status_code == 403
    assert call(url, "POST", "/update", "writer", upd, header="x-api-key").status_code == 200

    pred = {"model": "sec", "instances": [{"x": [1, 0]}]}
    assert call(url, "POST", "/predict", None, pred).status_code == 401
    assert call(url, "POST", "/predict", "reader", pred).status_code == 200
    assert call(url, "GET", "/models", "reader").status_code == 200
    assert call(url, "GET", "/models/sec", None).status_code == 401
    assert call(url, "GET", "/models/sec", "reader", header="x-api-key").status_code == 200

    assert call(url, "DELETE", "/models/sec", "writer").status_code == 403
    assert call(url, "DELETE", "/models/sec", "root").status_code == 204


def test_open_routes(url: str) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert call(url, "GET", path, None).status_code == 200, path


def test_metrics_can_require_admin(tmp_path) -> None:
    settings = Settings(data_dir=str(tmp_path), api_keys=KEYS, metrics_public=False)
    with ServerThread(settings) as srv:
        assert call(srv.url, "GET", "/metrics", None).status_code == 401
        assert call(srv.url, "GET", "/metrics", "reader").status_code == 403
        assert call(srv.url, "GET", "/metrics", "root").status_code == 200


def test_key_formats() -> None:
    assert parse_api_keys("a=predict, b=predict+update+admin") == {
        "a": ["predict"],
        "b": ["predict", "update", "admin"],
    }
    assert parse_api_keys('{"k": ["update"]}') == {"k": ["update"]}
    assert parse_api_keys("") == {}
    for bad in ("a=root", "=predict", "novalue", '{"k": []}'):
        with pytest.raises(ValueError):
            parse_api_keys(bad)


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEARNSERVE_API_KEYS", '{"k1": ["predict"], "k2": ["predict", "admin"]}')
    monkeypatch.setenv("LEARNSERVE_MAX_BATCH_EXAMPLES", "7")
    monkeypatch.setenv("LEARNSERVE_REDIS_URL", "redis://h:1/0")
    s = Settings()
    assert s.api_keys["k2"] == ["predict", "admin"] and s.max_batch_examples == 7
    assert s.redis_url == "redis://h:1/0"
    monkeypatch.setenv("LEARNSERVE_API_KEYS", "k1=root")
    with pytest.raises(ValidationError, match="scopes"):
        Settings()


def test_production_needs_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="LEARNSERVE_API_KEYS"):
        Settings(environment="production")
    assert Settings(environment="production", allow_no_auth=True).auth_enabled is False
    assert Settings(environment="production", api_keys="k=admin").auth_enabled is True


def test_public_bind_without_keys_warns(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    from service.app import create_app

    with caplog.at_level("WARNING", logger="learnserve"):
        create_app(Settings(host="0.0.0.0", data_dir=str(tmp_path)))
    assert "WITHOUT API keys" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="learnserve"):
        create_app(Settings(host="127.0.0.1", data_dir=str(tmp_path)))
    assert "WITHOUT API keys" not in caplog.text


def test_cli_refuses_production_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from service.cli.main import app

    monkeypatch.delenv("LEARNSERVE_API_KEYS", raising=False)
    monkeypatch.delenv("LEARNSERVE_ALLOW_NO_AUTH", raising=False)
    # `serve` writes its options to os.environ (for uvicorn's worker processes):
    # registering them here makes monkeypatch restore them afterwards.
    for key in ("LEARNSERVE_PORT", "LEARNSERVE_LOG_LEVEL"):
        monkeypatch.setenv(key, "")
    r = CliRunner().invoke(
        app, ["serve", "--port", "1"], env={"LEARNSERVE_ENVIRONMENT": "production"}
    )
    assert r.exit_code == 2
    assert "LEARNSERVE_API_KEYS" in r.output


def test_decision_scopes(url: str) -> None:
    """rank needs predict, reward and a warm start update, the decision log admin."""
    body = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 8}}
    assert call(url, "PUT", "/models/sec-dec", "root", body).status_code == 201
    rank = {"actions": [{"id": "a"}, {"id": "b"}], "event_id": "e1"}
    assert call(url, "POST", "/models/sec-dec/rank", None, rank).status_code == 401
    assert call(url, "POST", "/models/sec-dec/rank", "reader", rank).status_code == 200
    reward = {"event_id": "e1", "reward": 1.0}
    assert call(url, "POST", "/models/sec-dec/reward", "reader", reward).status_code == 403
    assert call(url, "POST", "/models/sec-dec/reward", "writer", reward).status_code == 200
    assert call(url, "GET", "/models/sec-dec/decisions", "writer").status_code == 403
    assert call(url, "GET", "/models/sec-dec/decisions", "root").status_code == 200
    r = httpx.post(url + "/models/sec-dec/decisions", content=b"", timeout=10,
                   headers={"Authorization": "Bearer reader"})  # fmt: skip
    assert r.status_code == 403  # a warm start learns: update
