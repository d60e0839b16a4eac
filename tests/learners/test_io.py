"""Readers: SVMlight with qid and .query sidecars, idx, CSV."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from learners.io.idx import read_idx, read_labelled_csv
from learners.io.svmlight import group_sizes_from_qid, read_query_file, read_svmlight


def test_svmlight_with_qid(tmp_path) -> None:
    p = tmp_path / "d.txt"
    p.write_text("2 qid:1 1:0.5 3:1 # comment\n0 qid:1 2:1\n\n1 qid:7 1:2\n")
    d = read_svmlight(p)
    assert d.y.tolist() == [2.0, 0.0, 1.0]
    assert d.qid.tolist() == [1, 1, 7]
    assert d.group_sizes.tolist() == [2, 1]
    assert d.X.dim == 3
    assert d.X.to_dense().tolist() == [[0.5, 0, 1], [0, 1, 0], [2, 0, 0]]


def test_svmlight_query_sidecar(tmp_path) -> None:
    p, q = tmp_path / "d.txt", tmp_path / "d.txt.query"
    p.write_text("1 1:1\n0 2:1\n1 1:1\n")
    q.write_text("2\n1\n")
    d = read_svmlight(p, n_features=5, query_file=q)
    assert d.X.dim == 5
    assert d.group_sizes.tolist() == [2, 1]
    q.write_text("2\n2\n")
    with pytest.raises(ValueError, match="add up to 4"):
        read_svmlight(p, query_file=q)


def test_svmlight_errors_name_line(tmp_path) -> None:
    p = tmp_path / "bad.txt"
    p.write_text("1 1:1\n1 x:1\n")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        read_svmlight(p)
    p.write_text("1 0:1\n")
    with pytest.raises(ValueError, match="below the first index"):
        read_svmlight(p)


def test_query_file_errors(tmp_path) -> None:
    q = tmp_path / "q"
    q.write_text("3\n0\n")
    with pytest.raises(ValueError, match="positive"):
        read_query_file(q)


def test_group_sizes() -> None:
    assert group_sizes_from_qid(np.array([5, 5, 2, 2, 2, 5])).tolist() == [2, 3, 1]


def test_idx_round_trip(tmp_path) -> None:
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    raw = bytes([0, 0, 0x08, 3]) + b"".join(struct.pack(">I", s) for s in arr.shape) + arr.tobytes()
    p = tmp_path / "x-idx3-ubyte.gz"
    p.write_bytes(gzip.compress(raw))
    assert np.array_equal(read_idx(p), arr)
    p.write_bytes(gzip.compress(raw[:-1]))
    with pytest.raises(ValueError, match="expected"):
        read_idx(p)


def test_labelled_csv(tmp_path) -> None:
    p = tmp_path / "d.csv"
    p.write_text("3,0.1,0.2\n1,0.5,0.0\n")
    X, y = read_labelled_csv(p)
    assert y.tolist() == [3.0, 1.0] and X.shape == (2, 2)
