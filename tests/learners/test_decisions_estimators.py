"""Progressive off-policy estimators (learners.decisions.estimators)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from learners.decisions.estimators import DR, IPS, SNIPS, Evaluation, dr_parts

MEANS = np.array([0.2, 0.5, 0.7])  # Bernoulli reward of each action


def _log(rng, n, logging_p):
    a = rng.choice(3, size=n, p=logging_p)
    r = (rng.random(n) < MEANS[a]).astype(float)
    return a, r


def _evaluate(a, r, logging_p, target_p, model=None):
    ev = Evaluation()
    for ai, ri in zip(a.tolist(), r.tolist(), strict=True):
        q, direct, pred = dr_parts(target_p, model if model is not None else [0.0] * 3, ai)
        ev.update(logging_p[ai], ri, q, direct, pred)
    return ev


def test_intervals_cover_the_true_value():
    # target: 0.1, 0.2, 0.7 -> value 0.02 + 0.1 + 0.49 = 0.61; logging: uniform-ish
    logging_p, target_p = [0.5, 0.25, 0.25], [0.1, 0.2, 0.7]
    truth = float(np.dot(target_p, MEANS))
    rng = np.random.default_rng(1)
    covered = {"ips": 0, "snips": 0, "dr": 0}
    reps = 300
    for _ in range(reps):
        a, r = _log(rng, 400, logging_p)
        s = _evaluate(a, r, logging_p, target_p, model=[0.3, 0.3, 0.6]).summary(0.9)
        for k in covered:
            covered[k] += s[k]["lo"] <= truth <= s[k]["hi"]
    for k, c in covered.items():
        assert 0.84 <= c / reps <= 0.96, (k, c / reps)  # nominal 0.9


def test_dr_with_a_good_model_is_tighter_than_ips():
    logging_p, target_p = [0.5, 0.25, 0.25], [0.1, 0.2, 0.7]
    a, r = _log(np.random.default_rng(2), 3000, logging_p)
    ev = _evaluate(a, r, logging_p, target_p, model=MEANS.tolist())
    assert ev.dr.stderr < 0.7 * ev.ips.stderr
    truth = float(np.dot(target_p, MEANS))
    assert abs(ev.dr.estimate - truth) < 3 * ev.dr.stderr


def test_progressive_equals_batch_formulas():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 1.0, 500)
    q = rng.uniform(0.0, 1.0, 500)
    r = rng.normal(size=500)
    ips, snips = IPS(), SNIPS()
    for pi, ri, qi in zip(p, r, q, strict=True):
        ips.update(pi, ri, qi)
        snips.update(pi, ri, qi)
    w = q / p
    assert ips.estimate == pytest.approx(np.mean(w * r), rel=1e-12)
    assert ips.stderr == pytest.approx(np.std(w * r, ddof=1) / math.sqrt(500), rel=1e-10)
    v = np.sum(w * r) / np.sum(w)
    assert snips.estimate == pytest.approx(v, rel=1e-12)
    assert snips.stderr == pytest.approx(
        math.sqrt(np.sum(w**2 * (r - v) ** 2)) / np.sum(w), rel=1e-9
    )
    z = 1.959963984540054
    lo, hi = ips.interval(0.95)
    assert (lo, hi) == pytest.approx((ips.estimate - z * ips.stderr, ips.estimate + z * ips.stderr))


def test_checkpoint_is_json_and_bit_identical():
    rng = np.random.default_rng(4)
    rows = [
        (
            float(rng.uniform(0.01, 1)),
            float(rng.random() < 0.3),
            float(rng.random()),
            float(rng.random()),
            float(rng.random()),
        )
        for _ in range(1000)
    ]
    one = Evaluation()
    for row in rows:
        one.update(*row)
    two = Evaluation()
    for row in rows[:400]:
        two.update(*row)
    two = Evaluation.from_dict(json.loads(json.dumps(two.to_dict())))  # checkpoint, restore
    for row in rows[400:]:
        two.update(*row)
    assert json.dumps(one.to_dict()) == json.dumps(two.to_dict())
    assert one.summary() == two.summary()


def test_estimates_before_any_row_and_bad_rows():
    ev = Evaluation()
    assert ev.summary()["ips"] == {"estimate": 0.0, "lo": -math.inf, "hi": math.inf, "n": 0}
    ev.update(0.5, 1.0, 0.5)
    before = ev.to_dict()
    for bad in [(0.0, 1.0, 0.5), (1.5, 1.0, 0.5), (0.5, math.nan, 0.5), (0.5, 1.0, -0.1)]:
        with pytest.raises(ValueError):
            ev.update(*bad)
    with pytest.raises(ValueError, match="predicted"):
        ev.update(0.5, 1.0, 0.5, 0.0, math.inf)
    assert ev.to_dict() == before  # a refused row changes nothing
    with pytest.raises(ValueError, match="kind"):
        DR.from_dict(ev.ips.to_dict())


def test_dr_parts():
    q, direct, pred = dr_parts([0.2, 0.8], [1.0, 3.0], 1)
    assert (q, pred) == (0.8, 3.0) and direct == pytest.approx(2.6, abs=1e-15)
    with pytest.raises(ValueError):
        dr_parts([0.2, 0.8], [1.0], 0)
