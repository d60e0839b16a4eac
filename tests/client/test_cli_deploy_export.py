"""``learnserve deploy`` and ``learnserve export`` against the real service, through
:class:`service.client.Client`: the same output and exit codes as when they called httpx
themselves, and now the client's retries (a starting service is waited for) and its
rules (a deploy is not sent twice when the service may have acted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
from typer.testing import CliRunner

from learners.ranking.lambdamart import LambdaMART
from learners.registry import load_model
from service.cli.main import app
from service.cli.service_options import server_message
from service.client import Client
from service.client._core import error_of
from tests.client.conftest import LossyProxy


def cli(*args: Any, code: int = 0) -> Any:
    r = CliRunner().invoke(app, [*map(str, args)], catch_exceptions=False)
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def ranker(path: Path, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    X = rng.random((60, 4))
    m = LambdaMART(n_estimators=2, min_data_in_leaf=5).fit(X, (X[:, 0] * 3).astype(int), [20] * 3)
    m.save(path)
    return path


def online_model(url: str, name: str) -> Any:
    with Client(url) as c:
        c.create_model(name, "arow", {"kind": "sparse", "dim": 3})
        c.update(name, [{"x": {"0": 1.0, "2": -0.5}, "y": "a"}, {"x": {"1": 1.0}, "y": "b"}])
        return c.describe(name)


def test_export_writes_the_state_and_prints_its_version(server, tmp_path: Path) -> None:
    info = online_model(server.url, "exp")
    out = tmp_path / "exp.lsrn"
    r = cli("export", "exp", "-o", out, "--url", server.url)
    answer = orjson.loads(r.stdout)
    assert answer == {
        "model": "exp",
        "version": info.version,
        "state_digest": info.state_digest,
        "size": out.stat().st_size,
        "file": str(out),
    }
    assert r.stderr == ""
    load_model(out.read_bytes())  # an artifact the library reads


def test_export_errors_name_the_url_and_the_service_error(server, tmp_path: Path) -> None:
    out = tmp_path / "none.lsrn"
    r = cli("export", "nope", "-o", out, "--url", server.url + "/", code=1)
    prefix = f"error: HTTP 404 from {server.url}/models/nope/state: model_not_found: "
    assert r.stderr.startswith(prefix) and r.stderr.endswith(" (model)\n"), r.stderr
    assert not out.exists()
    # a batch model has no online state: the service's 409, as it said it
    cli("deploy", ranker(tmp_path / "r.lsart"), "--name", "batch-exp", "--url", server.url)
    r = cli("export", "batch-exp", "-o", out, "--url", server.url, code=1)
    assert r.stderr.startswith(
        f"error: HTTP 409 from {server.url}/models/batch-exp/state: not_online: "
    ), r.stderr


def test_deploy_prints_the_service_answer(server, tmp_path: Path) -> None:
    path = ranker(tmp_path / "ranker.lsart")
    r = cli("deploy", path, "--name", "dep", "--url", server.url)
    first = orjson.loads(r.stdout)
    assert first["model"] == "dep" and first["stored"] and first["created"]
    assert r.stderr == f"deployed lambdamart artifact ({path.stat().st_size} bytes) as 'dep'\n"
    r = cli("deploy", path, "--name", "dep", "--url", server.url)
    again = orjson.loads(r.stdout)
    assert again["version"] == first["version"] and not again["stored"]
    assert r.stderr == (
        f"'dep' already has this lambdamart artifact as version {first['version']}; it is active\n"
    )


def test_a_starting_service_is_waited_for_by_deploy_and_export(server, tmp_path: Path) -> None:
    """503 not_ready (refused before any route ran): both commands retry, as the client
    does, where calling httpx themselves they stopped at the first answer."""
    online_model(server.url, "slow-exp")
    path = ranker(tmp_path / "slow.lsart")
    with LossyProxy(server.url, busy_first=2, busy_error="not_ready") as proxy:
        r = cli("deploy", path, "--name", "slow-dep", "--url", proxy.url)
        assert orjson.loads(r.stdout)["model"] == "slow-dep"
        assert proxy.requests == ["PUT /models/slow-dep/artifact"] * 3
    with LossyProxy(server.url, busy_first=2) as proxy:  # any 503: a GET is retried
        r = cli("export", "slow-exp", "-o", tmp_path / "slow.lsrn", "--url", proxy.url)
        assert orjson.loads(r.stdout)["model"] == "slow-exp"
        assert proxy.requests == ["GET /models/slow-exp/state"] * 3


def test_a_deploy_the_service_may_have_acted_on_is_not_sent_again(server, tmp_path: Path) -> None:
    path = ranker(tmp_path / "once.lsart")
    with LossyProxy(server.url, busy_first=1) as proxy:  # a 503 other than not_ready
        r = cli("deploy", path, "--name", "once", "--url", proxy.url, code=1)
        assert proxy.requests == ["PUT /models/once/artifact"]
    assert r.stderr == (
        f"error: HTTP 503 from {proxy.url}/models/once/artifact: unavailable: upstream timed out\n"
    )


def test_server_message_is_what_deploy_and_export_printed_before() -> None:
    """The refusal as the commands printed it when they read httpx's answer themselves."""

    def message(status: int, **body: Any) -> str:
        return server_message(error_of(httpx.Response(status, **body)))

    detail = {"error": "forbidden", "message": "needs admin", "field": "authorization"}
    assert message(403, json={"detail": detail}) == "forbidden: needs admin (authorization)"
    assert message(404, json={"detail": {"message": "gone"}}) == "error: gone"
    assert message(409, json={"detail": {"error": "x", "message": "m", "field": ""}}) == "x: m"
    listed = [{"loc": ["body"], "msg": "field required"}]  # FastAPI's own 422 shape
    assert message(422, json={"detail": listed}) == orjson.dumps(listed).decode()
    assert message(400, json={"other": 1}) == '{"other":1}'
    assert message(400, json=["a"]) == '["a"]'
    assert message(502, text="  <html>bad gateway</html>\n") == "<html>bad gateway</html>"
    assert message(502, content=b"") == "Bad Gateway"
