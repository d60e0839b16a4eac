"""Query groups of ranking files (``service.client.query_files``) and the packing of
queries into requests (``QueryPacker``): what ``learnserve update``/``predict`` send a
ranker, read as ``learnserve train lambdamart`` reads the same files."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from learners.io.svmlight import read_svmlight
from service.client._core import QueryPacker, pack_queries
from service.client.files import ExampleFile, FileFormatError, Row, Target
from service.client.query_files import (
    group_rows,
    query_of_line,
    read_query_sizes,
    sidecar_beside,
)

ONE = Target("sparse", 3, model_base=1, file_base=1)
LETOR = "2 qid:10 1:1 # a\n0 qid:10 2:0.5\n\n1 qid:4 3:1\n1 qid:10 1:2\n"


def queries(path: Path, sizes: list[int] | None = None) -> list[tuple[object, list, list]]:
    rows = ExampleFile(path, "svmlight", ONE, queries=True)
    return [(q.qid, q.xs, q.relevance) for q in group_rows(rows, sizes, "s.query")]


def test_qid_groups_are_consecutive_runs_as_train_reads_them(tmp_path: Path) -> None:
    p = tmp_path / "r.letor"
    p.write_text(LETOR)
    got = queries(p)
    assert got == [
        (10, [{"1": 1.0}, {"2": 0.5}], [2, 0]),
        (4, [{"3": 1.0}], [1]),
        (10, [{"1": 2.0}], [1]),  # qid 10 again after 4: another query
    ]
    # the learners' reader (train lambdamart) groups the same rows the same way
    assert read_svmlight(p).group_sizes.tolist() == [len(xs) for _, xs, _ in got]


def test_sizes_win_and_must_match(tmp_path: Path) -> None:
    p = tmp_path / "r.letor"
    p.write_text(LETOR)
    assert [len(xs) for _, xs, _ in queries(p, [1, 3])] == [1, 3]
    with pytest.raises(FileFormatError, match=r"add up to 5 rows, but the file ends after 4"):
        queries(p, [2, 3])
    with pytest.raises(FileFormatError, match=r"r.letor:5: the file has more rows than"):
        queries(p, [1, 2])
    assert ExampleFile(p, "svmlight", ONE).count_rows() == 4


def test_rows_without_qid_and_bad_relevance(tmp_path: Path) -> None:
    p = tmp_path / "r.svm"
    p.write_text("1 qid:1 1:1\n0 2:1\n")
    with pytest.raises(FileFormatError, match=r"r.svm:2: no qid"):
        queries(p)
    p.write_text("high qid:1 1:1\n")
    with pytest.raises(FileFormatError, match=r"r.svm:1: relevance 'high' is not a number"):
        queries(p)
    p.write_text("0.5 qid:q7 1:1\n")
    assert queries(p) == [("q7", [{"1": 1.0}], [0.5])]
    p.write_text("1 qid: 1:1\n")
    with pytest.raises(FileFormatError, match=r"r.svm:1: qid: without a value"):
        queries(p)


def test_query_files(tmp_path: Path) -> None:
    data = tmp_path / "rank.train"
    data.write_text("1 1:1\n")
    assert sidecar_beside(data) is None
    (tmp_path / "rank.train.query").write_text("1\n\n")
    assert sidecar_beside(data) == tmp_path / "rank.train.query"
    gz = tmp_path / "rank.train.gz"
    gz.write_bytes(gzip.compress(b"1 1:1\n"))
    assert sidecar_beside(gz) == tmp_path / "rank.train.query"
    assert read_query_sizes(tmp_path / "rank.train.query") == [1]
    for text, problem in [("0\n", "'0' is not a query size"), ("-2\n", "'-2' is not"),
                          ("1.5\n", "'1.5' is not"), ("\n", "no query sizes")]:  # fmt: skip
        (tmp_path / "bad.query").write_text(text)
        with pytest.raises(FileFormatError, match=problem):
            read_query_sizes(tmp_path / "bad.query")


def test_json_line_queries(tmp_path: Path) -> None:
    p = tmp_path / "q.jsonl"
    p.write_text('{"qid": 1, "items": [{"x": [1], "relevance": 2}], "weight": 2}\n'
                 '{"items": [{"x": [0]}]}\n{"x": [1]}\n')  # fmt: skip
    rows = list(ExampleFile(p, "jsonl", Target("dense", 1)))
    a, b = query_of_line(rows[0]), query_of_line(rows[1])
    assert a.update_body() == rows[0].obj  # sent as written, weight included
    assert a.rank_body() == {"qid": 1, "items": [{"x": [1]}]}
    assert b.relevance is None and b.rank_body() == {"items": [{"x": [0]}]}
    unlabelled = next(group_rows([Row({"1": 1.0}, None, where="f.csv:2", qid=1)], None, ""))
    assert unlabelled.rank_body() == {"qid": 1, "items": [{"x": {"1": 1.0}}]}
    with pytest.raises(FileFormatError, match=r"f.csv:2: no relevance labels"):
        unlabelled.update_body()
    with pytest.raises(FileFormatError, match=r"q.jsonl:3: a ranker's JSON line is a query"):
        query_of_line(rows[2])


def test_packing_never_splits_a_query() -> None:
    qs = [{"items": [0] * n} for n in (3, 4, 2, 9, 1, 1)]
    got = [[len(q["items"]) for q in b] for b in pack_queries(qs, 100, 6)]
    assert got == [[3], [4, 2], [9], [1, 1]]  # the 9-item query goes alone
    assert [len(b) for b in pack_queries(qs, 2, None)] == [2, 2, 2]
    packer = QueryPacker(5, 10, size=len)
    assert packer.add([1, 2]) is None and packer.flush() == [[1, 2]] and packer.flush() is None
    with pytest.raises(ValueError, match="max_items must be >= 1"):
        QueryPacker(1, 0)


def test_binary_files_are_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "t10k-images-idx3-ubyte"
    p.write_bytes(bytes([0, 0, 8, 3]) + np.arange(200, 256, dtype=np.uint8).tobytes())
    with pytest.raises(FileFormatError, match=r"not a svmlight text file .* \(llsvm\)"):
        list(ExampleFile(p, "svmlight", ONE))
