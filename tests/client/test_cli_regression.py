"""``learnserve update|predict`` of a regressor from real files: California Housing's raw
CSV (a categorical column, empty cells) into an AROW regressor on raw records, whose
state equals the in-process learner fed the same records, whose progressive MAE beats
the running mean by far, and whose predictions of held-out rows come with a 90 %
interval; SVMlight and JSON lines with real-valued labels; a label that is no number
is refused naming the line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from learners.io.records import read_csv_records
from learners.records import RecordEncoder
from learners.regression import make_regressor
from tests.client.test_cli_ingest import cli
from tests.conftest import require_data

NUMERIC = ["longitude", "latitude", "housing_median_age", "total_rooms", "total_bedrooms",
           "population", "households", "median_income"]  # fmt: skip
TARGET = "median_house_value"
TRAIN = 15000


def housing_config() -> dict[str, Any]:
    fields: dict[str, Any] = {n: {"type": "numeric", "transform": "standardize"} for n in NUMERIC}
    fields["ocean_proximity"] = {"type": "categorical"}
    return {"kind": "records", "bits": 12, "fields": fields}


@pytest.fixture(scope="module")
def housing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The CSV shuffled with a fixed seed (the file is sorted by place), split in two."""
    lines = require_data("california-housing", "housing.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    order = np.random.default_rng(0).permutation(len(rows))
    shuffled = [rows[i] for i in order]
    d = tmp_path_factory.mktemp("housing")
    train, test = d / "train.csv", d / "test.csv"
    train.write_text("\n".join([header, *shuffled[:TRAIN]]) + "\n")
    test.write_text("\n".join([header, *shuffled[TRAIN:]]) + "\n")
    return train, test


def test_housing_csv_through_the_cli(server: Any, housing: tuple[Path, Path],
                                     tmp_path: Path) -> None:  # fmt: skip
    train, test = housing
    url = server.url
    body = {"algorithm": "arow_regression", "features": housing_config()}
    assert httpx.put(f"{url}/models/houses", json=body).status_code == 201
    flags = ["--format", "csv", "--label", TARGET]
    r = cli(url, "update", "houses", "--file", train, *flags, "--no-progress", "--json")
    report = orjson.loads(r.stdout)
    assert report["examples_learned"] == TRAIN
    cumulative = report["online_metrics"]["cumulative"]
    # in process: the same records in the same order, the same state
    records, ys = read_csv_records(train, label=TARGET, numeric=NUMERIC, missing="")
    enc = RecordEncoder(housing_config())
    reg = make_regressor("arow", enc.dim, {})
    targets = [float(y) for y in ys]
    learned = reg.update(enc.learn(records), targets)
    got = orjson.loads(cli(url, "models", "show", "houses").stdout)
    mean_mae = float(np.mean(np.abs(np.array(targets) - np.mean(targets))))
    mae = float(np.mean(np.abs(np.array(targets) - learned.predicted)))
    print(f"California Housing, AROW regression, one pass: MAE {cumulative['mae']:.0f} "
          f"(running mean's spread {mean_mae:.0f}), R² {cumulative['r2']:.3f}, "
          f"90 % coverage {cumulative['interval_coverage']:.3f}")  # fmt: skip
    assert cumulative["mae"] == pytest.approx(mae, rel=1e-9)
    assert cumulative["mae"] < 0.65 * mean_mae and cumulative["r2"] > 0.5
    assert 0.75 < cumulative["interval_coverage"] < 0.97
    # (the records' statistics are state too: the service's digest covers them)
    assert got["examples_learned"] == TRAIN
    out = tmp_path / "pred.csv"
    r = cli(url, "predict", "houses", "--file", test, *flags, "-o", out)
    found = re.search(r"MAE ([0-9.e+]+) \((\d+) labelled\)", r.stderr)
    assert found is not None, r.stderr
    assert int(found.group(2)) == 20640 - TRAIN
    assert float(found.group(1)) < 0.7 * mean_mae
    table = out.read_text().splitlines()
    assert table[0] == "id,y,value,variance,low,high" and len(table) == 20640 - TRAIN + 1
    _, _y, value, variance, low, high = table[1].split(",")
    assert float(low) < float(value) < float(high) and float(variance) > 0


def test_svmlight_and_json_lines_with_real_labels(server: Any, tmp_path: Path) -> None:
    url = server.url
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = 2.5 * X[:, 0] - X[:, 2] + 0.01 * rng.normal(size=300)
    svm = tmp_path / "r.svm"
    svm.write_text("".join(f"{t:.6f} " + " ".join(f"{j}:{v:.6f}" for j, v in enumerate(x)) + "\n"
                           for x, t in zip(X, y, strict=True)))  # fmt: skip
    jsonl = tmp_path / "r.jsonl"
    lines = [
        orjson.dumps(
            {"x": {str(j): round(float(v), 6) for j, v in enumerate(x)}, "y": round(float(t), 6)}
        )
        for x, t in zip(X, y, strict=True)
    ]
    jsonl.write_bytes(b"\n".join(lines) + b"\n")
    for name, path, fmt in (("r-svm", svm, "svmlight"), ("r-jsonl", jsonl, "jsonl")):
        body = {"algorithm": "pa1_regression", "features": {"kind": "sparse", "dim": 4}}
        assert httpx.put(f"{url}/models/{name}", json=body).status_code == 201
        cli(url, "update", name, "--file", path, "--format", fmt, "--no-progress", "--json")
    a = orjson.loads(cli(url, "models", "show", "r-svm").stdout)
    b = orjson.loads(cli(url, "models", "show", "r-jsonl").stdout)
    assert a["state_digest"] == b["state_digest"] and a["examples_learned"] == 300
    assert a["online_metrics"]["cumulative"]["r2"] > 0.9
    bad = tmp_path / "bad.svm"
    bad.write_text("1.5 0:1\nabc 0:1\n")
    r = cli(url, "update", "r-svm", "--file", bad, "--format", "svmlight", "--no-progress",
            code=2)  # fmt: skip
    assert "bad.svm:2: label: 'abc' is not a number" in r.stderr, r.stderr
