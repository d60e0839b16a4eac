"""The simulated bake-off of bench/decisions_offline.py on the first 3000 rows of a9a:
AROW per action + each exploration policy, learning with weight 1/p, progressive."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from learners.decisions.explore import make_policy

REPO = Path(__file__).resolve().parents[2]
A9A = REPO.parent / "shared" / "data" / "a9a" / "a9a"
pytestmark = pytest.mark.skipif(not A9A.is_file(), reason=f"a9a absent ({A9A})")
sys.path.insert(0, str(REPO))
from bench import decisions_offline as bench  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return bench.load(A9A, 3000)


def test_every_policy_learns_and_logs_honest_probabilities(data):
    X, y, _ = data
    majority = max((y == 0).mean(), (y == 1).mean())
    for name, (pname, params) in bench.OURS.items():
        res = bench.run_ours(make_policy(pname, params), X, y, 2)
        assert res["reward"] > majority + 0.02, (name, res)
        if pname != "softmax":  # softmax(0.05) leaves almost no mass on the other action
            # the uniform policy's value (0.5), estimated off this policy's own log
            assert res["uniform_ips_lo"] <= 0.5 <= res["uniform_ips_hi"], (name, res)


def test_deterministic_and_at_least_vw_cb(data):
    X, y, lines = data
    pol = make_policy("squarecb", {"gamma": 10.0, "gamma_exponent": 0.5})
    a, b = bench.run_ours(pol, X, y, 2), bench.run_ours(pol, X, y, 2)
    assert a == b
    pytest.importorskip("vowpalwabbit")
    vw = max(
        bench.run_vw(args.format(k=2), lines)
        for name, args in bench.VW.items()
        if "oaa" not in name
    )
    assert a["reward"] >= vw
