"""LL-SVM kernels against plain-Python oracles (the kernels' only twins)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.features import Batch
from learners.llsvm import _kernels as K
from learners.llsvm.kmeans import assign, kmeans

# --------------------------------------------------------------------------- oracles


def oracle_gamma(x, anchors, k, weighting, beta):
    """Nearest k anchors (ties: lower index) and their normalised weights."""
    d2 = [sum((xi - ai) ** 2 for xi, ai in zip(x, a)) for a in anchors]
    near = sorted(range(len(anchors)), key=lambda a: (d2[a], a))[:k]
    ds = [d2[a] for a in near]
    if weighting == "inverse":
        w = [1.0 / math.sqrt(d) for d in ds]
    elif weighting == "exponential":
        w = [math.exp(-beta * d) for d in ds]
    else:
        w = [math.exp(-beta * d / ds[0]) for d in ds]
    s = sum(w)
    return near, [v / s for v in w]


def oracle_sgd_step(W, b, x, nbr, gam, y, t, lam, t0, skip, mode, fit_bias):
    """One step of eqs. 11-13 on nested lists W[a][j][c], b[a][c]; returns new t."""
    t += 1
    eta = 1.0 / (lam * (t + t0))
    C = len(W[0][0])
    scores = [
        sum(g * (sum(W[a][j][c] * x[j] for j in range(len(x))) + b[a][c]) for a, g in zip(nbr, gam))
        for c in range(C)
    ]
    coef = [0.0] * C
    if mode == "ovr":
        for c in range(C):
            s = 1.0 if c == y else -1.0
            if s * scores[c] < 1.0:
                coef[c] = eta * s
    else:
        rival = max((c for c in range(C) if c != y), key=lambda c: (scores[c], -c))
        if scores[y] - scores[rival] < 1.0:
            coef[y], coef[rival] = eta, -eta
    for a, g in zip(nbr, gam):
        for c in range(C):
            if fit_bias:
                b[a][c] += g * coef[c]
            for j in range(len(x)):
                W[a][j][c] += g * x[j] * coef[c]
    if t % skip == 0:
        shrink = 1.0 - skip / (t + t0)
        for Wa in W:
            for row in Wa:
                for c in range(C):
                    row[c] *= shrink
    return t


def _csr(X):
    b = Batch.from_dense(np.asarray(X, dtype=np.float64))
    return b.indptr, b.indices, b.values


# --------------------------------------------------------------------------- gamma


@pytest.mark.parametrize(
    ("weighting", "code", "beta"),
    [
        ("inverse", K.INVERSE, 1.0),
        ("exponential", K.EXPONENTIAL, 0.7),
        ("relative", K.RELATIVE, 3.0),
    ],
)
def test_local_coordinates_match_oracle(weighting, code, beta):
    rng = np.random.default_rng(1)
    anchors = rng.random((7, 4))
    X = rng.random((5, 4))
    ip, ix, vs = _csr(X)
    idx, gam, _ = K.nearest_anchors(ip, ix, vs, np.ascontiguousarray(anchors.T),
                                     (anchors**2).sum(1), 3, code, beta)  # fmt: skip
    for i, x in enumerate(X.tolist()):
        near, w = oracle_gamma(x, anchors.tolist(), 3, weighting, beta)
        assert idx[i].tolist() == near
        assert gam[i] == pytest.approx(w, rel=1e-9)
        assert gam[i].sum() == pytest.approx(1.0)
        assert np.all(np.diff(gam[i]) <= 1e-15)  # weights decrease with distance


def test_gamma_hand_computed_and_ties():
    # anchors at distances 1, 2, 2, 3 from x = (0, 0); tie between anchors 1 and 2.
    anchors = np.array([[1.0, 0.0], [0.0, 2.0], [2.0, 0.0], [3.0, 0.0]])
    ip, ix, vs = _csr([[0.0, 0.0]])
    idx, gam, _ = K.nearest_anchors(ip, ix, vs, np.ascontiguousarray(anchors.T),
                                    (anchors**2).sum(1), 2, K.INVERSE, 1.0)  # fmt: skip
    assert idx[0].tolist() == [0, 1]  # the tie goes to the lower index
    assert gam[0].tolist() == pytest.approx([2 / 3, 1 / 3])


def test_gamma_on_an_anchor_is_one_hot():
    anchors = np.array([[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]])
    ip, ix, vs = _csr([[1.0, 1.0]])
    for code in (K.INVERSE, K.RELATIVE):
        idx, gam, _ = K.nearest_anchors(ip, ix, vs, np.ascontiguousarray(anchors.T),
                                        (anchors**2).sum(1), 2, code, 3.0)  # fmt: skip
        assert idx[0, 0] == 0 and gam[0].tolist() == [1.0, 0.0]


# --------------------------------------------------------------------------- SGD


@pytest.mark.parametrize("mode", ["ovr", "crammer_singer"])
@pytest.mark.parametrize(
    "t_start", [5, 6]
)  # skip=7: step 6 -> no regulariser, step 7 -> regulariser
@pytest.mark.parametrize("fit_bias", [0, 1])
def test_one_sgd_step_matches_oracle(mode, t_start, fit_bias):
    rng = np.random.default_rng(2)
    A, d, C = 4, 3, 3
    W = rng.normal(scale=0.1, size=(A, d, C))
    b = rng.normal(scale=0.1, size=(A, C))
    x = [0.5, 0.0, -1.5]
    nbr = np.array([[2, 0]], dtype=np.int64)
    gam = np.array([[0.75, 0.25]])
    Wl, bl = W.tolist(), b.tolist()
    t_or = oracle_sgd_step(Wl, bl, x, [2, 0], [0.75, 0.25], 1, t_start, 0.1, 3.0, 7, mode, fit_bias)
    ip, ix, vs = _csr([x])
    code = K.OVR if mode == "ovr" else K.CRAMMER_SINGER
    t, _, hinge = K.sgd_epoch(ip, ix, vs, nbr, gam, np.array([1]), np.array([0]), W, b,
                                     t_start, 0.1, 3.0, 7, code, fit_bias)  # fmt: skip
    assert t == t_or == t_start + 1
    np.testing.assert_allclose(W, np.array(Wl), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(b, np.array(bl), rtol=1e-12, atol=1e-15)
    assert hinge > 0  # scores are ~0, so every margin is violated


def test_regulariser_alone_at_skip():
    """No margin violation: only the shrink 1 - skip/(t + t0) applies, exactly at t % skip == 0."""
    W = np.zeros((1, 1, 2))
    W[0, 0] = [10.0, -10.0]  # class 0 scores 10, class 1 scores -10: both OvR margins met
    b = np.zeros((1, 2))
    ip, ix, vs = _csr([[1.0]])
    args = (ip, ix, vs, np.array([[0]]), np.array([[1.0]]), np.array([0]), np.array([0]))
    t, *_ = K.sgd_epoch(*args, W, b, 3, 0.5, 2.0, 5, K.OVR, 1)  # step 4: nothing happens
    assert t == 4 and W[0, 0].tolist() == [10.0, -10.0]
    t, *_ = K.sgd_epoch(*args, W, b, 4, 0.5, 2.0, 5, K.OVR, 1)  # step 5: shrink by 1 - 5/7
    assert W[0, 0].tolist() == pytest.approx([10.0 * 2 / 7, -10.0 * 2 / 7])
    assert b.tolist() == [[0.0, 0.0]]


def test_progressive_mistakes_count_before_update():
    W = np.zeros((1, 2, 2))
    b = np.zeros((1, 2))
    ip, ix, vs = _csr([[1.0, 0.0], [1.0, 0.0]])
    # Two identical examples labelled 1: the first is a mistake (tie -> class 0), the
    # second is scored after learning from the first and is right.
    t, mistakes, _ = K.sgd_epoch(ip, ix, vs, np.zeros((2, 1), np.int64), np.ones((2, 1)),
                                 np.array([1, 1]), np.array([0, 1]), W, b, 0, 1.0, 1.0, 100,
                                 K.OVR, 0)  # fmt: skip
    assert (t, mistakes) == (2, 1)


# --------------------------------------------------------------------------- k-means


def test_kmeans_assign_matches_oracle():
    rng = np.random.default_rng(3)
    X = rng.random((30, 5))
    X[X < 0.3] = 0.0  # sparse rows exercise the CSR path
    centres = rng.random((4, 5))
    labels, d2 = assign(Batch.from_dense(X), centres)
    for i, x in enumerate(X.tolist()):
        dist = [sum((a - c) ** 2 for a, c in zip(x, cen)) for cen in centres.tolist()]
        assert labels[i] == min(range(4), key=lambda a: (dist[a], a))
        assert d2[i] == pytest.approx(min(dist), abs=1e-12)


def test_kmeans_finds_separated_blobs_and_is_seeded():
    rng = np.random.default_rng(4)
    centres_true = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = np.vstack([c + rng.normal(scale=0.3, size=(50, 2)) for c in centres_true])
    b = Batch.from_dense(X)
    c1 = kmeans(b, 3, seed=7)
    c2 = kmeans(b, 3, seed=7)
    np.testing.assert_array_equal(c1, c2)
    found = sorted(map(tuple, np.round(c1).tolist()))
    assert found == sorted(map(tuple, centres_true.tolist()))


def test_kmeans_with_duplicates_keeps_every_centre():
    X = np.array([[1.0, 1.0]] * 5 + [[2.0, 2.0]])
    c = kmeans(Batch.from_dense(X), 3, seed=0)
    assert c.shape == (3, 2) and np.all(np.isfinite(c))


def test_dense_to_rows_matches_batch_and_flags_nan():
    X = np.array([[0.0, 3.0, 4.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    ip, ix, vs, bad = K.dense_to_rows(X, True)
    assert bad == -1 and ip.tolist() == [0, 2, 2, 3] and ix.tolist() == [1, 2, 0]
    assert vs.tolist() == pytest.approx([0.6, 0.8, 1.0])
    X[2, 1] = np.nan
    assert K.dense_to_rows(X, False)[3] == 2
