"""Exploration policies and the deterministic draw (learners.decisions.explore)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners.decisions.explore import (
    UCB,
    EpsilonGreedy,
    Softmax,
    SquareCB,
    Thompson,
    decide,
    draw,
    event_uniform,
    make_policy,
)

POLICIES = [
    EpsilonGreedy(0.1),
    EpsilonGreedy(0.0),
    Softmax(0.05),
    SquareCB(10.0),
    SquareCB(5.0, gamma_exponent=0.5),
    Thompson(scale=1.0, epsilon=0.02, samples=128, seed=3),
    UCB(beta=2.0, epsilon=0.05),
]


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
def test_probabilities_are_a_distribution_with_exclusions(policy):
    rng = np.random.default_rng(0)
    for trial in range(200):
        k = int(rng.integers(1, 60))
        s = rng.normal(size=k) * rng.choice([1e-3, 1.0, 100.0])
        v = rng.exponential(size=k)
        excluded = sorted({int(x) for x in rng.integers(0, k, size=int(rng.integers(0, k)))})
        t = int(rng.integers(1, 10_000))
        p = policy.probabilities(s, v, excluded, t)
        assert p.shape == (k,)
        assert (p >= 0).all()
        assert abs(math.fsum(p.tolist()) - 1.0) <= 1e-12
        assert (p[excluded] == 0.0).all()
        d = decide(policy, s, v, event_id=f"e{trial}", seed=11, excluded=excluded, t=t)
        assert d.probability > 0 and d.action not in excluded
        assert d.probability == p[d.action] and d.ranking[0] == d.action
        assert sorted(d.ranking) == list(range(k))


def test_epsilon_greedy_values():
    p = EpsilonGreedy(0.2).probabilities(np.array([0.1, 0.7, 0.7, 0.3]), excluded=[3])
    assert p.tolist() == pytest.approx([0.2 / 3, 1 - 0.4 / 3, 0.2 / 3, 0.0], abs=1e-15)


def test_squarecb_is_inverse_gap_weighting_and_gamma_grows():
    s = np.array([0.9, 0.5, 0.0, 0.8])
    p = SquareCB(gamma=10.0).probabilities(s)
    assert p[1] == pytest.approx(1 / (4 + 10 * 0.4))
    assert p[2] == pytest.approx(1 / (4 + 10 * 0.9))
    assert p[3] == pytest.approx(1 / (4 + 10 * 0.1))
    assert p[0] == pytest.approx(1 - p[1] - p[2] - p[3])
    # gamma_t = gamma * t**0.5: at t = 100 the gaps weigh 10 times more
    q = SquareCB(gamma=1.0, gamma_exponent=0.5).probabilities(s, t=100)
    assert q[2] == pytest.approx(1 / (4 + 10 * 0.9))
    # with an exclusion K counts the eligible actions only
    r = SquareCB(gamma=10.0).probabilities(s, excluded=[3])
    assert r[1] == pytest.approx(1 / (3 + 10 * 0.4)) and r[3] == 0.0


def test_squarecb_gamma_grows_with_the_eligible_actions():
    # the decision models' default: gamma_t = 10 * sqrt(K * t), K the eligible actions
    s = np.array([0.9, 0.5, 0.0, 0.8])
    pol = SquareCB(gamma=10.0, gamma_exponent=0.5, gamma_action_exponent=0.5)
    p = pol.probabilities(s, t=9)
    assert p[1] == pytest.approx(1 / (4 + 10 * 2 * 3 * 0.4))
    r = pol.probabilities(s, excluded=[3], t=3)
    assert r[1] == pytest.approx(1 / (3 + 10 * 3 * 0.4))
    # exponent 0 (the class default) leaves the params, and so stored configs, as before
    assert SquareCB(10.0, 0.5).params == {"gamma": 10.0, "gamma_exponent": 0.5}
    assert pol.params["gamma_action_exponent"] == 0.5


def test_softmax_matches_the_formula():
    s = np.array([1.0, 0.5, -0.2])
    p = Softmax(0.5).probabilities(s)
    e = np.exp(s / 0.5)
    assert p == pytest.approx(e / e.sum(), abs=1e-15)


def test_thompson_is_deterministic_and_follows_the_posterior():
    pol = Thompson(scale=1.0, epsilon=0.03, samples=2000, seed=1)
    s, v = np.array([0.0, 0.0, 0.0]), np.ones(3)
    p = pol.probabilities(s, v)
    assert np.array_equal(p, pol.probabilities(s, v))
    assert p == pytest.approx([1 / 3] * 3, abs=0.03)  # exchangeable: close to uniform
    # a clearly better action with small variance takes all but the floor
    p = pol.probabilities(np.array([1.0, 0.0, 0.0]), np.full(3, 1e-6))
    assert p[1] == p[2] == pytest.approx(0.01) and p[0] == pytest.approx(0.98)
    # P(N(0.3, 1) > N(0, 1e-8)) = Phi(0.3) = 0.618
    p = Thompson(epsilon=0.0, samples=20000, seed=2).probabilities(
        np.array([0.3, 0.0]), np.array([1.0, 1e-8])
    )
    assert p[0] == pytest.approx(0.618, abs=0.01)
    with pytest.raises(ValueError, match="variances"):
        pol.probabilities(s)


def test_ucb_prefers_the_uncertain_action():
    s, v = np.array([0.5, 0.4]), np.array([0.0, 0.04])
    assert UCB(beta=1.0, epsilon=0.1).probabilities(s, v).tolist() == pytest.approx([0.05, 0.95])
    assert UCB(beta=0.1, epsilon=0.1).probabilities(s, v).tolist() == pytest.approx([0.95, 0.05])


def test_event_uniform_is_stable_and_uniform():
    u = event_uniform("order-17", 42)
    assert u == event_uniform("order-17", 42) and 0.0 <= u < 1.0
    assert u != event_uniform("order-17", 43) and u != event_uniform("order-18", 42)
    # pinned: a change of the hash scheme would re-draw every logged event
    # (the first 53 bits of SHA-256 of b"42:order-17")
    assert event_uniform("order-17", 42) == 0.29731709371639925
    us = np.array([event_uniform(f"e{i}", 5) for i in range(20000)])
    counts = np.histogram(us, bins=10, range=(0, 1))[0]
    assert ((counts > 1800) & (counts < 2200)).all()


def test_draw_frequencies_match_probabilities():
    p = SquareCB(gamma=20.0).probabilities(np.array([0.9, 0.6, 0.1, 0.85, 0.0]), excluded=[4])
    chosen = np.array([draw(p, event_uniform(f"ev-{i}", 9)) for i in range(40000)])
    freq = np.bincount(chosen, minlength=5) / chosen.size
    se = np.sqrt(p * (1 - p) / chosen.size)
    assert (np.abs(freq - p) <= 4 * se + 1e-12).all()
    assert freq[4] == 0.0


def test_draw_never_picks_a_zero_probability_action():
    p = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    assert draw(p, 0.0) == 1
    assert draw(p, 0.5) == 3
    assert draw(p, 1.0 - 2**-53) == 3
    assert draw(np.array([0.3, 0.3, 0.3999999999999, 0.0]), 0.99999999999999) == 2  # sum < u


def test_retry_gives_the_same_decision():
    s, v = np.linspace(0, 1, 50), np.full(50, 0.1)
    pol = make_policy("thompson", {"epsilon": 0.05, "seed": 4})
    a = decide(pol, s, v, event_id="7d1c", seed=123, excluded=[49])
    b = decide(pol, s.copy(), v.copy(), event_id="7d1c", seed=123, excluded=[49])
    assert a == b
    others = {
        decide(pol, s, v, event_id=f"x{i}", seed=123, excluded=[49]).action for i in range(300)
    }
    assert len(others) > 5  # and different events do explore


def test_invalid_input_is_a_value_error():
    with pytest.raises(ValueError, match="every action is excluded"):
        EpsilonGreedy().probabilities(np.zeros(2), excluded=[0, 1])
    with pytest.raises(ValueError, match="excluded"):
        EpsilonGreedy().probabilities(np.zeros(2), excluded=[2])
    with pytest.raises(ValueError, match="scores"):
        EpsilonGreedy().probabilities(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonGreedy(1.5)
    with pytest.raises(ValueError, match="policy"):
        make_policy("greedy")
    with pytest.raises(ValueError, match="params"):
        make_policy("softmax", {"gamma": 1.0})
