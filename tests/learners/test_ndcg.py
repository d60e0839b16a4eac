"""NDCG@k against hand-computed values (LightGBM's definition)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.ranking.ndcg import ndcg_at_k, ndcg_per_query


def test_hand_computed_single_query():
    # scores rank docs as [1, 0, 2] -> labels in ranked order [2, 3, 0]
    scores = np.array([0.5, 0.9, 0.1])
    labels = np.array([3, 2, 0])
    dcg = (2**2 - 1) / math.log2(2) + (2**3 - 1) / math.log2(3) + 0.0
    idcg = (2**3 - 1) / math.log2(2) + (2**2 - 1) / math.log2(3)
    assert ndcg_at_k(scores, labels, [3], 3) == pytest.approx(dcg / idcg, abs=1e-12)
    # @1: first ranked has gain 3, ideal 7
    assert ndcg_at_k(scores, labels, [3], 1) == pytest.approx(3 / 7, abs=1e-12)


def test_all_zero_labels_count_as_one_and_mean_over_queries():
    scores = np.array([0.1, 0.2, 0.3, 0.9, 0.8])
    labels = np.array([0, 0, 0, 1, 0])
    per = ndcg_per_query(scores, labels, [3, 2], 5)
    assert per.tolist() == [1.0, 1.0]
    per = ndcg_per_query(np.array([0.1, 0.2, 0.3, 0.1, 0.8]), labels, [3, 2], 1)
    assert per.tolist() == [1.0, 0.0]
    assert ndcg_at_k(np.array([0.1, 0.2, 0.3, 0.1, 0.8]), labels, [3, 2], 1) == 0.5


def test_k_larger_than_group_is_truncated():
    s = np.array([0.2, 0.1])
    y = np.array([0, 1])
    expected = (1 / math.log2(3)) / 1.0
    assert ndcg_at_k(s, y, [2], 10) == pytest.approx(expected, abs=1e-12)


def test_ties_are_broken_by_input_order():
    # equal scores: the stable sort keeps input order, so the relevant doc second
    y = np.array([0, 2])
    assert ndcg_at_k(np.zeros(2), y, [2], 1) == 0.0
    assert ndcg_at_k(np.zeros(2), y[::-1].copy(), [2], 1) == 1.0


def test_matches_lightgbm_metric_definition_on_random_data():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    s = rng.random(40)
    y = rng.integers(0, 4, 40)
    # one query, no ties: sklearn's ndcg_score with gains 2^r-1 is the same quantity
    ours = ndcg_at_k(s, y, [40], 5)
    theirs = sk.ndcg_score([2.0**y - 1], [s], k=5)
    assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"group_sizes": [2, 2]}, "add up to 4, but there are 3"),
        ({"group_sizes": [3, 0]}, "group size must be positive"),
        ({"k": 0}, "k must be a positive integer"),
        ({"labels": np.array([0, -1, 2])}, "labels"),
        ({"scores": np.array([0.0, np.nan, 1.0])}, "scores"),
    ],
)
def test_bad_input_is_a_clear_error(kw, msg):
    args = {"scores": np.zeros(3), "labels": np.array([0, 1, 2]), "group_sizes": [3], "k": 3}
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        ndcg_at_k(**args)
