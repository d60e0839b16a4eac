"""LambdaMART pieces: lambdas vs a pure-Python oracle, binning, a toy split, artifacts,
bad input, early stopping, and agreement with LightGBM itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError
from learners.features import Batch
from learners.ranking import _lambdamart_kernels as K
from learners.ranking._binning_kernels import greedy_find_bin
from learners.ranking.binning import ZERO_THRESHOLD, BinMapper
from learners.ranking.lambdamart import LambdaMART
from learners.ranking.tree import TreeParams, grow_tree
from tests.conftest import require_data

# ----------------------------------------------------------------------------- lambdas


def oracle_lambdas(s, y, sigma=1.0, trunc=30, norm=True):
    """LightGBM's LambdarankNDCG::GetGradientsForOneQuery, transcribed literally."""
    n = len(s)
    gain = lambda r: 2.0**r - 1.0  # noqa: E731
    disc = lambda i: 1.0 / math.log2(i + 2.0)  # noqa: E731
    ideal = sorted(y, reverse=True)
    maxdcg = sum(gain(ideal[i]) * disc(i) for i in range(min(trunc, n)))
    inv = 1.0 / maxdcg if maxdcg > 0 else 0.0
    order = sorted(range(n), key=lambda i: -s[i])  # Python's sort is stable
    best, worst = s[order[0]], s[order[-1]]
    lam, hes = [0.0] * n, [0.0] * n
    total = 0.0
    for i in range(min(n - 1, trunc)):
        for j in range(i + 1, n):
            a, b = order[i], order[j]
            if y[a] == y[b]:
                continue
            (hr, hi), (lr, lo) = ((i, a), (j, b)) if y[a] > y[b] else ((j, b), (i, a))
            delta = s[hi] - s[lo]
            dn = (gain(y[hi]) - gain(y[lo])) * abs(disc(hr) - disc(lr)) * inv
            if norm and best != worst:
                dn /= float(np.float32(0.01)) + abs(delta)  # LightGBM's 0.01f
            p = 1.0 / (1.0 + math.exp(sigma * delta))
            pl = -sigma * dn * p
            ph = sigma * sigma * dn * p * (1 - p)
            lam[lo] -= pl
            hes[lo] += ph
            lam[hi] += pl
            hes[hi] += ph
            total -= 2 * pl
    if norm and total > 0:
        f = math.log2(1 + total) / total
        lam = [v * f for v in lam]
        hes = [v * f for v in hes]
    return lam, hes


@pytest.mark.parametrize(
    ("scores", "trunc", "norm", "sigma"),
    [
        ([0.3, -1.2, 0.3, 2.0, 0.0, 0.7, -0.1], 30, True, 1.0),  # ties in scores
        ([0.0] * 7, 30, True, 1.0),  # first iteration: all equal
        ([0.3, -1.2, 0.5, 2.0, 0.1, 0.7, -0.1], 2, True, 1.0),  # truncation
        ([0.3, -1.2, 0.5, 2.0, 0.1, 0.7, -0.1], 30, False, 2.0),
    ],
)
def test_lambda_gradients_match_oracle(scores, trunc, norm, sigma):
    y = [2.0, 0.0, 1.0, 0.0, 3.0, 1.0, 0.0]
    s = np.array(scores)
    yy = np.array(y)
    off = np.array([0, 7], dtype=np.int64)
    grad, hess = np.zeros(7), np.zeros(7)
    imd = K.inverse_max_dcg(yy, off, trunc)
    K.lambda_gradients(s, yy, off, imd, sigma, trunc, norm, grad, hess, np.zeros(0), False)
    lam, hes = oracle_lambdas(scores, y, sigma, trunc, norm)
    np.testing.assert_allclose(grad, lam, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hess, hes, rtol=1e-12, atol=1e-15)
    assert grad.sum() == pytest.approx(0.0, abs=1e-12)  # pairwise: lambdas cancel
    # LightGBM's numerics (sigmoid table, float32 accumulation): close, float32-valued
    g32, h32 = np.zeros(7), np.zeros(7)
    table = K.sigmoid_table(sigma, 1 << 20)
    K.lambda_gradients(s, yy, off, imd, sigma, trunc, norm, g32, h32, table, True)
    np.testing.assert_allclose(g32, lam, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(h32, hes, rtol=2e-4, atol=1e-6)
    assert np.array_equal(g32.astype(np.float32).astype(np.float64), g32)


def test_sigmoid_table_is_lightgbms():
    t = K.sigmoid_table(2.0, 1 << 20)
    # entry i is 1 / (1 + exp(sigma * x_i)), x_i = i / factor - 25 / sigma
    x = 1000 / ((1 << 20) / (50 / 2.0)) - 25 / 2.0
    assert t[1000] == 1.0 / (1.0 + math.exp(2.0 * x))
    assert t[0] > 0.999 and t[-1] < 1e-10


def test_all_equal_labels_give_zero_gradients():
    off = np.array([0, 3, 5], dtype=np.int64)
    y = np.array([1.0, 1.0, 1.0, 0.0, 2.0])
    g, h = np.ones(5), np.ones(5)
    imd = K.inverse_max_dcg(y, off, 30)
    K.lambda_gradients(np.zeros(5), y, off, imd, 1.0, 30, True, g, h, np.zeros(0), False)
    assert g[:3].tolist() == [0.0, 0.0, 0.0] and h[:3].tolist() == [0.0, 0.0, 0.0]
    assert g[4] < 0 < g[3]  # the relevant doc is pushed up (gradient of the loss < 0)


# ----------------------------------------------------------------------------- binning


def test_greedy_find_bin_few_values_merges_small_bins():
    d = np.array([1.0, 2.0, 3.0, 4.0])
    c = np.array([5, 1, 1, 5], dtype=np.int64)
    # bins close once they hold 3 samples: {1}, {2,3,4}
    up = lambda v: float(np.nextafter(v, np.inf))  # noqa: E731  LightGBM's GetDoubleUpperBound
    assert greedy_find_bin(d, c, 255, 12, 3).tolist() == [up(1.5), np.inf]
    assert greedy_find_bin(d, c, 255, 12, 1).tolist() == [up(1.5), up(2.5), up(3.5), np.inf]


def test_greedy_find_bin_many_values_respects_max_bin():
    d = np.arange(1000, dtype=np.float64)
    c = np.ones(1000, dtype=np.int64)
    b = greedy_find_bin(d, c, 16, 1000, 3)
    assert len(b) <= 16 and b[-1] == np.inf
    assert np.all(np.diff(b[:-1]) > 0)
    # roughly equal-frequency bins
    counts = np.diff(np.concatenate([[0], np.searchsorted(d, b[:-1], "right"), [1000]]))
    assert counts.max() <= 2 * counts.min() + 3


def test_bin_mapper_zero_has_its_own_bin_and_negatives_work():
    X = np.array([[-2.0], [-1.0], [0.0], [0.0], [1.0], [3.0]])
    bm = BinMapper(max_bin=255, min_data_in_bin=1).fit(Batch.from_dense(X))
    up = float(np.nextafter(-1.5, np.inf)), float(np.nextafter(2.0, np.inf))
    assert bm.bounds_[0].tolist() == [up[0], -ZERO_THRESHOLD, ZERO_THRESHOLD, up[1], np.inf]
    assert ZERO_THRESHOLD == float(np.float32(1e-35))  # LightGBM's 1e-35f
    rows = bm.transform(Batch.from_dense(X))
    dense = np.full(6, int(bm.default_bin_[0]))
    for r in range(6):
        for t in range(rows.indptr[r], rows.indptr[r + 1]):
            dense[r] = rows.bin[t]
    assert dense.tolist() == [0, 1, 2, 2, 3, 4]
    assert bm.default_bin_[0] == 2  # zero is the most frequent bin: left implicit


def test_pre_filter_drops_features_that_cannot_leave_min_data_on_both_sides():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.random(100), np.r_[np.ones(7), np.zeros(93)]])
    assert BinMapper(min_data_in_bin=1).fit(Batch.from_dense(X)).used_features_.tolist() == [0, 1]
    bm = BinMapper(min_data_in_bin=1, min_split_data=10).fit(Batch.from_dense(X))
    assert bm.used_features_.tolist() == [0]  # 7 non-zeros: no split with 10 on each side


def test_bin_mapper_drops_constant_features_and_handles_dense_nonzero_default():
    X = np.column_stack([np.zeros(10), np.full(10, 5.0), np.r_[np.ones(8) * 2, 0, 0]])
    bm = BinMapper(min_data_in_bin=1).fit(Batch.from_dense(X))
    assert bm.used_features_.tolist() == [2]  # column 0 all zero, column 1 constant
    rows = bm.transform(Batch.from_dense(X))
    # the default bin is the value 2.0's bin; the two zeros are stored explicitly
    assert rows.indptr[-1] == 2 and rows.bin.tolist() == [int(bm.zero_bin_[0])] * 2


# ----------------------------------------------------------------------------- tree


def test_tree_finds_the_obvious_split():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.random(200), rng.random(200)])
    grad = np.where(X[:, 1] > 0.6, -1.0, 1.0)  # feature 1 separates the gradients
    hess = np.ones(200)
    bm = BinMapper(min_data_in_bin=1).fit(Batch.from_dense(X))
    data = bm.transform(Batch.from_dense(X))
    p = TreeParams(2, 5, 1e-3, 0.0, 1.0, False)
    t = grow_tree(np.arange(200), data, bm, grad, hess, p)
    assert t.n_leaves == 2
    assert bm.used_features_[t.feature[0]] == 1
    thr = bm.threshold(int(t.feature[0]), int(t.bin[0]))
    assert np.max(X[X[:, 1] <= 0.6, 1]) <= thr < np.min(X[X[:, 1] > 0.6, 1])
    # Newton leaf values: -sum g / sum h = +1 left, -1 right
    assert t.leaf_value.tolist() == [-1.0, 1.0]


def test_min_data_in_leaf_blocks_splits():
    X = np.arange(20, dtype=np.float64)[:, None] + 1
    grad = np.where(X[:, 0] > 18, -1.0, 1.0)
    bm = BinMapper(min_data_in_bin=1).fit(Batch.from_dense(X))
    data = bm.transform(Batch.from_dense(X))
    for md, leaves in ((1, 2), (5, 2), (11, 1)):
        t = grow_tree(
            np.arange(20), data, bm, grad, np.ones(20), TreeParams(4, md, 0.0, 0.0, 1.0, False)
        )
        assert t.n_leaves >= leaves if md < 11 else t.n_leaves == 1
        if md == 5:  # the best allowed split keeps 5 rows on the right
            assert np.count_nonzero(t.leaf_value < 0) >= 1


# ----------------------------------------------------------------------------- model


def _toy(seed=0, n_q=30):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 15, n_q)
    n = int(sizes.sum())
    X = rng.random((n, 6)) * (rng.random((n, 6)) < 0.7)
    y = np.clip((X[:, 0] * 2 + X[:, 3] + rng.normal(0, 0.3, n)).round(), 0, 4)
    return X, y, sizes


def test_round_trip_identical_scores_and_batch_equals_dense(tmp_path):
    X, y, g = _toy()
    m = LambdaMART(n_estimators=15, min_data_in_leaf=5, bagging_fraction=0.8, bagging_freq=1)
    m.fit(Batch.from_dense(X), y, g)
    m.meta_["index_base"] = 1
    m.save(tmp_path / "m.lsart")
    m2 = LambdaMART.load(tmp_path / "m.lsart")
    np.testing.assert_array_equal(m.predict(X), m2.predict(X))
    np.testing.assert_array_equal(m.predict(Batch.from_dense(X)), m.predict(X))
    assert m2.meta_["index_base"] == 1 and m2.n_features_ == 6
    from learners.registry import load_model

    assert isinstance(load_model(m.to_bytes()), LambdaMART)


def test_corrupted_truncated_and_malformed_artifacts_are_refused():
    X, y, g = _toy()
    m = LambdaMART(n_estimators=3, min_data_in_leaf=5).fit(X, y, g)
    blob = m.to_bytes()
    with pytest.raises(ArtifactError, match="truncated"):
        LambdaMART.from_bytes(blob[:-10])
    bad = bytearray(blob)
    bad[len(bad) // 2] ^= 0x01
    with pytest.raises(ArtifactError, match="checksum"):
        LambdaMART.from_bytes(bytes(bad))
    art = artifact.loads(blob)
    arrays = dict(art.arrays)
    left = arrays["left"].copy()
    left[1] = 0  # a cycle back to the root
    arrays["left"] = left
    with pytest.raises(ArtifactError, match="malformed trees"):
        LambdaMART.from_bytes(artifact.dumps("lambdamart", art.params, arrays, art.meta))
    with pytest.raises(ArtifactError, match="expected 'lambdamart'"):
        LambdaMART.from_bytes(artifact.dumps("ranksvm", {}, {}))


def test_early_stopping_and_progress_callback():
    X, y, g = _toy(1, 40)
    Xv, yv, gv = _toy(2, 20)
    seen = []
    m = LambdaMART(n_estimators=200, learning_rate=0.5, min_data_in_leaf=5, early_stopping_rounds=5)
    m.fit(X, y, g, valid=(Xv, yv, gv), progress=lambda it, met: seen.append((it, met["ndcg@10"])))
    assert len(seen) < 200  # it stopped
    best = int(np.argmax([v for _, v in seen])) + 1
    assert m.n_trees_ == best == m.best_iteration_
    assert len(seen) == best + 5
    assert set(m.evals_result_[0]) == {"ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10"}


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"y": "frac"}, r"y\[0\]: relevance must be an integer"),
        ({"g": [5]}, "group sizes add up to 5"),
        ({"X": np.zeros(3)}, "X: must be a Batch or a 2-d array"),
    ],
)
def test_bad_training_input(kw, msg):
    X, y, g = _toy()
    args = {"X": X, "y": y, "g": g}
    if kw.get("y") == "frac":
        y = y.copy()
        y[0] = 0.5
        kw = {"y": y}
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        LambdaMART(n_estimators=2).fit(args["X"], args["y"], args["g"])


def test_bad_hyperparameters_named():
    # validated by fit (scikit-learn's rule: __init__ only stores), and by check_params
    X, y, g = _toy()
    with pytest.raises(ValueError, match="num_leaves"):
        LambdaMART(num_leaves=1).fit(X, y, g)
    with pytest.raises(ValueError, match="bagging_fraction"):
        LambdaMART(bagging_fraction=0.0).check_params()


def test_predict_wrong_width_is_an_error():
    X, y, g = _toy()
    m = LambdaMART(n_estimators=2, min_data_in_leaf=5).fit(X, y, g)
    with pytest.raises(ValueError, match="6 columns"):
        m.predict(np.zeros((2, 5)))


@pytest.mark.parametrize("num_leaves", [8, 80])
def test_predict_refuses_non_finite_values_as_fit_does(num_leaves):
    # fit refuses NaN; predict did not, and routed it left with <= 64 leaves (QuickScorer)
    # and right with more (traversal): the same row scored differently by tree size.
    X, y, g = _toy(3, 60)
    m = LambdaMART(n_estimators=3, num_leaves=num_leaves, min_data_in_leaf=1, min_data_in_bin=1)
    m.fit(X, y, g)
    for bad in (np.nan, np.inf):
        Xb = X[:4].copy()
        Xb[2, 0] = bad
        with pytest.raises(ValueError, match=r"X\[2\]: value is not finite"):
            m.predict(Xb)
        csr = Batch(np.array([0, 1, 2]), np.array([0, 0]), np.array([1.0, bad]), 6)
        with pytest.raises(ValueError, match=r"X\[1\]: value is not finite"):
            m.predict(csr)


@pytest.mark.parametrize("bagging", [False, True])
def test_agrees_with_lightgbm(bagging):
    lgb = pytest.importorskip("lightgbm")
    from learners.io.svmlight import read_svmlight

    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    kw = {"bagging_fraction": 0.9, "bagging_freq": 1} if bagging else {}
    p = {"objective": "lambdarank", "num_leaves": 31, "learning_rate": 0.1, "min_data_in_leaf": 50}
    p.update(min_sum_hessian_in_leaf=5.0, num_threads=1, verbose=-1, seed=0, **kw)
    ds = lgb.Dataset(tr.X.to_dense(), tr.y, group=tr.group_sizes)
    ref = lgb.train(p, ds, num_boost_round=10).predict(te.X.to_dense())
    m = LambdaMART(n_estimators=10, min_data_in_leaf=50, min_sum_hessian_in_leaf=5, seed=0, **kw)
    ours = m.fit(tr.X, tr.y, tr.group_sizes).predict(te.X)
    # Same numerics, same bags, same splits: the scores agree to float rounding, except
    # where two features tie exactly on the training rows of a node (same partition,
    # gains equal up to the last bit): the tie may break the other way, which moves a
    # test document that the two features separate (2 of 768 here, without bagging).
    close = np.abs(ours - ref) <= 1e-9
    assert close.mean() >= (1.0 if bagging else 0.99)
    from learners.ranking.ndcg import ndcg_at_k

    for k in (1, 3, 5, 10):
        a = ndcg_at_k(ours, te.y, te.group_sizes, k)
        assert a == pytest.approx(ndcg_at_k(ref, te.y, te.group_sizes, k), abs=0.005)


@pytest.mark.parametrize("num_leaves", [31, 80])
def test_quickscorer_scoring_equals_tree_traversal(num_leaves):
    # <= 64 leaves: exit-leaf bitmasks; 80 leaves: the traversal fallback is used
    X, y, g = _toy(3, 60)
    m = LambdaMART(n_estimators=6, num_leaves=num_leaves, min_data_in_leaf=1, min_data_in_bin=1)
    m.fit(X, y, g)
    leaves = np.diff(m.trees_["leaf_off"])
    assert (m._elim is None) == (leaves.max() > 64) == (num_leaves > 64)
    fast_dense, fast_csr = m.predict(X), m.predict(Batch.from_dense(X))
    # reference: walk each tree from the root, in Python
    T = m.trees_
    ref = np.zeros(X.shape[0])
    for t in range(m.n_trees_):
        a, la = T["node_off"][t], T["leaf_off"][t]
        for i in range(X.shape[0]):
            node = 0 if T["node_off"][t + 1] > a else ~0
            while node >= 0:
                k = a + node
                node = T["left"][k] if X[i, T["feature"][k]] <= T["threshold"][k] else T["right"][k]
            ref[i] += T["leaf_value"][la + ~node]
    np.testing.assert_allclose(fast_dense, ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(fast_dense, fast_csr)
