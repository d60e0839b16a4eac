"""RankSVM: update vs a pure-Python oracle of the Pegasos equations, batch == loop,
round trip, bad input, determinism, and quality on LightGBM's lambdarank example."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.artifact import ArtifactError
from learners.features import Batch, FeatureError
from learners.ranking.ranksvm import RankSVM, make_ranker
from tests.conftest import require_data

M64 = (1 << 64) - 1


# ----------------------------------------------------------------------------- oracle


def _splitmix(seed: int, counter: int) -> int:
    z = (seed * 0x9E3779B97F4A7C15 + counter * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Oracle:
    """Pegasos pairwise RankSVM with an explicit dense w (no scale trick)."""

    def __init__(self, dim, lam, ppg, projection, seed):
        self.w = [0.0] * dim
        self.lam, self.ppg, self.proj, self.seed = lam, ppg, projection, seed
        self.t = 0
        self.ctr = 0

    def draw(self, m):
        u = _splitmix(self.seed, self.ctr)
        self.ctr += 1
        return ((u >> 32) * m) >> 32

    def step(self, xa, xb, y):
        self.t += 1
        eta = 1.0 / (self.lam * self.t)
        d = [a - b for a, b in zip(xa, xb)]
        margin = y * sum(wi * di for wi, di in zip(self.w, d))
        self.w = [(1 - eta * self.lam) * wi for wi in self.w]
        if margin < 1:
            self.w = [wi + eta * y * di for wi, di in zip(self.w, d)]
        if self.proj:
            norm = math.sqrt(sum(wi * wi for wi in self.w))
            if norm > 1 / math.sqrt(self.lam):
                self.w = [wi * (1 / math.sqrt(self.lam)) / norm for wi in self.w]

    def group(self, X, rel):
        n = len(rel)
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rel[i] != rel[j]]
        if not pairs:
            return
        if self.ppg is None or len(pairs) <= self.ppg:
            chosen = pairs
        else:
            chosen = []
            for _ in range(self.ppg):
                a = self.draw(n)
                others = [j for j in range(n) if rel[j] != rel[a]]
                chosen.append((a, others[self.draw(len(others))]))
        for a, b in chosen:
            self.step(X[a], X[b], 1.0 if rel[a] > rel[b] else -1.0)


def _data(seed=0, n_groups=6, dim=8):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 9, n_groups)
    n = int(sizes.sum())
    X = rng.normal(size=(n, dim)) * (rng.random((n, dim)) < 0.6)
    rel = rng.integers(0, 4, n)
    return X, rel, sizes


@pytest.mark.parametrize(
    ("lam", "ppg", "proj"),
    [(0.1, None, False), (0.05, 3, True), (0.5, 5, False), (1e-3, None, True)],
)
def test_update_matches_pure_python_oracle(lam, ppg, proj):
    X, rel, sizes = _data()
    m = RankSVM(X.shape[1], lam=lam, pairs_per_group=ppg, projection=proj, seed=7)
    o = Oracle(X.shape[1], lam, ppg, proj, 7)
    m.update(Batch.from_dense(X), rel, groups=sizes)
    start = 0
    for s in sizes:
        o.group(X[start : start + s].tolist(), rel[start : start + s].tolist())
        start += s
    assert m.counters_[0] == o.t
    np.testing.assert_allclose(m.coef_, o.w, rtol=1e-9, atol=1e-12)


def test_scale_renormalisation_keeps_the_oracle_result():
    # w = s * v with s just above the renormalisation threshold: the next shrink folds s into v
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2, 3))
    w0 = rng.normal(size=3)
    m = RankSVM(3, lam=1.0, pairs_per_group=None, seed=0)
    m.v_[:] = w0 / 1.01e-9
    m.state_[:] = [1.01e-9, float(w0 @ w0)]
    m.counters_[0] = 10
    o = Oracle(3, 1.0, None, False, 0)
    o.w, o.t = w0.tolist(), 10
    for _ in range(5):
        m.update(Batch.from_dense(X), [1, 0])
        o.group(X.tolist(), [1, 0])
    assert m.state_[0] > 1e-3  # renormalised
    np.testing.assert_allclose(m.coef_, o.w, rtol=1e-9)
    assert m.state_[1] == pytest.approx(float(np.dot(o.w, o.w)), rel=1e-9)


def test_batch_equals_loop_of_single_groups_bit_exact():
    X, rel, sizes = _data(seed=2, n_groups=10)
    a = RankSVM(X.shape[1], lam=0.01, pairs_per_group=4, seed=3)
    b = RankSVM(X.shape[1], lam=0.01, pairs_per_group=4, seed=3)
    ra = a.update(Batch.from_dense(X), rel, groups=sizes)
    start, metric, updates = 0, 0.0, 0
    for s in sizes:
        r = b.update(Batch.from_dense(X[start : start + s]), rel[start : start + s])
        metric += r.metric_sum
        updates += r.updates
        start += s
    assert a.state_digest() == b.state_digest()
    assert np.array_equal(a.v_, b.v_)
    assert ra.metric_sum == metric and ra.updates == updates and ra.n_groups == len(sizes)


def test_progressive_metric_is_pre_update_ndcg():
    from learners.ranking.ndcg import ndcg_at_k

    X, rel, _sizes = _data(seed=4, n_groups=1)
    m = RankSVM(X.shape[1], lam=0.1, seed=0)
    m.update(Batch.from_dense(X), rel)
    before = m.decision_function(Batch.from_dense(X))
    r = m.update(Batch.from_dense(X), rel)
    assert r.metric_sum == pytest.approx(ndcg_at_k(before, rel, [len(rel)], 10), abs=1e-12)
    assert r.applied == len(rel) and r.n_groups == 1


def test_round_trip_then_continue_is_bit_exact():
    X, rel, sizes = _data(seed=5, n_groups=8)
    B = Batch.from_dense(X)
    a = RankSVM(X.shape[1], lam=0.02, pairs_per_group=3, projection=True, seed=11)
    a.update(B, rel, groups=sizes)
    b = RankSVM.from_bytes(a.to_bytes())
    assert b.state_digest() == a.state_digest()
    np.testing.assert_array_equal(a.decision_function(B), b.decision_function(B))
    a.update(B, rel, groups=sizes)
    b.update(B, rel, groups=sizes)
    assert b.state_digest() == a.state_digest()


def test_large_dimension_and_sparse_artifact():
    m = RankSVM(2**20, lam=0.01, seed=0)
    X = Batch.from_csr([0, 2, 4], [5, 1_000_000, 7, 1_000_000], [1.0, 2.0, 0.5, 1.0], 2**20)
    m.update(X, [1, 0])
    blob = m.to_bytes()
    assert len(blob) < 10_000  # only the touched coordinates are stored
    assert RankSVM.from_bytes(blob).state_digest() == m.state_digest()


def test_determinism_with_seed_and_seed_matters():
    X, rel, sizes = _data(seed=6, n_groups=6)
    B = Batch.from_dense(X)
    a, b, c = (RankSVM(X.shape[1], lam=0.05, pairs_per_group=2, seed=s) for s in (1, 1, 2))
    for m in (a, b, c):
        m.update(B, rel, groups=sizes)
    assert a.state_digest() == b.state_digest()
    assert a.state_digest() != c.state_digest()


@pytest.mark.parametrize(
    ("rel", "groups", "where"),
    [
        ([1, 0, float("nan"), 2], [4], "relevance[2]"),
        ([1, 0, float("-inf"), 2], [4], "relevance[2]"),
        ([1, 0, 10**400, 2], [4], "relevance[2]"),
        ([1, 0, "2", 2], [4], "relevance[2]"),
        ([1, 0, True, 2], [4], "relevance[2]"),
        ([1, 0, 2], [4], "relevance"),
        ([1, 0, 1, 2], [3, 2], "groups"),
        ([1, 0, 1, 2], [4, 0], "groups"),
    ],
)
def test_bad_input_rejects_whole_batch_unchanged(rel, groups, where):
    X, r0, sizes = _data(seed=7, n_groups=2)
    m = RankSVM(X.shape[1], lam=0.1, seed=0)
    m.update(Batch.from_dense(X), r0, groups=sizes)
    digest = m.state_digest()
    B = Batch.from_dense(np.ones((4, X.shape[1])))
    with pytest.raises(FeatureError) as ei:
        m.update(B, rel, groups=groups)
    assert ei.value.location.startswith(where)
    assert m.state_digest() == digest


def test_bad_batch_dimension_and_values():
    m = RankSVM(4)
    with pytest.raises(FeatureError, match="dimension 3"):
        m.update(Batch.from_dense(np.ones((2, 3))), [1, 0])
    bad = Batch(np.array([0, 1, 2]), np.array([0, 1]), np.array([1.0, np.inf]), 4)
    with pytest.raises(FeatureError, match=r"examples\[1\]"):
        m.update(bad, [1, 0])
    assert m.counters_[0] == 0


def test_make_ranker_validates_params():
    assert make_ranker(5, {"lam": 0.5, "pairs_per_group": None}).lam == 0.5
    with pytest.raises(ValueError, match=r"^params\.lam: must be > 0"):
        make_ranker(5, {"lam": 0})
    with pytest.raises(ValueError, match=r"params\.pairs_per_group"):
        make_ranker(5, {"pairs_per_group": 0})
    with pytest.raises(ValueError, match=r"params\.bogus: unknown parameter"):
        make_ranker(5, {"bogus": 1})


def test_registry_loads_ranksvm_and_rank_orders_best_first():
    from learners.registry import load_model

    m = RankSVM(2, lam=0.1, pairs_per_group=None)
    X = Batch.from_dense(np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]))
    for _ in range(5):
        m.update(X, [2, 0, 1])
    loaded = load_model(m.to_bytes())
    assert isinstance(loaded, RankSVM) and loaded.state_digest() == m.state_digest()
    assert [o.tolist() for o in loaded.rank(X, [3])] == [[0, 2, 1]]


def test_partial_fit_is_one_update_per_qid_run_and_get_params():
    X, rel, sizes = _data(seed=8, n_groups=4)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    a = RankSVM(X.shape[1], lam=0.05, seed=2).partial_fit(X, rel, qid)
    b = RankSVM(X.shape[1], lam=0.05, seed=2)
    b.update(Batch.from_dense(X), rel, groups=sizes)
    assert a.state_digest() == b.state_digest()
    assert a.get_params() == {"dim": X.shape[1], "lam": 0.05, "pairs_per_group": 100,
                              "projection": False, "seed": 2}  # fmt: skip
    assert RankSVM(**a.get_params()).params == a.params


def test_corrupted_artifact_refused():
    blob = bytearray(RankSVM(3).to_bytes())
    blob[-40] ^= 0xFF
    with pytest.raises(ArtifactError):
        RankSVM.from_bytes(bytes(blob))


def test_quality_on_lightgbm_lambdarank():
    from learners.io.svmlight import read_svmlight
    from learners.ranking.ndcg import ndcg_at_k

    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    m = RankSVM(300, lam=0.01, pairs_per_group=100, seed=0).fit(tr.X, tr.y, tr.qid, n_epochs=5)
    ndcg10 = ndcg_at_k(m.predict(te.X), te.y, te.group_sizes, 10)
    random = np.mean(
        [
            ndcg_at_k(np.random.default_rng(s).random(te.y.shape[0]), te.y, te.group_sizes, 10)
            for s in range(20)
        ]
    )
    assert random < 0.60
    assert ndcg10 == pytest.approx(0.7204, abs=0.005)
    assert ndcg10 >= random + 0.10


def test_relevance_is_any_finite_real_only_its_order_counts():
    """Pairs read only which item of a pair is more relevant: a strictly increasing
    transform of the relevance (here 25..346-like reals, negatives) learns the same."""
    X, rel, sizes = _data(seed=8, n_groups=6)
    B = Batch.from_dense(X)
    a, b = (RankSVM(X.shape[1], lam=0.05, pairs_per_group=3, seed=2) for _ in range(2))
    a.update(B, rel, groups=sizes)
    b.update(B, 41.5 * np.asarray(rel, dtype=float) - 17.25, groups=sizes)
    assert a.state_digest() == b.state_digest()


def test_progressive_metric_uses_linear_gain_for_real_relevance():
    X, rel, _ = _data(seed=9, n_groups=1)
    real = 25.0 + 80.5 * np.asarray(rel, dtype=float)  # 2**r - 1 would overflow past 1023
    m = RankSVM(X.shape[1], lam=0.1, seed=0)
    m.update(Batch.from_dense(X), real)
    s = m.decision_function(Batch.from_dense(X))
    r = m.update(Batch.from_dense(X), real)
    gain = real - real.min()
    disc = 1.0 / np.log2(np.arange(min(10, gain.size)) + 2.0)
    order = np.argsort(-s, kind="stable")[:10]
    expect = (gain[order] * disc).sum() / (np.sort(gain)[::-1][:10] * disc).sum()
    assert r.metric_sum == pytest.approx(expect, abs=1e-12)
    assert 0.0 <= r.metric_sum <= 1.0


def test_first_nonfinite_group_is_a_dry_run():
    X, rel, sizes = _data(seed=10, n_groups=3)
    m = RankSVM(X.shape[1], lam=0.01, seed=0)
    m.update(Batch.from_dense(X), rel, groups=sizes)
    digest = m.state_digest()
    huge = X.copy()
    start = sizes[0] + sizes[1]
    huge[start + 1, :] = 1e200  # an item of the third group: its pair steps overflow
    assert m.first_nonfinite_group(Batch.from_dense(huge), rel, groups=sizes) == 2
    assert m.first_nonfinite_group(Batch.from_dense(X), rel, groups=sizes) is None
    assert m.state_digest() == digest
    with pytest.raises(FloatingPointError):
        m.update(Batch.from_dense(huge), rel, groups=sizes)
    assert m.state_digest() == digest
