"""``learnserve models|update|predict`` against the real service with real files: a9a
(1-based SVMlight, 32,561 rows) streamed into AROW learns exactly what the library
learner learns from the same batches, whatever the file's index base or compression;
CSV and JSON lines reach the same models; predictions come back one per instance."""

from __future__ import annotations

import csv
import gzip
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from learners.features import Batch
from learners.io.svmlight import read_svmlight
from learners.linear import make_classifier
from service.cli.main import app
from tests.client.conftest import a9a_path

BATCH = 1000
WINDOW = 1000  # Settings.eval_window
TOL = 0.002
# Measured with this code (and equal to the library learner's, asserted below):
A9A_AROW_TEST_ACCURACY = 0.8489  # tests/learners/test_quality_linear.py's figure too
# progressive accuracy over the service's window at the end: the last 1,561 examples
A9A_AROW_PROGRESSIVE = 0.8347


def cli(url: str, *args: Any, code: int = 0) -> Any:
    r = CliRunner().invoke(app, [*map(str, args), "--url", url], catch_exceptions=False)
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    return r


def library_run(batch_size: int) -> tuple[Any, list[tuple[int, int]]]:
    """AROW over a9a in the CLI's batches: the learner, and (n, correct) per batch."""
    data = read_svmlight(a9a_path("a9a"), n_features=123)
    y = data.y.astype(np.int64)
    clf = make_classifier("arow", 123, {})
    per_batch = []
    n = data.X.n_rows
    for start in range(0, n, batch_size):
        rows = np.arange(start, min(start + batch_size, n))
        res = clf.update(data.X.take(rows), y[rows].tolist())
        per_batch.append((len(rows), res.correct))
    return clf, per_batch


def window_accuracy(per_batch: list[tuple[int, int]], size: int) -> tuple[int, float]:
    """The service's EvalWindow: whole batches from the end, dropped from the front while
    the rest still fills ``size``."""
    kept: list[tuple[int, int]] = []
    for b in per_batch:
        kept.append(b)
        while len(kept) > 1 and sum(n for n, _ in kept) - kept[0][0] >= size:
            kept.pop(0)
    n = sum(k for k, _ in kept)
    return n, sum(c for _, c in kept) / n


@pytest.fixture(scope="module")
def library() -> dict[str, Any]:
    clf, per_batch = library_run(BATCH)
    test = read_svmlight(a9a_path("a9a.t"), n_features=123)
    pred = np.asarray(clf.predict(test.X))
    return {
        "clf": clf,
        "window": window_accuracy(per_batch, WINDOW),
        "total_correct": sum(c for _, c in per_batch),
        "test_pred": pred.tolist(),
        "test_y": test.y.astype(np.int64).tolist(),
        "test_accuracy": float(np.mean(pred == test.y)),
    }


def test_a9a_svmlight_one_based_into_arow(server, library, tmp_path: Path) -> None:
    url = server.url
    created = cli(url, "models", "create", "a9a", "arow", "--kind", "sparse", "--dim", 123,
                  "--index-base", 1, "-p", "r=1.0")  # fmt: skip
    assert orjson.loads(created.stdout)["config"]["features"]["index_base"] == 1
    r = cli(url, "update", "a9a", "--file", a9a_path("a9a"), "--format", "svmlight",
            "--batch", BATCH, "--json")  # fmt: skip
    report = orjson.loads(r.stdout)
    assert (report["examples"], report["batches"]) == (32561, 33)
    assert (report["examples_learned"], report["version"]) == (32561, 33)
    n, acc = library["window"]
    om = report["online_metrics"]
    assert om["window_examples"] == n == 1561
    assert om["accuracy"] == pytest.approx(acc, abs=1e-12)  # the same learner, same batches
    assert om["accuracy"] == pytest.approx(A9A_AROW_PROGRESSIVE, abs=TOL)
    # the human summary prints the same figure
    human = cli(url, "models", "list")
    assert "a9a" in human.stdout and f"{acc:.4f}" in human.stdout

    out = tmp_path / "pred.jsonl"
    p = cli(url, "predict", "a9a", "--file", a9a_path("a9a.t"), "-o", out)
    lines = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 16281
    assert [d["label"] for d in lines] == library["test_pred"]
    assert [d["y"] for d in lines] == library["test_y"]
    assert {d["label"] for d in lines} == {-1, 1}
    assert library["test_accuracy"] == pytest.approx(A9A_AROW_TEST_ACCURACY, abs=TOL)
    assert f"accuracy {library['test_accuracy']:.4f}" in p.stderr


def test_a9a_gzipped_into_a_zero_based_model_with_index_base(server, tmp_path: Path) -> None:
    """``--index-base 1`` shifts the file's keys for a 0-based model: the same learned
    state as the 1-based model fed the file as is; gzip read by the name."""
    gz = tmp_path / "a9a.svm.gz"
    with open(a9a_path("a9a"), "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    url = server.url
    cli(
        url, "models", "create", "a9a-zero", "arow", "--kind", "sparse", "--dim", 123, "-p", "r=1.0"
    )
    # without --index-base the file is read as 0-based: the first line with index 123
    # stops the command (the batches before it are learned: another model here)
    cli(url, "models", "create", "a9a-stop", "arow", "--kind", "sparse", "--dim", 123)
    bad = cli(url, "update", "a9a-stop", "--file", gz, "--no-progress", code=2)
    assert "feature index 123 is outside [0, 122]" in bad.stderr and ".gz:" in bad.stderr
    line = int(bad.stderr.split(".gz:")[1].split(":")[0])
    learned = (line - 1) // BATCH * BATCH  # the full batches before that line
    assert f"stopped: the {learned} examples before the error were learned" in bad.stderr
    stopped = orjson.loads(cli(url, "models", "show", "a9a-stop").stdout)
    assert stopped["examples_learned"] == learned
    cli(url, "update", "a9a-zero", "--file", gz, "--index-base", 1, "--json")
    if "a9a" not in {m["name"] for m in orjson.loads(cli(url, "models", "list", "--json").stdout)}:
        pytest.skip("needs the a9a model of the previous test")
    zero = orjson.loads(cli(url, "models", "show", "a9a-zero").stdout)
    one = orjson.loads(cli(url, "models", "show", "a9a").stdout)
    assert zero["state_digest"] == one["state_digest"]
    assert zero["online_metrics"] == one["online_metrics"]


def test_csv_and_jsonl_reach_the_same_model_as_svmlight(server, tmp_path: Path) -> None:
    """The first 3,000 a9a rows as a dense CSV (header, label last), as JSON lines, and
    as SVMlight into three dense models: one learned state; predictions as CSV."""
    data = read_svmlight(a9a_path("a9a"), n_features=123)
    rows = np.arange(3000)
    X = data.X.take(rows).to_dense()
    y = data.y[rows].astype(np.int64)
    header = [f"f{j}" for j in range(1, 124)] + ["income"]
    csv_path = tmp_path / "a9a-head.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for xi, yi in zip(X, y, strict=True):
            w.writerow([f"{v:g}" for v in xi] + [f"{yi:+d}"])
    jsonl = tmp_path / "a9a-head.jsonl"
    jsonl.write_bytes(b"".join(orjson.dumps({"x": xi.tolist(), "y": int(yi)}) + b"\n"
                               for xi, yi in zip(X, y, strict=True)))  # fmt: skip
    svm = tmp_path / "a9a-head.svm"
    with open(a9a_path("a9a")) as src, open(svm, "w") as dst:
        dst.writelines(line for _, line in zip(range(3000), src, strict=False))
    url = server.url
    for name, path, extra in (("d-csv", csv_path, ["--label-column", "income"]),
                              ("d-jsonl", jsonl, []),
                              ("d-svm", svm, ["--index-base", 1])):  # fmt: skip
        cli(url, "models", "create", name, "arow", "--kind", "dense", "--dim", 123)
        r = cli(url, "update", name, "--file", path, "--batch", 500, "--json", *extra)
        assert orjson.loads(r.stdout)["examples_learned"] == 3000
    digests = {orjson.loads(cli(url, "models", "show", n).stdout)["state_digest"]
               for n in ("d-csv", "d-jsonl", "d-svm")}  # fmt: skip
    assert len(digests) == 1
    clf = make_classifier("arow", 123, {})
    clf.update(Batch.from_dense(X), y.tolist())
    out = tmp_path / "pred.csv"
    cli(url, "predict", "d-csv", "--file", csv_path, "--label-column", "income", "-o", out)
    with open(out, newline="") as fh:
        got = list(csv.DictReader(fh))
    assert len(got) == 3000
    assert [int(g["label"]) for g in got] == np.asarray(clf.predict(Batch.from_dense(X))).tolist()
    assert [int(g["y"]) for g in got] == y.tolist()
    # the human summary of an update names the progressive accuracy
    r = cli(url, "update", "d-svm", "--file", svm, "--index-base", 1, "--no-progress")
    assert "progressive accuracy" in r.stdout and "6000 examples learned" in r.stdout


def test_service_errors_reach_the_cli_with_their_field(server, tmp_path: Path) -> None:
    url = server.url
    bad = cli(url, "models", "create", "x", "arow", "--kind", "sparse", "--dim", 4,
              "-p", "r=-1", code=1)  # fmt: skip
    assert "invalid_input" in bad.stderr and "params.r" in bad.stderr
    cli(url, "models", "create", "h", "pa", "--kind", "hashed", "--bits", 8)
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"x": {"a": 1}, "y": 1}\n{"x": {"a": 1}, "y": 1, "weight": -1}\n')
    r = cli(url, "update", "h", "--file", lines, "--no-progress", code=1)
    assert "examples[1].weight" in r.stderr
    missing = cli(url, "models", "show", "nope", code=1)
    assert "model_not_found" in missing.stderr
    cli(url, "models", "delete", "h")
    cli(url, "models", "show", "h", code=1)


def test_token_reaches_a_service_with_api_keys(tmp_path: Path, monkeypatch) -> None:
    from service.settings import Settings
    from tests.service.serving import ServerThread

    keys = "adm-key=predict+update+admin,reader=predict"
    svm = tmp_path / "tiny.svm"
    svm.write_text("+1 1:1 3:0.5\n-1 2:1\n+1 1:0.5\n")
    with ServerThread(Settings(data_dir=str(tmp_path / "data"), api_keys=keys)) as srv:
        denied = cli(srv.url, "models", "list", code=1)
        assert "HTTP 401 unauthorized" in denied.stderr
        cli(srv.url, "models", "create", "t", "pa", "--dim", 3, "--index-base", 1,
            "--token", "adm-key")  # fmt: skip
        forbidden = cli(srv.url, "update", "t", "-f", svm, "--token", "reader", code=1)
        assert "HTTP 403 forbidden" in forbidden.stderr
        monkeypatch.setenv("LEARNSERVE_TOKEN", "adm-key")
        r = cli(srv.url, "update", "t", "-f", svm, "--json")
        assert orjson.loads(r.stdout)["examples_learned"] == 3
