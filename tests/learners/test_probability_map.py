"""``learners.linear.probability_map.ProbabilityMap``: the fit, its ring, its JSON form, and the
served probabilities (issue #20)."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from scipy.optimize import minimize

from learners.features import FeatureSpec
from learners.linear import make_classifier
from learners.linear.probability_map import (
    PRIOR_PRECISION,
    ProbabilityMap,
    fit_logistic,
    predict_z,
    served_probabilities,
    sigmoid,
)


@pytest.mark.parametrize("module", ["learners.linear.calibration", "service.models.config_compare"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_the_fit_is_the_regularised_maximum_likelihood() -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(size=1000) * 2
    y = rng.random(1000) < 1 / (1 + np.exp(-(1.5 * z + 0.3)))

    def objective(t: np.ndarray) -> float:  # no intercept: the slope alone
        s = t[0] * z
        prior = 0.5 * PRIOR_PRECISION * (t[0] - 1.0) ** 2
        return float(np.sum(np.logaddexp(0, s) - y * s) + prior)

    best = minimize(objective, [1.0], method="BFGS", options={"gtol": 1e-10}).x
    got = fit_logistic(z, y, 1.0, 0.0, 1.0, PRIOR_PRECISION)
    assert got == pytest.approx((best[0], 0.0), abs=1e-6)
    # from another start: the same minimum; separable scores: a finite slope (the prior)
    assert fit_logistic(z, y, -3.0, 2.0, 1.0, PRIOR_PRECISION) == pytest.approx(got, abs=1e-6)
    a, b = fit_logistic(np.linspace(-5, 5, 1000), np.linspace(-5, 5, 1000) > 0, 1.0, 0.0, 1.0, 1.0)
    assert 1.0 < a < 20.0 and b == 0.0
    # scores that point the wrong way: the slope stops at 0 (every probability 1/2), never
    # below, so the label a model answers is never given less than 1/2 (issue 31 item 1)
    a, b = fit_logistic(z, ~y, 1.0, 0.0, 1.0, PRIOR_PRECISION)
    assert (a, b) == (0.0, 0.0)


def test_the_ring_keeps_the_last_scores_oldest_first() -> None:
    m = ProbabilityMap("arow", size=10)
    z = np.arange(37, dtype=np.float64)
    for s in range(0, 37, 3):  # batches of 3 (and a last of 1) through the double buffer
        m.learn(z[s : s + 3], z[s : s + 3] % 2 == 0)
    kept = m.to_json()
    back = ProbabilityMap.from_json("arow", kept, 10)
    assert back.z[: back.count].tolist() == list(range(27, 37)) and back.examples == 37
    assert (back.a, back.b, back.pending) == (m.a, m.b, m.pending)
    # a restored map goes on with the same bits as the one that kept learning
    for s in range(0, 20, 4):
        more = np.linspace(-2, 2, 4) + s
        assert (m.learn(more, more > s) == back.learn(more, more > s)).all()
        assert (m.a, m.b) == (back.a, back.b)
    one_batch = ProbabilityMap("arow", size=10)
    one_batch.learn(z, z % 2 == 0)  # more than the ring holds at once: the last 10 kept
    assert one_batch.to_json()["z"] == kept["z"] and one_batch.examples == 37


@pytest.mark.parametrize(
    "bad",
    [None, {"a": 1.0}, {"a": float("nan")}, {"b": 1e3}, {"examples": -1}, {"pending": 10**9},
     {"z": "not base64!"}, {"y": "AgI="}, {"examples": 1},
     {"z": "AAAAAAAA8H8=", "y": "AQ=="}, {"z": "AAAAAACI00A=", "y": "AQ=="}],
)  # fmt: skip
def test_from_json_refuses_what_to_json_cannot_write(bad: dict | None) -> None:
    m = ProbabilityMap("cw", size=8)
    m.learn(np.array([0.5, -1.0, 2.0]), np.array([True, False, True]))
    data = None if bad is None else {**m.to_json(), **bad}
    if bad == {"a": 1.0}:
        data = bad
    with pytest.raises(ValueError):
        ProbabilityMap.from_json("cw", data, 8)


@pytest.mark.parametrize(("algorithm", "covariance"),
                         [("pa", "diagonal"), ("arow", "diagonal"), ("cw", "full"),
                          ("scw2", "diagonal"), ("arow", "full")])  # fmt: skip
def test_served_probabilities_are_the_map_of_the_links_score(
    algorithm: str, covariance: str
) -> None:
    spec = FeatureSpec.dense(3)
    params = {} if algorithm == "pa" else {"covariance": covariance}
    clf = make_classifier(algorithm, 3, params)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    clf.update(spec.encode(X.tolist()), ["a" if v > 0 else "b" for v in X @ [1.0, -1.0, 0.5]])
    batch = spec.encode(np.vstack([X[:20], np.zeros((1, 3))]).tolist())  # x = 0: z = 0
    s0 = clf.decision_function(batch)[:, 0]
    first, second = served_probabilities(clf, batch, s0, 1.7, -0.2)
    t = 1.7 * predict_z(clf, batch, s0) - 0.2
    assert first == pytest.approx(sigmoid(t), rel=1e-12)
    assert second == pytest.approx(sigmoid(-t), rel=1e-12)
    assert first[-1] == pytest.approx(sigmoid(np.array([-0.2]))[0])


def test_extreme_scores_do_not_stall_the_map() -> None:
    """Scores of 1e300 (a PA margin of huge feature values) are kept as ±1e4 for the fit,
    and a fit from a start whose objective overflows restarts from the prior."""
    m = ProbabilityMap("pa", size=50)
    served = m.learn(np.array([1e300, -1e300, np.inf, 3.0]), np.array([True, False, True, True]))
    assert served[:2].tolist() == [1e300, -1e300] and m.examples == 3
    assert np.isfinite([m.a, m.b]).all() and abs(m.a) <= 100 and abs(m.b) <= 100
    z = np.array([0.5, -0.5] * 20)
    a, b = fit_logistic(np.full(4, 1e4), np.ones(4, np.bool_), 1e300, 0.0, 1.0, 1.0)
    assert np.isfinite([a, b]).all()
    m.learn(z, z > 0)
    assert np.isfinite([m.a, m.b]).all() and m.a > 1.0
