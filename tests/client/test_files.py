"""Reading example files for ``learnserve update/predict``: each format into each kind
of model, index bases, gzip, and errors that name ``file:line``."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from service.client.files import ExampleFile, FileFormatError, Target, guess_format, parse_label


def rows(path: Path, fmt: str, target: Target, **kw: object) -> list[tuple[object, object]]:
    return [(r.x, r.y) for r in ExampleFile(path, fmt, target, **kw)]  # type: ignore[arg-type]


def test_svmlight_into_each_kind(tmp_path: Path) -> None:
    p = tmp_path / "d.svm"
    p.write_text("+1 1:0.5 3:2 # comment\n\n# only a comment\n-1 2:1e-3\n2.0 \n")
    one = Target("sparse", 3, model_base=1, file_base=1)
    assert rows(p, "svmlight", one) == [({"1": 0.5, "3": 2.0}, 1), ({"2": 0.001}, -1), ({}, 2)]
    zero = Target("sparse", 3, model_base=0, file_base=1)
    assert rows(p, "svmlight", zero)[0] == ({"0": 0.5, "2": 2.0}, 1)
    up = Target("sparse", 4, model_base=1, file_base=0)  # a 0-based file into a 1-based model
    assert rows(p, "svmlight", up)[0] == ({"2": 0.5, "4": 2.0}, 1)
    dense = Target("dense", 3, file_base=1)
    assert rows(p, "svmlight", dense)[:2] == [([0.5, 0.0, 2.0], 1), ([0.0, 0.001, 0.0], -1)]
    hashed = Target("hashed", None)
    assert rows(p, "svmlight", hashed)[0] == ({"1": 0.5, "3": 2.0}, 1)
    gz = tmp_path / "d.svm.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    f = ExampleFile(gz, "svmlight", one)
    assert [r.x for r in f] == [r[0] for r in rows(p, "svmlight", one)]
    assert f.position() == gz.stat().st_size


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("1 0:1", "feature index 0 is outside [1, 3]"),
        ("1 4:1", "feature index 4 is outside [1, 3]"),
        ("1 2:x", "feature 2: 'x' is not a number"),
        ("1 2:nan", "feature 2: value 'nan' is not finite"),
        ("1 +2:1", "'+2:1' is not index:value"),
        ("1 2:1:3", "feature 2: '1:3' is not a number"),
        ("1 qid:3 2:1", "qid: rows are ranking queries"),
    ],
)
def test_svmlight_errors_name_the_line(tmp_path: Path, line: str, problem: str) -> None:
    p = tmp_path / "bad.svm"
    p.write_text(f"1 1:1\n{line}\n")
    with pytest.raises(FileFormatError) as e:
        rows(p, "svmlight", Target("sparse", 3, 1, 1))
    assert str(e.value).startswith(f"{p}:2: ") and problem in str(e.value)


def test_csv(tmp_path: Path) -> None:
    p = tmp_path / "d.csv"
    p.write_text("age,job,id,label\n39,clerk,r1,yes\n50,,r2,no\n")
    hashed = rows(p, "csv", Target("hashed", None), id_column="id")
    assert hashed == [({"age": 39.0, "job": "clerk"}, "yes"), ({"age": 50.0}, "no")]
    assert [r.id for r in ExampleFile(p, "csv", Target("hashed", None), id_column="id")] == [
        "r1", "r2"]  # fmt: skip
    q = tmp_path / "n.csv"
    q.write_text("a,y,b\n0,1,2.5\n1.5,-1,0\n")
    assert rows(q, "csv", Target("dense", 2), label_column="y") == [
        ([0.0, 2.5], 1), ([1.5, 0.0], -1)]  # fmt: skip
    assert rows(q, "csv", Target("sparse", 2, model_base=1), label_column="y") == [
        ({"2": 2.5}, 1), ({"1": 1.5}, -1)]  # fmt: skip
    assert rows(q, "csv", Target("dense", 3), label_column=None)[0] == ([0.0, 1.0, 2.5], None)
    with pytest.raises(FileFormatError, match="2 feature columns, the model takes 3"):
        rows(q, "csv", Target("dense", 3), label_column="y")
    with pytest.raises(FileFormatError, match="no label column 'z'"):
        rows(q, "csv", Target("dense", 2), label_column="z")


def test_jsonl_lines_are_sent_as_written(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"x": {"a": 1}, "y": "+1"}\n\n{"id": "req-7", "y": 0}\n')
    got = list(ExampleFile(p, "jsonl", Target("hashed", None)))
    assert [r.example() for r in got] == [{"x": {"a": 1}, "y": "+1"}, {"id": "req-7", "y": 0}]
    p.write_text('{"x": [1, 2], "y": 1}\n[1]\n')
    with pytest.raises(FileFormatError, match=r"d\.jsonl:2: a line must be a JSON object"):
        list(ExampleFile(p, "jsonl", Target("dense", 2)))


def test_labels_and_formats() -> None:
    assert [parse_label(s) for s in ("+1", "-1", "1.0", "3", "1.5", "cat")] == [
        1, -1, 1, 3, "1.5", "cat"]  # fmt: skip
    assert guess_format(Path("a.csv.gz")) == "csv"
    assert guess_format(Path("x.jsonl")) == "jsonl"
    assert guess_format(Path("a9a.t")) == "svmlight"
