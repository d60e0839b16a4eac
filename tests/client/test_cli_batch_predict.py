"""``learnserve predict`` on a deployed batch model reads the files its ``learnserve
train`` reads and prints the metrics ``learnserve evaluate`` prints, to the last digit.

Before: an SVMlight file for LambdaMART ended in a bare ``AssertionError`` and an empty
output file, an XC file for FastXML was refused at its ``N D L`` header, and MNIST's
idx file for LL-SVM crashed with ``UnicodeDecodeError``. Each kind is tested on small
files generated here (a model trained by the CLI, deployed, then ``predict`` and
``evaluate`` on the same test file), and on the real files of ../shared/data when
present."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from learners.ranking.ndcg import ndcg_at_k
from service.cli.main import app
from service.client import Client
from tests.conftest import require_data


def run(*args: Any, code: int = 0) -> Any:
    r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def deployed(server: Any, name: str, artifact: Path) -> None:
    with Client(server.url) as c:
        c.deploy(name, artifact)


def predict_matches_evaluate(
    server: Any, name: str, test: Path, out: Path, evaluate_args: list[Any], predict_args: list[Any]
) -> tuple[Any, dict[str, Any]]:
    """predict's stderr holds evaluate's display; the figures of ``--json``."""
    shown = run("evaluate", *evaluate_args).stdout
    full = orjson.loads(run("evaluate", *evaluate_args, "--json").stdout)
    p = run("predict", name, "--file", test, "-o", out, "--url", server.url, *predict_args)
    assert out.stat().st_size > 0
    assert shown in p.stderr, (shown, p.stderr)  # the same keys, the same rounded figures
    return p, full


# ---------------------------------------------------------------- LambdaMART
def letor_lines(n_queries: int, seed: int, extra_feature: bool = False) -> list[tuple[int, str]]:
    """(qid, "rel 1:v 2:v") rows, 8 per query, relevance 0..2; feature 3 (absent from
    training) when ``extra_feature``."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_queries):
        for i in range(8):
            rel = int(rng.integers(0, 3))
            f1, f2 = rel + rng.normal(0, 0.6), float(rng.uniform())
            feats = f"1:{f1:.4f} 2:{f2:.4f}" + (f" 3:{i + 1}" if extra_feature else "")
            rows.append((q, f"{rel} {feats}"))
    return rows


def write_letor(path: Path, rows: list[tuple[int, str]], qid: bool) -> None:
    lines = []
    for q, line in rows:
        rel, _, feats = line.partition(" ")
        lines.append(f"{rel} qid:{q} {feats}" if qid else line)
    path.write_text("\n".join(lines) + "\n")
    if not qid:  # LightGBM's sidecar: the sizes of consecutive queries
        sizes = np.bincount([q for q, _ in rows])
        path.with_name(path.name + ".query").write_text("\n".join(map(str, sizes)) + "\n")


@pytest.fixture(scope="module")
def lambdamart(server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lambdamart")
    write_letor(d / "train.letor", letor_lines(12, 0), qid=True)
    run("train", "lambdamart", "--train", d / "train.letor", "--trees", 5,
        "--min-data-in-leaf", 5, "--min-sum-hessian-in-leaf", 0, "-o", d / "m.lsart")  # fmt: skip
    deployed(server, "cli-lm", d / "m.lsart")
    return d


@pytest.mark.parametrize("groups", ["qid", "sidecar"])
def test_lambdamart_predict_ranks_queries_and_prints_ndcg(
    server: Any, lambdamart: Path, groups: str
) -> None:
    d = lambdamart
    test = d / f"test-{groups}.letor"
    rows = letor_lines(5, 1, extra_feature=True)  # feature 3: ignored, as evaluate does
    write_letor(test, rows, qid=groups == "qid")
    query = [] if groups == "qid" else ["--test-query", test.with_name(test.name + ".query")]
    out = d / f"pred-{groups}.jsonl"
    p, full = predict_matches_evaluate(server, "cli-lm", test, out, [d / "m.lsart", "--test", test,
                                       *query], [])  # fmt: skip
    if groups == "sidecar":
        assert "query groups from test-sidecar.letor.query (found beside" in p.stderr
    lines = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert [q["qid"] for q in lines] == list(range(5))  # one line per query
    assert all(len(q["scores"]) == len(q["y"]) == 8 for q in lines)
    assert "predicted 40 items in 5 queries" in p.stderr
    # the written scores give evaluate's full-precision figures
    scores = np.concatenate([q["scores"] for q in lines])
    y = np.concatenate([q["y"] for q in lines]).astype(float)
    for k in (1, 3, 5, 10):
        got = ndcg_at_k(scores, y, np.full(5, 8), k)
        assert got == pytest.approx(full[f"ndcg@{k}"], abs=1e-12)
    # CSV: one row per item with its rank in the query
    csv_out = d / f"pred-{groups}.csv"
    run("predict", "cli-lm", "--file", test, "-o", csv_out, "--url", server.url)
    table = csv_out.read_text().splitlines()
    assert table[0] == "qid,y,score,rank" and len(table) == 41


def test_lambdamart_without_groups_scores_each_line(server: Any, lambdamart: Path) -> None:
    test = lambdamart / "plain.svm"
    test.write_text("1 1:0.5 2:0.1\n0 1:-1 2:0.9\n")
    p = run("predict", "cli-lm", "--file", test, "--url", server.url)
    assert "no query groups" in p.stderr and "predicted 2 instances" in p.stderr
    assert [set(orjson.loads(line)) for line in p.stdout.splitlines()] == [{"y", "score"}] * 2


# ---------------------------------------------------------------- FastXML
def write_xc(path: Path, n: int, seed: int) -> None:
    """n points, 12 features, 4 labels: label j when feature 3j or 3j+1 is on."""
    rng = np.random.default_rng(seed)
    lines = [f"{n} 12 4"]
    for _ in range(n):
        on = sorted(set(rng.choice(12, size=3, replace=False).tolist()))
        labels = sorted({j // 3 for j in on if j % 3 != 2})
        lines.append(",".join(map(str, labels)) + " " + " ".join(f"{j}:1" for j in on))
    path.write_text("\n".join(lines) + "\n")


def test_fastxml_predict_reads_xc_files(server: Any, tmp_path: Path) -> None:
    write_xc(tmp_path / "train.txt", 120, 0)
    write_xc(tmp_path / "test.txt", 40, 1)
    model = tmp_path / "x.lsart"
    run("train", "fastxml", "--train", tmp_path / "train.txt", "--trees", 2, "-o", model)
    deployed(server, "xml", model)
    out = tmp_path / "pred.jsonl"
    test = tmp_path / "test.txt"
    p, full = predict_matches_evaluate(
        server, "xml", test, out, [model, "--test", test], ["--k", 2]
    )
    lines = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 40 and "predicted 40 points" in p.stderr
    assert all(len(d["labels"]) <= 2 for d in lines)  # --k 2 shown; P@5 measured on 5
    assert set(full) == {"p@1", "p@3", "p@5", "ndcg@1", "ndcg@3", "ndcg@5"}
    # an SVMlight file is not what `train fastxml` reads: a clear error, exit 2
    svm = tmp_path / "x.svm"
    svm.write_text("1 1:1 2:1\n")
    r = run("predict", "xml", "--file", svm, "--url", server.url, code=2)
    assert "x.svm:1: header must be" in r.stderr and "`N D L` header" in r.stderr


# ---------------------------------------------------------------- LL-SVM
def write_idx(prefix: Path, X: np.ndarray, y: np.ndarray) -> Path:
    imgs = X.astype(np.uint8).reshape(-1, 4, 4)
    head = struct.pack(">BBBB", 0, 0, 8, 3) + struct.pack(">III", *imgs.shape)
    images = prefix.with_name(prefix.name + "-images-idx3-ubyte.gz")
    images.write_bytes(gzip.compress(head + imgs.tobytes()))
    head = struct.pack(">BBBB", 0, 0, 8, 1) + struct.pack(">I", y.shape[0])
    prefix.with_name(prefix.name + "-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(head + y.astype(np.uint8).tobytes())
    )
    return images


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """3 classes of 4x4 "images": class c lights rows c (0..255 pixel values)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    X = rng.uniform(0, 60, size=(n, 16))
    for i, c in enumerate(y):
        X[i, 4 * c : 4 * c + 4] += 180
    return np.clip(X, 0, 255).round(), y


@pytest.mark.parametrize("fmt", ["idx", "csv", "svmlight"])
def test_llsvm_predict_reads_what_train_reads(server: Any, tmp_path: Path, fmt: str) -> None:
    (Xtr, ytr), (Xte, yte) = blobs(150, 0), blobs(60, 1)
    if fmt == "idx":
        train, test = write_idx(tmp_path / "tr", Xtr, ytr), write_idx(tmp_path / "te", Xte, yte)
    elif fmt == "csv":
        train, test = tmp_path / "tr.csv", tmp_path / "te.csv"
        np.savetxt(train, np.c_[ytr, Xtr], delimiter=",", fmt="%g")
        np.savetxt(test, np.c_[yte, Xte], delimiter=",", fmt="%g")
    else:
        train, test = tmp_path / "tr.svm", tmp_path / "te.svm"
        for path, X, y in ((train, Xtr, ytr), (test, Xte, yte)):
            path.write_text("".join(
                f"{c} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row) if v) + "\n"
                for row, c in zip(X, y, strict=True)))  # fmt: skip
    model = tmp_path / "l.lsart"
    run("train", "llsvm", "--train", train, "--passes", 3, "-o", model)
    deployed(server, f"ll-{fmt}", model)
    out = tmp_path / "pred.csv"
    p, full = predict_matches_evaluate(server, f"ll-{fmt}", test, out, [model, "--test", test], [])
    table = out.read_text().splitlines()
    assert table[0] == "id,y,label,score,confidence,labels" and len(table) == 61
    assert full["examples"] == 60 and full["accuracy"] > 0.9
    if fmt == "idx":
        assert "reading te-images-idx3-ubyte.gz" in p.stderr


# ---------------------------------------------------------------- the real files
def test_real_files_of_every_batch_kind(server: Any, tmp_path: Path) -> None:
    rank = require_data("lightgbm-lambdarank")
    bib = require_data("bibtex")
    mnist = require_data("mnist")
    run("train", "lambdamart", "--train", rank / "rank.train", "--train-query",
        rank / "rank.train.query", "--trees", 10, "-o", tmp_path / "r.lsart")  # fmt: skip
    run("train", "fastxml", "--train", bib / "bibtex_train.txt", "--trees", 3,
        "-o", tmp_path / "b.lsart")  # fmt: skip
    run("train", "llsvm", "--train", mnist / "train-images-idx3-ubyte.gz", "--limit", 3000,
        "--passes", 2, "-o", tmp_path / "m.lsart")  # fmt: skip
    cases = [
        ("real-rank", "r.lsart", rank / "rank.test", ["--test-query", rank / "rank.test.query"]),
        ("real-bib", "b.lsart", bib / "bibtex_test.txt", []),
        ("real-mnist", "m.lsart", mnist / "t10k-images-idx3-ubyte.gz", []),
    ]
    for name, artifact, test, extra in cases:
        deployed(server, name, tmp_path / artifact)
        out = tmp_path / f"{name}.jsonl"
        predict_matches_evaluate(server, name, test, out,
                                 [tmp_path / artifact, "--test", test, *extra], [])  # fmt: skip
