"""Simulated contextual-bandit bake-off (Bietti, Agarwal & Langford 2021 protocol), in
process: multiclass data as a bandit (an action per class, reward 1 for the true class,
0 otherwise), one pass in file order, progressive (each example's reward is the chosen
action's, before the model learns from it).

Ours: one AROW regressor (diagonal, r = 1, an intercept) per action scores every action
(ŷ and its variance); an exploration policy of :mod:`learners.decisions.explore` gives
the probabilities, the draw of :func:`~learners.decisions.explore.event_uniform` (event
id = the row number, seed 0) picks one; the chosen action's regressor learns its reward
with importance weight 1/p (VW's ``mtr`` reduction). Thompson and UCB use the variance
of the mean reward (AROW's predictive variance less its noise part). Also reported: the
uniform policy's value (exactly 1/K) estimated by IPS and SNIPS from each policy's own
log, a check of the logged probabilities.

VW (same rows, same order): ``--cbify K --cb_explore_adf`` with ``--epsilon 0.05``,
``--squarecb``, ``--cover 4 --psi 0.1 --nounif``; and the supervised ``--oaa K`` as the
ceiling. VW's figure is 1 − its progressive average loss (cbify's loss is 1 for a
wrong chosen action, 0 for the right one; oaa's is the 0/1 loss).

    PYTHONPATH=. python bench/decisions_offline.py [--rows N] [--data ../shared/data/a9a/a9a]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from learners.decisions.estimators import Evaluation
from learners.decisions.explore import Policy, decide, make_policy
from learners.features import Batch, FeatureSpec
from learners.io.svmlight import read_svmlight
from learners.regression import make_regressor

OURS: dict[str, tuple[str, dict[str, float | int]]] = {
    "epsilon_greedy(0.05)": ("epsilon_greedy", {"epsilon": 0.05}),
    "softmax(0.05)": ("softmax", {"temperature": 0.05}),
    "squarecb(10, t^0.5)": ("squarecb", {"gamma": 10.0, "gamma_exponent": 0.5}),
    "thompson(1, eps 0.01)": ("thompson", {"scale": 1.0, "epsilon": 0.01, "samples": 128}),
    "ucb(1, eps 0.01)": ("ucb", {"beta": 1.0, "epsilon": 0.01}),
}
VW: dict[str, str] = {
    "vw --epsilon 0.05": "--cbify {k} --cb_explore_adf --epsilon 0.05",
    "vw --squarecb": "--cbify {k} --cb_explore_adf --squarecb",
    "vw --cover 4 --psi 0.1 --nounif": "--cbify {k} --cb_explore_adf --cover 4 --psi 0.1 --nounif",
    "vw --oaa (supervised ceiling)": "--oaa {k}",
}


def load(path: Path, rows: int | None) -> tuple[Batch, np.ndarray, list[str]]:
    """Rows with an intercept, 0-based class ids, and VW text lines of the same rows."""
    data = read_svmlight(path, n_features=123 if "a9a" in path.name else None)
    n = data.X.n_rows if rows is None else min(rows, data.X.n_rows)
    X = data.X.take(np.arange(n))
    classes = sorted(set(data.y.tolist()))
    y = np.array([classes.index(v) for v in data.y[:n].tolist()])
    lines = []
    for i in range(n):
        idx, val = X.row(i)
        feats = " ".join(f"{j + 1}:{v:g}" for j, v in zip(idx.tolist(), val.tolist(), strict=True))
        lines.append(f"{y[i] + 1} | {feats}")
    spec = FeatureSpec.sparse(X.dim, intercept=True)
    return spec.add_intercept(X), y, lines


def run_ours(policy: Policy, X: Batch, y: np.ndarray, k: int) -> dict[str, float]:
    regs = [make_regressor("arow", X.dim, {"r": 1.0}) for _ in range(k)]
    rows = [X.take([i]) for i in range(X.n_rows)]
    empty = Batch(np.array([0, 0]), np.zeros(0, dtype=np.int64), np.zeros(0), X.dim)
    ev = Evaluation()
    total = 0.0
    for i, x in enumerate(rows):
        details = [reg.predict_details(x) for reg in regs]
        s = np.array([float(v[0]) for v, _ in details])
        # the variance of the mean reward: AROW's predictive variance less its noise
        # part s²·c·r (the predictive variance of a row with no features)
        noise = [float(reg.predict_details(empty)[1][0]) for reg in regs]  # type: ignore[index]
        var = np.array(
            [
                max(float(w[0]) - c, 0.0) if w is not None else 0.0
                for (_, w), c in zip(details, noise, strict=True)
            ]
        )
        d = decide(policy, s, var, event_id=str(i), seed=0, t=i + 1)
        r = 1.0 if d.action == y[i] else 0.0
        total += r
        # the uniform policy's value (1/k), estimated off this policy's log
        ev.update(d.probability, r, 1.0 / k)
        regs[d.action].update(x, [r], sample_weight=[1.0 / d.probability])
    n = X.n_rows
    lo, hi = ev.ips.interval(0.95)
    return {
        "reward": total / n,
        "uniform_ips": ev.ips.estimate,
        "uniform_ips_lo": lo,
        "uniform_ips_hi": hi,
        "uniform_snips": ev.snips.estimate,
    }


def run_vw(args: str, lines: list[str]) -> float:
    from vowpalwabbit import Workspace

    ws = Workspace(args + " --quiet --random_seed 0")
    try:
        for line in lines:
            ws.learn(line)
        return 1.0 - ws.get_sum_loss() / ws.get_weighted_examples()
    finally:
        ws.finish()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo = Path(__file__).resolve().parents[1]
    ap.add_argument("--data", type=Path, default=repo.parent / "shared" / "data" / "a9a" / "a9a")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    opts = ap.parse_args()
    X, y, lines = load(opts.data, opts.rows)
    k = int(y.max()) + 1
    print(
        f"{opts.data.name}: {X.n_rows} rows, {X.dim} dims, {k} actions, "
        f"majority class {np.bincount(y).max() / y.size:.4f}"
    )
    out: dict[str, dict[str, float]] = {}
    for name, (pname, params) in OURS.items():
        t0 = time.process_time()
        res = run_ours(make_policy(pname, params), X, y, k)
        res["cpu_s"] = time.process_time() - t0
        out["ours " + name] = res
        print(
            f"ours {name:32s} reward {res['reward']:.4f}  {res['cpu_s']:.1f} s  (uniform "
            f"policy off this log: IPS {res['uniform_ips']:.4f} [{res['uniform_ips_lo']:.4f}, "
            f"{res['uniform_ips_hi']:.4f}], SNIPS {res['uniform_snips']:.4f}; truth {1 / k:.4f})"
        )
    for name, args in VW.items():
        t0 = time.process_time()
        reward = run_vw(args.format(k=k), lines)
        out[name] = {"reward": reward, "cpu_s": time.process_time() - t0}
        print(f"{name:37s} reward {reward:.4f}  {out[name]['cpu_s']:.1f} s")
    if opts.json:
        opts.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
