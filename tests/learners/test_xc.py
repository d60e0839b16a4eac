"""XC Repository text format reader and the P@k / nDCG@k metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.io.xc import read_xc
from learners.xml.metrics import ndcg_at_k, precision_at_k, xml_metrics
from tests.conftest import require_data


def _write(tmp_path, text):
    p = tmp_path / "data.txt"
    p.write_text(text)
    return p


def test_reads_labels_features_and_unlabelled_lines(tmp_path):
    p = _write(tmp_path, "3 5 4\n3,0 4:1 1:0.5\n 2:2.5\n1 0:1\n")
    X, Y, n_labels = read_xc(p)
    assert n_labels == 4 and X.dim == 5 and X.n_rows == 3
    assert [y.tolist() for y in Y] == [[0, 3], [], [1]]
    assert X.to_dense().tolist() == [
        [0.0, 0.5, 0.0, 0.0, 1.0],
        [0.0, 0.0, 2.5, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0, 0.0],
    ]
    assert X.indices.tolist() == [1, 4, 2, 0]  # rows come out sorted


def test_a_point_with_labels_but_no_features(tmp_path):
    X, Y, _ = read_xc(_write(tmp_path, "2 3 3\n2\n0 1:1\n"))
    assert [y.tolist() for y in Y] == [[2], [0]]
    assert X.indptr.tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    "text, message",
    [
        ("2 3\n0 1:1\n", r":1: header must be 'N D L'"),
        ("1 3 2\n5 1:1\n", r":2: label 5 is outside \[0, 2\)"),
        ("1 3 2\n0 7:1\n", r":2: feature '7:1' is outside \[0, 3\)"),
        ("1 3 2\n0 1:x\n", r":2: bad feature '1:x'"),
        ("1 3 2\n0,a 1:1\n", r":2: bad label list '0,a'"),
        ("1 3 2\n0 1:nan\n", r":2: feature '1:nan' is not finite"),
        ("3 3 2\n0 1:1\n", r"header says 3 points but the file has 1"),
    ],
)
def test_malformed_files_name_the_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_xc(_write(tmp_path, text))


def test_bibtex_files_have_the_published_shape():
    train = read_xc(require_data("bibtex", "bibtex_train.txt"))
    test = read_xc(require_data("bibtex", "bibtex_test.txt"))
    assert (train.X.n_rows, train.X.dim, train.n_labels) == (4880, 1836, 159)
    assert (test.X.n_rows, test.X.dim, test.n_labels) == (2515, 1836, 159)
    per_point = sum(len(y) for y in train.Y) / train.X.n_rows
    assert per_point == pytest.approx(2.3803, abs=1e-4)  # XC table: 2.40 = train+test (2.4019)
    assert np.all(train.X.values == 1.0)


# --------------------------------------------------------------------------- metrics


def _oracle(pred, Y, k):
    p, n = [], []
    for row, y in zip(pred, Y):
        y = set(y)
        gains = [1.0 if lab in y else 0.0 for lab in row[:k]]
        p.append(sum(gains) / k)
        dcg = sum(g / math.log2(j + 2) for j, g in enumerate(gains))
        ideal = sum(1 / math.log2(j + 2) for j in range(min(k, len(y))))
        n.append(dcg / ideal if ideal else 0.0)
    return sum(p) / len(p), sum(n) / len(n)


def test_metrics_match_the_xc_definitions():
    rng = np.random.default_rng(0)
    pred = np.array([rng.permutation(10)[:5] for _ in range(40)])
    pred[3, 3:] = -1  # padding never matches
    Y = [rng.choice(10, size=rng.integers(0, 5), replace=False).tolist() for _ in range(40)]
    for k in (1, 3, 5):
        p, n = _oracle(pred, Y, k)
        assert precision_at_k(pred, Y, k) == pytest.approx(p)
        assert ndcg_at_k(pred, Y, k) == pytest.approx(n)
    m = xml_metrics(pred, Y)
    assert sorted(m) == ["P@1", "P@3", "P@5", "nDCG@1", "nDCG@3", "nDCG@5"]


def test_metric_worked_example():
    pred = np.array([[7, 2, 9], [1, 2, 3]])
    Y = [[2], [1, 2, 3, 4]]
    assert precision_at_k(pred, Y, 3) == pytest.approx((1 / 3 + 1) / 2)
    # point 0: one relevant label at rank 2 -> (1/log2 3) / (1/log2 2); point 1 perfect
    assert ndcg_at_k(pred, Y, 3) == pytest.approx((1 / math.log2(3) + 1.0) / 2)


def test_metric_inputs_are_checked():
    with pytest.raises(ValueError, match="fewer than k=5"):
        precision_at_k(np.zeros((2, 3), dtype=int), [[0], [1]], 5)
    with pytest.raises(ValueError, match="2 predictions for 1 label sets"):
        ndcg_at_k(np.zeros((2, 3), dtype=int), [[0]], 1)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        precision_at_k(np.zeros((2, 3), dtype=int), [[0], [1]], 0)
