"""``learnserve update|predict`` of a records model (``features.kind = "records"``) from
real files: UCI Adult's raw CSV rows (``adult-raw``), streamed through the CLI into AROW,
reach the accuracy the library and ``/update`` reach from the same records in the same
batches; a headerless file read with ``--columns`` and flat JSON lines with ``--label``
give the same learned state as the CSV; bad files and options are refused, named."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from learners.io.records import read_csv_records
from tests.client.test_cli_ingest import cli
from tests.conftest import require_data
from tests.learners.test_records_quality import NUMERIC, adult_config

HEAD = 3000  # rows of adult.data for the equivalence tests


def create(url: str, name: str, features: dict[str, Any]) -> None:
    r = httpx.put(f"{url}/models/{name}", json={"algorithm": "arow", "features": features})
    assert r.status_code == 201, r.text


def digest(url: str, name: str) -> tuple[int, str]:
    got = orjson.loads(cli(url, "models", "show", name).stdout)
    return got["examples_learned"], got["state_digest"]


@pytest.fixture(scope="module")
def adult_files() -> tuple[Path, Path]:
    return require_data("adult-raw", "adult.data"), require_data("adult-raw", "adult.test")


def test_adult_csv_one_pass_through_the_cli(server, adult_files, tmp_path: Path) -> None:
    data, test = adult_files
    url = server.url
    create(url, "adult", adult_config("bins"))
    flags = ["--format", "csv", "--label", "class", "--missing", "?"]
    r = cli(url, "update", "adult", "--file", data, *flags, "--no-progress", "--json")
    assert orjson.loads(r.stdout)["examples_learned"] == 32561
    out = tmp_path / "pred.jsonl"
    r = cli(url, "predict", "adult", "--file", test, *flags, "-o", out)
    found = re.search(r"accuracy ([0-9.]+) \((\d+)/(\d+) labelled\)", r.stderr)
    assert found is not None, r.stderr
    acc = float(found.group(1))
    print(f"adult-raw through the CLI, AROW one pass: {acc:.4f}")
    assert int(found.group(3)) == 16281
    # = in process and through /update in batches of 1000 (tests/service/test_records_api)
    assert acc == pytest.approx(0.8612, abs=0.002)
    preds = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert len(preds) == 16281 and {p["label"] for p in preds} == {"<=50K", ">50K"}


def test_headerless_csv_and_json_lines_learn_what_the_csv_learns(
    server, adult_files, tmp_path: Path
) -> None:
    data, _ = adult_files
    lines = data.read_text().splitlines()
    header, rows = lines[0], lines[1 : HEAD + 1]
    with_header = tmp_path / "head.csv"
    with_header.write_text("\n".join([header, *rows]) + "\n")
    bare = tmp_path / "head.data"  # as UCI distributes adult.data: no header row
    bare.write_text("\n".join(rows) + "\n")
    records, labels = read_csv_records(with_header, label="class", numeric=NUMERIC, missing="?")
    flat = tmp_path / "head.jsonl"  # flat records, the label inside, "?" as written
    flat.write_bytes(b"".join(
        orjson.dumps({k: "?" if v is None else v for k, v in {**rec, "class": y}.items()}) + b"\n"
        for rec, y in zip(records, labels, strict=True)))  # fmt: skip
    assert sum(v is None for rec in records for v in rec.values()) > 0  # Adult has "?"s
    url = server.url
    runs = {
        "h-csv": [with_header, "--format", "csv", "--label", "class"],
        "h-bare": [bare, "--format", "csv", "--columns", header.replace(",", ", ")],
        "h-jsonl": [flat, "--format", "jsonl", "--label", "class"],
    }
    for name, args in runs.items():
        create(url, name, adult_config("bins"))
        cli(url, "update", name, "--file", *args, "--missing", "?", "--batch", 500,
            "--no-progress")  # fmt: skip
    got = {name: digest(url, name) for name in runs}
    assert len(set(got.values())) == 1, got
    assert got["h-csv"][0] == HEAD
    # and what /update learns from the library reader's records, in the same batches
    create(url, "h-http", adult_config("bins"))
    for s in range(0, HEAD, 500):
        ex = [{"x": x, "y": y} for x, y in zip(records[s : s + 500], labels[s : s + 500])]
        r = httpx.post(f"{url}/update", json={"model": "h-http", "examples": ex})
        assert r.status_code == 200, r.text
    assert digest(url, "h-http") == got["h-csv"]


def test_bad_files_and_options_are_refused_naming_them(server, tmp_path: Path) -> None:
    url = server.url
    fields = {"age": {"type": "numeric"}, "job": {"type": "categorical"}}
    create(url, "r", {"kind": "records", "bits": 10, "unknown_fields": "refuse", "fields": fields})
    good = tmp_path / "good.csv"
    good.write_text("age,job,y\n39,clerk,a\n,?,b\n")
    cli(url, "update", "r", "--file", good, "--missing", "?", "--no-progress")
    assert digest(url, "r")[0] == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("age,job,y\n39,clerk,a\nold,clerk,b\n")
    r = cli(url, "update", "r", "--file", bad, "--no-progress", code=2)  # a file error
    assert "bad.csv:3: column 'age'" in r.stderr and "not a number" in r.stderr
    extra = tmp_path / "extra.csv"  # the config refuses unknown fields: the service says so
    extra.write_text("age,job,pet,y\n39,clerk,cat,a\n")
    r = cli(url, "update", "r", "--file", extra, "--no-progress", code=1)
    assert "examples[0].x.pet" in r.stderr
    nolabel = tmp_path / "nolabel.jsonl"
    nolabel.write_text('{"age": 3, "job": "x"}\n')
    r = cli(url, "update", "r", "--file", nolabel, "--label", "y", "--no-progress", code=2)
    assert "nolabel.jsonl:1: no label" in r.stderr
    badlabel = tmp_path / "badlabel.jsonl"
    badlabel.write_text('{"age": 3, "job": "x", "y": [1]}\n')
    r = cli(url, "update", "r", "--file", badlabel, "--label", "y", "--no-progress", code=2)
    assert "badlabel.jsonl:1: the label 'y'" in r.stderr
    r = cli(url, "update", "r", "--file", good, "--label", "y", "--label-column", "job", code=2)
    assert "--label" in r.stderr
    r = cli(url, "update", "r", "--file", good, "--columns", "a,a,b", code=2)
    assert "--columns" in r.stderr
    r = cli(url, "update", "r", "--file", nolabel, "--format", "jsonl", "--columns", "a", code=2)
    assert "--columns" in r.stderr
    cli(url, "models", "create", "d", "arow", "--kind", "dense", "--dim", 2)
    r = cli(url, "update", "d", "--file", good, "--missing", "?", code=2)
    assert "--missing" in r.stderr
    assert digest(url, "r")[0] == 2  # nothing of the refused files was learned
