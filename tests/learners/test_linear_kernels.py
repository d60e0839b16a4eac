"""The numba kernels against the pure-Python oracles (tests/learners/oracles.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners.features import FeatureSpec
from learners.linear import ALGORITHMS, make_classifier
from learners.linear._normal import normal_cdf, normal_ppf
from tests.learners.oracles import LinearOracle

TOL = 1e-9
DIM = 7
CW_FAMILY = ("cw", "arow", "scw1", "scw2")
# small, non-default hyperparameters so every branch (caps, soft terms) is exercised
HYPER: dict[str, dict[str, Any]] = {
    "pa": {},
    "pa1": {"C": 0.3},
    "pa2": {"C": 0.3},
    "cw": {"eta": 0.8},
    "arow": {"r": 0.5},
    "scw1": {"C": 0.2, "eta": 0.8},
    "scw2": {"C": 0.2, "eta": 0.8},
}
MODES = [(a, "diagonal") for a in ALGORITHMS] + [(a, "full") for a in CW_FAMILY]


def _stream(seed: int, n: int, labels_at: dict[int, list]) -> tuple[list[dict], list]:
    """Random sparse rows; ``labels_at[i]``: the label pool from row i on."""
    rng = np.random.default_rng(seed)
    rows, ys = [], []
    pool: list = []
    for i in range(n):
        pool = labels_at.get(i, pool)
        k = int(rng.integers(1, 5))
        idx = rng.choice(DIM, size=k, replace=False)
        rows.append({int(j): float(rng.normal()) for j in idx})
        ys.append(pool[int(rng.integers(len(pool)))])
    return rows, ys


STREAMS: dict[str, dict[int, list[Any]]] = {
    "binary": {0: ["+1", "-1"]},
    "one-then-two": {0: [7], 10: [7, 3]},
    "multiclass": {0: ["a", "b"], 12: ["a", "b", "c"], 25: ["a", "b", "c", "d", "e"]},
}


def _make(algo: str, cov: str):
    params: dict[str, Any] = dict(HYPER[algo])
    if algo in CW_FAMILY:
        params["covariance"] = cov
    clf = make_classifier(algo, DIM, params)
    oracle = LinearOracle(algo, DIM, **{"covariance": cov, **params})
    return clf, oracle


def _max_state_diff(clf, oracle) -> float:
    st = clf.state()
    mu = np.array(oracle.mu)
    diff = float(np.max(np.abs(st.mu - mu)))
    if st.sigma is not None:
        cov = np.array(oracle.cov)
        diff = max(diff, float(np.max(np.abs(st.sigma - cov))))
    return diff


@pytest.mark.parametrize("stream", list(STREAMS))
@pytest.mark.parametrize(("algo", "cov"), MODES)
def test_kernel_matches_oracle(algo: str, cov: str, stream: str) -> None:
    rows, ys = _stream(list(STREAMS).index(stream) + 1, 60, STREAMS[stream])
    spec = FeatureSpec.sparse(DIM)
    clf, oracle = _make(algo, cov)
    # feed in uneven batches so label growth happens inside and between calls
    correct = updates = 0
    loss = 0.0
    o_correct = o_updates = 0
    o_loss = 0.0
    for a, b in [(0, 1), (1, 11), (11, 30), (30, 60)]:
        res = clf.update(spec.encode(rows[a:b]), ys[a:b])
        correct += res.correct
        updates += res.updates
        loss += res.loss_sum
        for x, y in zip(rows[a:b], ys[a:b], strict=True):
            pred, lo, changed = oracle.update(x, y)
            o_correct += pred == y
            o_loss += lo
            o_updates += changed
        assert clf.labels_ == oracle.labels
        assert _max_state_diff(clf, oracle) < TOL
    assert (correct, updates) == (o_correct, o_updates)
    assert updates > 0
    assert loss == pytest.approx(o_loss, abs=1e-9)
    probe = spec.encode(_stream(99, 20, {0: ["z"]})[0])
    got = clf.decision_function(probe)
    want = np.array(
        [[oracle.scores(x)[lab] for lab in oracle.labels] for x in _stream(99, 20, {0: ["z"]})[0]]
    )
    assert np.max(np.abs(got - want)) < TOL


def test_oracle_catches_a_wrong_kernel() -> None:
    """The comparison is sensitive: a different hyperparameter is detected."""
    rows, ys = _stream(5, 40, STREAMS["binary"])
    spec = FeatureSpec.sparse(DIM)
    clf = make_classifier("arow", DIM, {"r": 0.5})
    oracle = LinearOracle("arow", DIM, r=0.6)
    clf.update(spec.encode(rows), ys)
    for x, y in zip(rows, ys, strict=True):
        oracle.update(x, y)
    assert _max_state_diff(clf, oracle) > 1e-4


@pytest.mark.parametrize("p", [1e-12, 0.001, 0.02425, 0.3, 0.5, 0.75, 0.9, 0.975, 0.999999])
def test_normal_ppf_matches_scipy(p: float) -> None:
    from scipy.stats import norm

    assert normal_ppf(p) == pytest.approx(norm.ppf(p), rel=1e-13, abs=1e-14)
    assert normal_cdf(normal_ppf(p)) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, float("nan")])
def test_normal_ppf_rejects_outside_unit_interval(p: float) -> None:
    with pytest.raises(ValueError, match="probability"):
        normal_ppf(p)
