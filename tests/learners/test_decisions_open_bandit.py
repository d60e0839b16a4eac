"""Off-policy estimates on the Open Bandit Dataset sample (learners.decisions.open_bandit).

The uniform random policy's click rate per slot, estimated from the Bernoulli Thompson
Sampling log, against the random log's own click rate (pooled over positions: the
target is uniform at every position, so the pooled per-slot value is well defined).
"""

from __future__ import annotations

import math

import pytest

from learners.decisions import open_bandit as obd

DATA = obd.data_dir()
pytestmark = pytest.mark.skipif(
    DATA is None,
    reason="Open Bandit Dataset sample absent (../shared/data/open-bandit or "
    "$LEARNSERVE_SHARED_DATA/open-bandit)",
)


@pytest.fixture(scope="module")
def report():
    assert DATA is not None
    return obd.report(DATA, level=0.95)


def test_logs_are_the_documented_sample():
    rnd = obd.load_log(DATA / "random" / "all.csv")
    bts = obd.load_log(DATA / "bts" / "all.csv")
    assert (len(rnd), int(rnd.click.sum()), len(bts), int(bts.click.sum())) == (
        10000,
        38,
        10000,
        42,
    )
    assert (rnd.propensity == 1 / 80).all() and rnd.affinity.shape == (10000, 80)
    assert (
        set(bts.position.tolist()) == {1, 2, 3}
        and 0 < bts.propensity.min() < bts.propensity.max() < 1
    )


def test_uniform_policy_from_the_bts_log(report):
    part = report["random_from_bts"]
    on = part["all"]["on_policy"]
    assert on["estimate"] == pytest.approx(0.0038)
    for kind in ("ips", "snips", "dr"):
        est = part["all"]["uniform"][kind]
        # pooled: the estimate's 95% interval holds the random log's own click rate
        assert est["lo"] <= on["estimate"] <= est["hi"], (kind, est, on)
        # pooled and per position: the two independent estimates differ by < 1.96 se
        for key, fig in part.items():
            e, o = fig["uniform"][kind], fig["on_policy"]
            z = (e["estimate"] - o["estimate"]) / math.hypot(e["se"], o["se"])
            assert abs(z) < 1.96, (key, kind, z)


def test_bts_policy_cannot_be_written_down_from_this_sample(report):
    # the BTS log gives the policy's probability of the logged item only, and it moves
    # over time (the sample has no posterior counts to replay it from): nearest-in-time
    # propensities do not form a distribution
    assert report["bts_policy_sum"]["mean"] > 1.3 and report["bts_policy_sum"]["min"] > 1.0
    # normalised, the approximation's pooled estimates still hold BTS's own click rate
    part = report["bts_from_random"]["all"]
    on = part["on_policy"]["estimate"]
    for kind in ("ips", "snips", "dr"):
        est = part["nearest_normalized"][kind]
        assert est["lo"] <= on <= est["hi"], (kind, est, on)


def test_bts_frozen_at_its_prior_can_be_written_down_but_did_not_log(report):
    # the dataset paper's BTS policy: its Beta parameters of the start of the collection
    # period (obp's prior_bts.yaml), simulated; a distribution at every position
    _, table = obd.bts_policy_prior()
    assert table.shape == (3, 80) and abs(table.sum(axis=1) - 1.0).max() < 1e-12
    # the posteriors moved over the week: the log's item frequencies are far from it
    assert min(report["bts_prior_distance"].values()) > 0.3
    # pooled, its estimates from the random log still hold BTS's own click rate
    part = report["bts_from_random"]["all"]
    on = part["on_policy"]["estimate"]
    for kind in ("ips", "snips", "dr"):
        est = part["prior"][kind]
        assert est["lo"] <= on <= est["hi"], (kind, est, on)


def test_estimates_are_reproducible():
    assert DATA is not None
    bts = obd.load_log(DATA / "bts" / "all.csv")
    assert obd.estimate(bts, position=2).to_dict() == obd.estimate(bts, position=2).to_dict()


def test_ips_snips_equal_vw_estimators():
    # VW's estimators (vw-estimators on PyPI, the bench extra) on the same rows, in order
    ips = pytest.importorskip("estimators.bandits.ips", reason="vw-estimators not installed")
    snips = pytest.importorskip("estimators.bandits.snips", reason="vw-estimators not installed")
    gaussian = pytest.importorskip("estimators.bandits.gaussian")
    assert DATA is not None
    bts = obd.load_log(DATA / "bts" / "all.csv")
    vw_ips, vw_snips, vw_gauss = ips.Estimator(), snips.Estimator(), gaussian.Interval()
    for p, r in zip(bts.propensity.tolist(), bts.click.tolist(), strict=True):
        for est in (vw_ips, vw_snips, vw_gauss):
            est.add_example(p, r, 1.0 / obd.N_ITEMS)
    ours = obd.estimate(bts).summary(0.95)
    assert abs(ours["ips"]["estimate"] - vw_ips.get()) <= 1e-9
    assert abs(ours["snips"]["estimate"] - vw_snips.get()) <= 1e-9
    # VW's Gaussian interval is IPS's normal interval (sample variance, n - 1)
    lo, hi = vw_gauss.get(0.05)
    assert abs(ours["ips"]["lo"] - lo) <= 1e-9 and abs(ours["ips"]["hi"] - hi) <= 1e-9
