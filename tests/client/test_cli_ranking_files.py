"""Ranking from files: ``learnserve update`` streams a ranking file into a RankSVM with
its query groups (``qid:`` tokens or LightGBM's ``.query`` sidecar, as ``train
lambdamart`` reads them) and ``predict`` ranks each query and prints NDCG.

Before: every ``update`` of a RankSVM from a file failed with the server's ``queries:
field required`` (the CLI sent examples), and ``qid:`` lines were refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from learners.io.svmlight import read_svmlight
from learners.ranking.ranksvm import make_ranker
from service.cli.main import app
from service.client import Client
from tests.client.test_cli_batch_predict import letor_lines, write_letor
from tests.conftest import require_data

TOL = 0.002
# Measured with this code: RankSVM defaults, rank.train learned in batches of <= 1000
# items (4 requests), NDCG@10 on rank.test (50 queries), as `predict` prints it.
RANK_TEST_NDCG10 = 0.6275


def run(url: str, *args: Any, code: int = 0) -> Any:
    r = CliRunner().invoke(app, [*map(str, args), "--url", url], catch_exceptions=False)
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def packed(sizes: list[int], max_items: int) -> list[list[int]]:
    """The requests the CLI sends: consecutive queries, at most ``max_items`` items each."""
    out: list[list[int]] = []
    for n in sizes:
        if out and sum(out[-1]) + n <= max_items:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def library_ranker(path: Path, query: Path | None, dim: int, max_items: int) -> Any:
    """RankSVM fed the file's queries in the CLI's requests (1-based file, columns 0..)."""
    data = read_svmlight(path, n_features=dim, query_file=query)
    sizes = [int(g) for g in data.group_sizes]
    model = make_ranker(dim, {})
    start = 0
    for request in packed(sizes, max_items):
        rows = np.arange(start, start + sum(request))
        model.update(data.X.take(rows), data.y[rows], request)
        start += len(rows)
    return model


@pytest.mark.parametrize("groups", ["qid", "sidecar"])
def test_ranksvm_learns_a_file_by_query(server: Any, tmp_path: Path, groups: str) -> None:
    url = server.url
    train, test = tmp_path / "train.letor", tmp_path / "test.letor"
    write_letor(train, letor_lines(20, 3), qid=groups == "qid")  # 20 queries of 8
    write_letor(test, letor_lines(6, 4), qid=groups == "qid")
    name = f"rs-{groups}"
    run(url, "models", "create", name, "ranksvm", "--kind", "sparse", "--dim", 2,
        "--index-base", 1)  # fmt: skip
    r = run(url, "update", name, "--file", train, "--batch", 20, "--json")
    report = orjson.loads(r.stdout)
    assert (report["examples"], report["batches"]) == (160, 10)  # 2 queries per request
    assert report["online_metrics"]["ndcg_at_10"] is not None
    sidecar = None if groups == "qid" else train.with_name("train.letor.query")
    if sidecar is not None:
        assert "query groups from train.letor.query" in r.stderr

    out = tmp_path / "pred.jsonl"
    p = run(url, "predict", name, "--file", test, "-o", out)
    lines = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert [q["qid"] for q in lines] == list(range(6))
    # the service learned what the library learns from the same requests
    ref = library_ranker(train, sidecar, 2, 20)
    te = read_svmlight(test, n_features=2, query_file=test.with_name("test.letor.query")
                       if sidecar else None)  # fmt: skip
    want = ref.decision_function(te.X)
    got = np.concatenate([q["scores"] for q in lines])
    assert np.array_equal(got, want)
    assert "predicted 48 items in 6 queries" in p.stderr
    assert "kind     ranksvm" in p.stderr and "ndcg@10" in p.stderr


def test_a_query_file_that_does_not_match_is_refused_before_anything_is_sent(
    server: Any, tmp_path: Path
) -> None:
    url = server.url
    train = tmp_path / "t.letor"
    write_letor(train, letor_lines(3, 5), qid=False)
    wrong = tmp_path / "wrong.query"
    wrong.write_text("8\n8\n7\n")
    run(url, "models", "create", "rs-mismatch", "ranksvm", "--kind", "sparse", "--dim", 2,
        "--index-base", 1)  # fmt: skip
    r = run(url, "update", "rs-mismatch", "--file", train, "--query", wrong, code=2)
    assert "the query sizes add up to 23 rows, but" in r.stderr and "has 24" in r.stderr
    with Client(url) as c:
        assert c.describe("rs-mismatch").version == 0  # nothing learned
    bad = tmp_path / "bad.query"
    bad.write_text("8\nx\n")
    r = run(url, "update", "rs-mismatch", "--file", train, "--query", bad, code=2)
    assert f"{bad}:2: 'x' is not a query size" in r.stderr


def test_rows_without_groups(server: Any, tmp_path: Path) -> None:
    url = server.url
    plain = tmp_path / "plain.svm"
    plain.write_text("1 1:0.5\n0 2:1\n")
    run(url, "models", "create", "rs-plain", "ranksvm", "--kind", "sparse", "--dim", 2,
        "--index-base", 1)  # fmt: skip
    r = run(url, "update", "rs-plain", "--file", plain, code=2)
    assert f"{plain}:1: no qid" in r.stderr and "--query FILE" in r.stderr
    # a classifier takes no query groups
    run(url, "models", "create", "cls", "arow", "--kind", "sparse", "--dim", 2,
        "--index-base", 1)  # fmt: skip
    r = run(url, "update", "cls", "--file", plain, "--query", plain, code=2)
    assert "only rankers take query groups" in r.stderr
    qid = tmp_path / "q.svm"
    qid.write_text("1 qid:1 1:0.5\n")
    r = run(url, "update", "cls", "--file", qid, code=2)
    assert "qid: rows are ranking queries" in r.stderr
    # JSON lines of queries go as written
    lines = tmp_path / "q.jsonl"
    lines.write_text(
        '{"qid": "a", "items": [{"x": {"1": 1.0}, "relevance": 2}, {"x": {"2": 1.0}, '
        '"relevance": 0}]}\n{"qid": "b", "items": [{"x": {"2": 0.5}, "relevance": 1}]}\n'
    )
    r = run(url, "update", "rs-plain", "--file", lines, "--json")
    assert orjson.loads(r.stdout)["examples"] == 3
    p = run(url, "predict", "rs-plain", "--file", lines)
    assert [orjson.loads(line)["qid"] for line in p.stdout.splitlines()] == ["a", "b"]
    assert "ndcg@1" in p.stderr


def test_rank_train_into_ranksvm(server: Any, tmp_path: Path) -> None:
    d = require_data("lightgbm-lambdarank")
    url = server.url
    run(url, "models", "create", "rank-svm", "ranksvm", "--kind", "sparse", "--dim", 300,
        "--index-base", 1)  # fmt: skip
    r = run(url, "update", "rank-svm", "--file", d / "rank.train", "--json")
    report = orjson.loads(r.stdout)
    assert (report["examples"], report["batches"]) == (3005, 4)
    out = tmp_path / "rank.jsonl"
    p = run(url, "predict", "rank-svm", "--file", d / "rank.test", "-o", out)
    assert "predicted 768 items in 50 queries" in p.stderr
    ndcg10 = float(p.stderr.split("ndcg@10")[1].split()[0])
    assert ndcg10 == pytest.approx(RANK_TEST_NDCG10, abs=TOL)
    ref = library_ranker(d / "rank.train", d / "rank.train.query", 300, 1000)
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    got = np.concatenate([orjson.loads(line)["scores"] for line in out.read_text().splitlines()])
    assert np.array_equal(got, ref.decision_function(te.X))
