"""A LightGBM model imported with ``learnserve import lightgbm`` and deployed over real HTTP:
``/predict`` answers ``Booster.predict(raw_score=True)`` (and, for binary, the
probability ``Booster.predict`` gives); a malformed model text is refused by the CLI
(exit 2, line and field named) before any service is involved."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from learners.io.svmlight import read_svmlight
from service.settings import Settings
from tests.conftest import require_data
from tests.service.serving import ServerThread

lgb = pytest.importorskip("lightgbm")
sp = pytest.importorskip("scipy.sparse")

REPO = Path(__file__).resolve().parents[2]


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip


def put(c: httpx.Client, name: str, blob: bytes) -> httpx.Response:
    return c.put(
        f"/models/{name}/artifact",
        content=blob,
        headers={"content-type": "application/octet-stream"},
    )


def predictions(c: httpx.Client, name: str, xs: list[Any]) -> list[dict[str, Any]]:
    r = c.post("/predict", json={"model": name, "instances": [{"x": x} for x in xs]})
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["predictions"]
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory):
    s = Settings(data_dir=str(tmp_path_factory.mktemp("lgb-api")), catalog_poll_seconds=0.05)
    with ServerThread(s) as srv, srv.client() as c:
        yield c


def test_binary_a9a_imported_by_the_cli_and_served(client, tmp_path):
    path = require_data("a9a", "a9a")
    tr, te = read_svmlight(path), read_svmlight(path.with_name("a9a.t"))
    dim = max(tr.X.dim, te.X.dim)

    def csr(X: Any) -> Any:
        return sp.csr_matrix((X.values, X.indices, X.indptr), shape=(X.n_rows, dim))

    b = lgb.train(
        {"objective": "binary", "verbose": -1, "num_threads": 1},
        lgb.Dataset(csr(tr.X)[:6000], (tr.y[:6000] > 0).astype(int)), 40,
    )  # fmt: skip
    model_txt, art = tmp_path / "a9a.txt", tmp_path / "a9a.lsart"
    b.save_model(str(model_txt))
    r = cli("import", "lightgbm", model_txt, "-o", art)
    assert r.returncode == 0, r.stderr
    assert "40 trees" in r.stderr and "binary" in r.stderr

    assert put(client, "a9a", art.read_bytes()).status_code == 201
    info = client.get("/models/a9a").json()
    assert info["objective"] == "binary" and info["n_features"] == dim and info["index_base"] == 0
    rows = te.X.take(np.arange(300))
    # sparse keys are LightGBM's column numbers (0-based)
    xs = [{str(j): v for j, v in zip(*rows.row(i), strict=True)} for i in range(300)]
    got = predictions(client, "a9a", xs)
    raw = b.predict(csr(rows), raw_score=True)
    prob = b.predict(csr(rows))
    assert np.max(np.abs(np.array([p["score"] for p in got]) - raw)) <= 1e-9
    assert np.max(np.abs(np.array([p["probability"] for p in got]) - prob)) <= 1e-12
    # the Open Inference Protocol (dense rows) answers the same score and probability
    Xd = np.zeros((300, dim))
    Xd[:, : rows.dim] = rows.to_dense()
    x = {"name": "x", "shape": [300, dim], "datatype": "FP64", "data": Xd.ravel().tolist()}
    r = client.post("/v2/models/a9a/infer", json={"inputs": [x]})
    assert r.status_code == 200, r.text
    outs = {o["name"]: o["data"] for o in r.json()["outputs"]}
    assert outs["score"] == [p["score"] for p in got]
    assert outs["probability"] == [p["probability"] for p in got]


def test_regression_served_dense(client):
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    b = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 8},
                  lgb.Dataset(X[:300], y[:300]), 30)  # fmt: skip
    from learners.ranking.lightgbm_import import from_lightgbm_text

    assert put(client, "diabetes", from_lightgbm_text(b.model_to_string()).to_bytes()).is_success
    got = predictions(client, "diabetes", X[300:].tolist())
    assert "probability" not in got[0]  # only binary models have one
    ref = b.predict(X[300:], raw_score=True)
    assert np.max(np.abs(np.array([p["score"] for p in got]) - ref)) <= 1e-9


def test_malformed_model_text_is_refused_by_the_cli(tmp_path):
    X = np.random.default_rng(0).normal(size=(200, 3))
    text = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 4},
                     lgb.Dataset(X, X[:, 0]), 2).model_to_string()  # fmt: skip
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("leaf_value="))
    lines[i] = "leaf_value=0.1 zero 0.3 0.4"
    bad, out = tmp_path / "bad.txt", tmp_path / "bad.lsart"
    bad.write_text("\n".join(lines))
    r = cli("import", "lightgbm", bad, "-o", out)
    assert r.returncode == 2
    msg = " ".join(re.sub("[│╭╮╰╯─]", " ", r.stderr).split())  # rich's box, unwrapped
    assert f"line {i + 1}" in msg and "Tree=0 leaf_value" in msg and "'zero'" in msg
    assert not out.exists()
    r = cli("import", "lightgbm", tmp_path / "absent.txt", "-o", out)
    assert r.returncode == 2 and "cannot read" in r.stderr
