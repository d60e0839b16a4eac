"""`learnserve train lambdamart`, `learnserve evaluate` and `learnserve deploy` as subprocesses.

Deploy is tested against the real app (uvicorn on a free port, SQLite store in a
temp dir) and for its client-side refusals (corrupted file, unreachable server).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from learners.io.svmlight import read_svmlight
from learners.ranking.lambdamart import LambdaMART
from learners.ranking.ndcg import ndcg_at_k
from tests.conftest import require_data

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / ".venv" / "bin" / "learnserve"


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "service.cli"]
    return subprocess.run(
        [*exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def test_train_then_evaluate_matches_python_api(tmp_path):
    d = require_data("lightgbm-lambdarank")
    out = tmp_path / "ranker.lsart"
    r = _cli(
        "train", "lambdamart", "--train", d / "rank.train", "--train-query", d / "rank.train.query",
        "--valid", d / "rank.test", "--valid-query", d / "rank.test.query",
        "--trees", "8", "-o", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "8 trees" in r.stderr and "ndcg@10" in r.stderr
    r = _cli(
        "evaluate", out, "--test", d / "rank.test", "--test-query", d / "rank.test.query", "--json"
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert set(got) == {"ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10"}

    model = LambdaMART.load(out)
    assert model.meta_["index_base"] == 1 and model.n_trees_ == 8
    te = read_svmlight(d / "rank.test", query_file=d / "rank.test.query")
    s = model.predict(te.X)
    for k in (1, 3, 5, 10):
        assert got[f"ndcg@{k}"] == pytest.approx(ndcg_at_k(s, te.y, te.group_sizes, k), abs=1e-12)
    # the same training through the Python API gives the same model
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    ref = LambdaMART(
        n_estimators=8, min_data_in_leaf=50, min_sum_hessian_in_leaf=5.0,
        bagging_fraction=0.9, bagging_freq=1, seed=0,
    ).fit(tr.X, tr.y, tr.group_sizes)  # fmt: skip
    assert (ref.predict(te.X) == s).all()


def test_missing_query_information_is_a_clear_error(tmp_path):
    d = require_data("lightgbm-lambdarank")
    r = _cli("train", "lambdamart", "--train", d / "rank.train", "-o", tmp_path / "m")
    assert r.returncode == 2
    assert "no qid" in r.stderr and "--train-query" in r.stderr


def test_qid_files_and_early_stopping(tmp_path):
    lines = []
    for q in range(12):
        for i in range(8):
            rel = (i + q) % 3
            lines.append(f"{rel} qid:{q} 1:{rel + 0.1 * i} 2:{(i * 7 % 5) / 5}")
    f = tmp_path / "train.letor"
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "m.lsart"
    r = _cli(
        "train", "lambdamart", "--train", f, "--valid", f, "--trees", "50",
        "--min-data-in-leaf", "5", "--min-sum-hessian-in-leaf", "0", "--bagging-fraction", "1",
        "--early-stopping-rounds", "3", "-o", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert LambdaMART.load(out).n_trees_ < 50
    r = _cli("evaluate", out, "--test", f, "--json")
    assert json.loads(r.stdout)["ndcg@10"] == pytest.approx(1.0)


def test_deploy_refuses_a_corrupted_artifact_before_sending(tmp_path):
    bad = tmp_path / "bad.lsart"
    bad.write_bytes(b"not an artifact at all")
    r = _cli("deploy", bad, "--name", "m", "--url", "http://127.0.0.1:9")
    assert r.returncode == 2 and "not a valid artifact" in r.stderr


def test_deploy_reports_an_unreachable_server(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    m = LambdaMART(n_estimators=2, min_data_in_leaf=2).fit(
        rng.random((20, 3)), rng.integers(0, 3, 20), [10, 10]
    )
    path = tmp_path / "m.lsart"
    m.save(path)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _cli("deploy", path, "--name", "m", "--url", f"http://127.0.0.1:{port}", timeout=60)
    assert r.returncode == 1 and "cannot reach" in r.stderr


def test_deploy_end_to_end_against_the_real_service(tmp_path):
    """`learnserve deploy` (subprocess) -> a real app served by uvicorn on a free port."""
    import numpy as np

    from service.settings import Settings
    from tests.service.serving import ServerThread

    rng = np.random.default_rng(1)
    X = rng.random((60, 4))
    m = LambdaMART(n_estimators=3, min_data_in_leaf=5).fit(X, (X[:, 0] * 3).astype(int), [20] * 3)
    path = tmp_path / "ranker.lsart"
    m.save(path)
    settings = Settings(data_dir=str(tmp_path / "data"), api_keys="adm=admin,reader=predict")
    with ServerThread(settings) as srv:
        r = _cli("deploy", path, "--name", "web-ranker", "--url", srv.url, "--api-key", "adm")
        assert r.returncode == 0, r.stderr
        answer = json.loads(r.stdout)
        assert answer["model"] == "web-ranker" and answer["kind"] == "lambdamart"
        assert answer["size"] == path.stat().st_size
        v1 = answer["version"]
        r = _cli("deploy", path, "--name", "web-ranker", "--url", srv.url, "--api-key", "adm")
        # the same file again: its stored version, nothing stored
        assert r.returncode == 0 and "already has this lambdamart artifact" in r.stderr
        assert json.loads(r.stdout)["version"] == v1 and not json.loads(r.stdout)["stored"]
        m.meta_["note"] = "retrained"
        m.save(path)
        r = _cli("deploy", path, "--name", "web-ranker", "--url", srv.url, "--api-key", "adm")
        assert json.loads(r.stdout)["version"] > v1  # the next version
        # a key without the admin scope: the server's refusal, non-zero exit
        r = _cli("deploy", path, "--name", "web-ranker", "--url", srv.url, "--api-key", "reader")
        assert r.returncode == 1 and "HTTP 403" in r.stderr and "forbidden" in r.stderr
        r = _cli("deploy", path, "--name", "web-ranker", "--url", srv.url)
        assert r.returncode == 1 and "HTTP 401" in r.stderr
