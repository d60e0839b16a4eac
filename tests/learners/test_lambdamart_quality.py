"""LambdaMART on LightGBM's lambdarank example with LightGBM's example configuration.

LightGBM 4.7.0 (seed 0) reaches NDCG@1/3/5 = 0.6038 / 0.6299 / 0.6696 on rank.test
(shared/data/REFERENCE_RESULTS.md); the floors are those minus 0.01. Our LambdaMART
reproduces LightGBM's numerics and bagging sampler, so it reaches the same figures.
"""

from __future__ import annotations

import numpy as np
import pytest

from learners.io.svmlight import read_svmlight
from learners.ranking.lambdamart import LambdaMART
from learners.ranking.ndcg import ndcg_at_k
from tests.conftest import require_data

FLOORS = {1: 0.6038 - 0.01, 3: 0.6299 - 0.01, 5: 0.6696 - 0.01}
EXAMPLE_CONFIG = {
    "n_estimators": 100, "learning_rate": 0.1, "num_leaves": 31, "min_data_in_leaf": 50,
    "min_sum_hessian_in_leaf": 5.0, "bagging_fraction": 0.9, "bagging_freq": 1,
}  # fmt: skip


def _files():
    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    return tr, te


def _ndcgs(seed: int) -> dict[int, float]:
    tr, te = _files()
    m = LambdaMART(**EXAMPLE_CONFIG, seed=seed).fit(tr.X, tr.y, tr.group_sizes)
    s = m.predict(te.X)
    return {k: ndcg_at_k(s, te.y, te.group_sizes, k) for k in (1, 3, 5)}


def test_lightgbm_example_configuration_seed0():
    got = _ndcgs(0)
    # measured: 0.6038 / 0.6299 / 0.6696, LightGBM's own seed-0 figures
    assert got[1] == pytest.approx(0.6038, abs=0.003)
    assert got[3] == pytest.approx(0.6299, abs=0.003)
    assert got[5] == pytest.approx(0.6696, abs=0.003)
    for k, floor in FLOORS.items():
        assert got[k] >= floor


@pytest.mark.slow
def test_every_seed_matches_lightgbm_and_the_mean():
    """Seeds 0-4: the same NDCG as LightGBM 4.7 run here with the same parameters.

    NDCG@1 on 50 test queries swings by +-0.04 with the bagging seed, for LightGBM as
    for us; the mean over seeds (0.5813 / 0.6253 / 0.6683 for both) is below LightGBM's
    seed-0 figure at @1, so the floors are asserted on seed 0 only (the reference run).
    """
    lgb = pytest.importorskip("lightgbm")
    tr, te = _files()
    runs = []
    for seed in range(5):
        ours = _ndcgs(seed)
        p = {"objective": "lambdarank", "num_leaves": 31, "learning_rate": 0.1}
        p.update(min_data_in_leaf=50, min_sum_hessian_in_leaf=5.0, bagging_fraction=0.9)
        p.update(bagging_freq=1, seed=seed, num_threads=1, verbose=-1)
        booster = lgb.train(p, lgb.Dataset(tr.X.to_dense(), tr.y, group=tr.group_sizes), 100)
        s = booster.predict(te.X.to_dense())
        for k in (1, 3, 5):
            assert ours[k] == pytest.approx(ndcg_at_k(s, te.y, te.group_sizes, k), abs=1e-6)
        runs.append(ours)
    mean = {k: float(np.mean([r[k] for r in runs])) for k in (1, 3, 5)}
    assert mean[1] == pytest.approx(0.5813, abs=0.001)
    assert mean[3] == pytest.approx(0.6253, abs=0.001)
    assert mean[5] == pytest.approx(0.6683, abs=0.001)
