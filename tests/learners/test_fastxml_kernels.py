"""FastXML node-partition kernels against a plain-Python oracle of the paper's equations.

Prabhu & Varma (KDD 2014), with ``I_L(y) = 1 / sum_{l<=min(L,|y|)} 1/log2(1+l)``:

- r+- step: r+- = labels ranked by ``sum_{i on that side} I_L(y_i) y_i`` (desc, ties by id);
- delta step: ``delta_i = sign(v-_i - v+_i)``, ``v+-_i = C_delta(+-1) log(1+exp(-+ w^T x_i))
  - C_r L_nDCG@L(r+-, y_i)`` (a tie keeps delta_i).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.xml import _kernels as K
from learners.xml import _partition_kernels as PK


def _problem(seed: int, n: int = 12, n_labels: int = 7):
    rng = np.random.default_rng(seed)
    Y = [
        sorted(rng.choice(n_labels, size=rng.integers(0, 4), replace=False).tolist())
        for _ in range(n)
    ]
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(y) for y in Y])
    idx = np.array([lab for y in Y for lab in y], dtype=np.int64)
    val = np.ones(idx.shape[0])
    return rng, Y, ptr, idx, val


def oracle_I(y, L):
    c = min(L, len(y))
    return 0.0 if c == 0 else 1.0 / sum(1.0 / math.log2(1 + j) for j in range(1, c + 1))


def oracle_rank(Y, delta, side, L):
    """The node's labels ordered by the side's weighted sums, desc, ties by id."""
    labels = sorted({lab for y in Y for lab in y})
    sums = {lab: 0.0 for lab in labels}
    for y, d in zip(Y, delta):
        if d == side:
            for lab in y:
                sums[lab] += oracle_I(y, L)
    return sorted(labels, key=lambda lab: (-sums[lab], lab))


def oracle_ndcg(r, y, L):
    """L_nDCG@L(r, y) = I_L(y) sum_{l<=L} y_{r_l} / log2(1 + l)."""
    return oracle_I(y, L) * sum(
        1.0 / math.log2(1 + t) for t, lab in enumerate(r[:L], 1) if lab in y
    )


def oracle_delta(Y, delta, r_pos, r_neg, L, c_r, margins, c_pos, c_neg, with_logit):
    out = []
    for y, d, s in zip(Y, delta, margins):
        lp = c_pos * math.log1p(math.exp(-s)) if with_logit else 0.0
        ln = c_neg * math.log1p(math.exp(s)) if with_logit else 0.0
        v_pos = lp - c_r * oracle_ndcg(r_pos, y, L)
        v_neg = ln - c_r * oracle_ndcg(r_neg, y, L)
        out.append(1 if v_neg > v_pos else -1 if v_neg < v_pos else d)
    return out


def _pw(Y, L):
    return np.array([oracle_I(y, L) for y in Y])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("L", [1, 2, 3, 100])
def test_rank_step_matches_oracle(seed, L):
    rng, Y, ptr, idx, val = _problem(seed)
    n, n_labels = len(Y), 7
    delta = rng.choice([-1, 1], size=n).astype(np.int64)
    rows = np.arange(n, dtype=np.int64)
    nl = np.unique(idx)
    bufs = [np.full(n_labels, 7.0) for _ in range(4)]  # junk: the kernel must reset
    PK.rank_step(rows, ptr, idx, val, _pw(Y, L), delta, nl, L, *bufs)
    for side, disc in ((1, bufs[2]), (-1, bufs[3])):
        r = oracle_rank(Y, delta, side, L)
        want = {lab: (1.0 / math.log2(t + 2) if t < L else 0.0) for t, lab in enumerate(r)}
        for lab in nl:
            assert disc[lab] == pytest.approx(want[lab]), (side, lab)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("with_logit", [False, True])
def test_delta_step_matches_oracle(seed, with_logit):
    L, c_r, c_pos, c_neg = 3, 1.5, 2.0, 0.7
    rng, Y, ptr, idx, val = _problem(seed)
    n, n_labels = len(Y), 7
    delta = rng.choice([-1, 1], size=n).astype(np.int64)
    margins = rng.normal(size=n)
    rows = np.arange(n, dtype=np.int64)
    nl = np.unique(idx)
    pos_sum, neg_sum, disc_pos, disc_neg = (np.zeros(n_labels) for _ in range(4))
    PK.rank_step(rows, ptr, idx, val, _pw(Y, L), delta, nl, L, pos_sum, neg_sum, disc_pos, disc_neg)
    lp = c_pos * np.log1p(np.exp(-margins)) if with_logit else np.zeros(n)
    ln = c_neg * np.log1p(np.exp(margins)) if with_logit else np.zeros(n)
    want = oracle_delta(
        Y,
        delta.tolist(),
        oracle_rank(Y, delta, 1, L),
        oracle_rank(Y, delta, -1, L),
        L,
        c_r,
        margins,
        c_pos,
        c_neg,
        with_logit,
    )
    before = delta.copy()
    changed = PK.delta_step(rows, ptr, idx, val, _pw(Y, L), disc_pos, disc_neg, c_r, lp, ln, delta)
    assert delta.tolist() == want
    assert changed == int(np.sum(before != delta))


def oracle_objective(Y, delta, L, c_r):
    """The nDCG part of the split objective at optimal rankings for ``delta`` (w = 0)."""
    r_pos, r_neg = oracle_rank(Y, delta, 1, L), oracle_rank(Y, delta, -1, L)
    return -c_r * sum(oracle_ndcg(r_pos if d > 0 else r_neg, y, L) for y, d in zip(Y, delta))


@pytest.mark.parametrize("seed", range(5))
def test_alternation_descends_and_stops_at_a_fixed_point(seed):
    L = 100
    rng, Y, ptr, idx, val = _problem(seed, n=30, n_labels=9)
    n = len(Y)
    delta = rng.choice([-1, 1], size=n).astype(np.int64)
    rows = np.arange(n, dtype=np.int64)
    nl = np.unique(idx)
    bufs = [np.zeros(9) for _ in range(4)]
    zeros = np.zeros(n)
    prev = oracle_objective(Y, delta, L, 1.0)
    for _ in range(50):  # one round at a time: the objective never goes up
        rounds = PK.alternate_partition(
            rows, ptr, idx, val, _pw(Y, L), nl, L, 1.0, zeros, zeros, delta, *bufs, 1
        )
        assert rounds == 1
        cur = oracle_objective(Y, delta, L, 1.0)
        assert cur <= prev + 1e-12
        prev = cur
    # at the end delta is a fixed point of the oracle's delta step
    want = oracle_delta(
        Y,
        delta.tolist(),
        oracle_rank(Y, delta, 1, L),
        oracle_rank(Y, delta, -1, L),
        L,
        1.0,
        zeros,
        1,
        1,
        False,
    )
    assert delta.tolist() == want


def test_leaf_distribution_is_the_top_of_the_mean_label_vector():
    _, Y, ptr, idx, val = _problem(3, n=20)
    rows = np.array([0, 2, 5, 7, 11, 13], dtype=np.int64)
    labs, vals = K.leaf_distribution(
        rows, ptr, idx, val, 3, np.zeros(7), np.zeros(7, bool), np.zeros(7, np.int64)
    )
    counts = {}
    for r in rows:
        for lab in Y[r]:
            counts[lab] = counts.get(lab, 0) + 1
    want = sorted(counts, key=lambda lab: (-counts[lab], lab))[:3]
    assert labs.tolist() == want
    assert vals.tolist() == pytest.approx([counts[lab] / len(rows) for lab in want])
