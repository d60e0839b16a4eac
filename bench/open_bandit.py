"""The Open Bandit Dataset sample (issue 34): the uniform random policy's click rate
estimated from the Bernoulli Thompson Sampling log, by ours and by VW's estimators.

Ours (:mod:`learners.decisions.open_bandit`, the estimators of
:mod:`learners.decisions.estimators`): IPS, SNIPS and DR (its two reward models:
``item_position``, the library's, and ``item_mean``, ``learnserve evaluate-policy``'s),
each with its 95 % normal interval. VW's (``vw-estimators`` on PyPI, the ``bench``
extra; skipped with a message when not installed), fed the same (logged propensity,
click, 1/80) rows in log order: ``ips``, ``snips``, ``mle`` and ``cressieread``
estimates; ``gaussian``, ``clopper_pearson``, ``cressieread`` and ``cs`` (confidence
sequence) 95 % intervals (rewards in [0, 1]). The reference: the random log's own click
rate (its on-policy value), with its normal interval. Also the reverse: BTS's value from
the random log, with the nearest-in-time BTS policy (normalised) and with BTS frozen at
its published prior (the dataset paper's; not the policy that logged: the total
variation between it and the log's item frequencies per position is reported), against
BTS's own click rate.

    PYTHONPATH=. .venv/bin/python bench/open_bandit.py     # -> bench/results/open_bandit.json

The data: ``../shared/data/open-bandit`` beside the checkout, or
``$LEARNSERVE_SHARED_DATA/open-bandit``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent  # (bench/http.py would shadow the stdlib's http)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._common import print_table, write_results  # noqa: E402
from learners.decisions import open_bandit as obd  # noqa: E402

LEVEL = 0.95


def vw_figures(log: obd.OBDLog, target: list[float]) -> dict[str, Any] | None:
    """VW's estimators on (propensity, click, the target's probability) in log order;
    None if not installed."""
    try:
        from estimators.bandits import (  # type: ignore[import-not-found]
            clopper_pearson,
            cressieread,
            cs,
            gaussian,
            ips,
            mle,
            snips,
        )
    except ImportError:
        return None
    ests = {"ips": ips.Estimator(), "snips": snips.Estimator(), "mle": mle.Estimator(),
            "cressieread": cressieread.Estimator()}  # fmt: skip
    ivs = {"gaussian": gaussian.Interval(), "clopper_pearson": clopper_pearson.Interval(),
           "cressieread": cressieread.Interval(), "cs": cs.Interval()}  # fmt: skip
    for p, r, q in zip(log.propensity.tolist(), log.click.tolist(), target, strict=True):
        for e in ests.values():
            e.add_example(p, r, q)
        for iv in ivs.values():
            iv.add_example(p, r, q)
    alpha = 1.0 - LEVEL
    return {
        "estimates": {k: e.get() for k, e in ests.items()},
        "intervals": {k: [float(x) for x in iv.get(alpha)] for k, iv in ivs.items()},
    }


def ours(log: obd.OBDLog) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model in ("item_position", "item_mean"):
        s = obd.estimate(log, reward_model=model).summary(LEVEL)
        if model == "item_position":
            out["ips"], out["snips"] = s["ips"], s["snips"]
        out[f"dr_{model}"] = s["dr"]
    return out


def main() -> int:
    where = obd.data_dir()
    if where is None:
        print("no open-bandit data (../shared/data/open-bandit or $LEARNSERVE_SHARED_DATA)")
        return 0
    t0 = time.perf_counter()
    rnd = obd.load_log(where / "random" / "all.csv")
    bts = obd.load_log(where / "bts" / "all.csv")
    on = obd.on_policy(rnd)
    lo, hi = on.interval(LEVEL)
    truth = {"estimate": on.estimate, "lo": lo, "hi": hi, "n": on.n}
    mine = ours(bts)
    vw = vw_figures(bts, [1.0 / obd.N_ITEMS] * len(bts))
    _, table = obd.bts_policy_prior()
    vw_rev = vw_figures(rnd, table[rnd.position - 1, rnd.item].tolist())
    rep: dict[str, Any] = obd.report(where, LEVEL)
    rev = rep["bts_from_random"]["all"]
    payload: dict[str, Any] = {
        "data": "open-bandit (obp 0.4.1 sample, campaign all): random/all.csv, bts/all.csv",
        "level": LEVEL,
        "random_on_policy": truth,
        "uniform_from_bts": {"ours": mine, "vw_estimators": vw},
        "bts_from_random": {
            "nearest_normalized": rev["nearest_normalized"],
            "prior": rev["prior"],
            "prior_vw_estimators": vw_rev,
            "prior_total_variation_from_log": rep["bts_prior_distance"],
            "bts_on_policy": rev["on_policy"],
        },
        "seconds": time.perf_counter() - t0,
    }
    if vw is not None:
        payload["max_abs_difference"] = {
            "ips": abs(mine["ips"]["estimate"] - vw["estimates"]["ips"]),
            "snips": abs(mine["snips"]["estimate"] - vw["estimates"]["snips"]),
            "ips_gaussian_interval": max(
                abs(mine["ips"]["lo"] - vw["intervals"]["gaussian"][0]),
                abs(mine["ips"]["hi"] - vw["intervals"]["gaussian"][1]),
            ),
        }
    path = write_results("open_bandit", payload, extra_packages=("vw-estimators", "scipy"))
    rows = [["random log, on-policy", f"{truth['estimate']:.5f}",
             f"[{truth['lo']:.5f}, {truth['hi']:.5f}]"]]  # fmt: skip
    for k, f in mine.items():
        rows.append([f"ours {k}", f"{f['estimate']:.5f}", f"[{f['lo']:.5f}, {f['hi']:.5f}]"])
    if vw is None:
        print("vw-estimators not installed (pip install '.[bench]'): VW's figures skipped")
    else:
        for k, v in vw["estimates"].items():
            iv = vw["intervals"].get(k)
            rows.append([f"vw {k}", f"{v:.5f}", f"[{iv[0]:.5f}, {iv[1]:.5f}]" if iv else ""])
        for k in ("gaussian", "clopper_pearson", "cs"):
            iv = vw["intervals"][k]
            rows.append([f"vw {k} interval", "", f"[{iv[0]:.5f}, {iv[1]:.5f}]"])
    print_table(
        "The uniform policy from the BTS log", ["estimator", "value", f"{LEVEL:.0%} interval"], rows
    )
    rows = [["BTS log, on-policy", f"{rev['on_policy']['estimate']:.5f}",
             f"[{rev['on_policy']['lo']:.5f}, {rev['on_policy']['hi']:.5f}]"]]  # fmt: skip
    for target in ("nearest_normalized", "prior"):
        for k, f in rev[target].items():
            rows.append([f"{target} {k}", f"{f['estimate']:.5f}",
                         f"[{f['lo']:.5f}, {f['hi']:.5f}]"])  # fmt: skip
    if vw_rev is not None:
        for k, v in vw_rev["estimates"].items():
            iv = vw_rev["intervals"].get(k)
            rows.append([f"prior, vw {k}", f"{v:.5f}", f"[{iv[0]:.5f}, {iv[1]:.5f}]" if iv else ""])
        for k in ("gaussian", "clopper_pearson", "cs"):
            iv = vw_rev["intervals"][k]
            rows.append([f"prior, vw {k} interval", "", f"[{iv[0]:.5f}, {iv[1]:.5f}]"])
    print_table("BTS from the random log", ["estimator", "value", f"{LEVEL:.0%} interval"], rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
