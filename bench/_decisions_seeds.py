"""Seeds for the decisions bake-off (``bench/decisions.py --seeds N``): the same rows in
the same order, each policy run once per seed, then the mean, the standard deviation
and each seed's figure, and the difference of two policies' means with its standard
error.

Ours in process: the decision model's adapter (what the ``rank`` and ``reward`` routes
call), fed each decision's reward before the next row is ranked; ``bench/decisions.py``
runs the first seed through HTTP too and checks the two figures are equal (the rewards
are 0 or 1, so equal figures mean the same chosen action count, and in practice the
same decisions). The seed of ours is the model's ``seed`` (the draw
``event_uniform(event_id, seed)``); VW's explorers take theirs through
``bench/_vw_cbify.py`` (cbify's draw ignores ``--random_seed``); ``--oaa`` has no
draw (one run).

>>> s = summary([0.5, 0.7])
>>> round(s["mean"], 3), round(s["std"], 4), s["runs"]
(0.6, 0.1414, [0.5, 0.7])
>>> d = difference(summary([0.5, 0.7]), summary([0.5, 0.5]))
>>> round(d["mean"], 3), round(d["se"], 4)
(0.1, 0.1)
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np


def inprocess_reward(data: tuple[list[Any], np.ndarray, int], body: dict[str, Any]) -> float:
    """The progressive reward of the decision model ``body`` on ``data`` in process."""
    from service.models import decision_features as df
    from service.models.decision import DecisionAdapter
    from service.settings import Settings

    ctx, y, k = data
    settings = Settings(data_dir="/tmp/unused")
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(body, settings))
    actions = [{"id": str(a), "features": {}} for a in range(k)]
    total = 0.0
    for i, (x, truth) in enumerate(zip(ctx, y.tolist(), strict=True)):
        answer, record = model.rank({"context": x, "actions": actions}, settings, str(i), 0)
        reward = 1.0 if answer["action"] == str(truth) else 0.0
        total += reward
        batch, ev = df.decode_event(record, model.spec.dim)
        ev = {key: v for key, v in ev.items() if key not in ("s", "rank")}
        model.apply(df.reward_entry([(batch, ev)], [reward]))
    return total / len(y)


def run_vw(args: str, lines: list[str], seed: int = 0) -> float:
    """VW's progressive figure (1 − its progressive average loss) with ``--random_seed``."""
    from vowpalwabbit import Workspace

    ws = Workspace(f"{args} --quiet --random_seed {int(seed)}")
    try:
        for line in lines:
            ws.learn(line)
        return float(1.0 - ws.get_sum_loss() / ws.get_weighted_examples())
    finally:
        ws.finish()


def summary(runs: list[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one run) and each seed's figure."""
    std = statistics.stdev(runs) if len(runs) > 1 else 0.0
    return {"mean": statistics.fmean(runs), "std": std, "runs": list(runs)}


def difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """a's mean − b's, and its standard error √(s_a²/n_a + s_b²/n_b) (the seeds of
    the two are independent draws; 0 when either has one run)."""
    se = math.sqrt(a["std"] ** 2 / len(a["runs"]) + b["std"] ** 2 / len(b["runs"]))
    return {"mean": a["mean"] - b["mean"], "se": se}


def comparisons(figures: dict[str, dict[str, Any]], default: str) -> dict[str, Any]:
    """The default's mean against each VW explorer's and against the best of them (the
    best by mean, chosen on the same runs: slightly optimistic for VW)."""
    vw = {
        k: v
        for k, v in figures.items()
        if k.startswith("vw ") and "oaa" not in k and "seed-independent" not in k
    }
    out: dict[str, Any] = {}
    if default not in figures or not vw:
        return out
    for label, s in vw.items():
        out[f"{default} - {label}"] = difference(figures[default], s)
    best = max(vw, key=lambda k: vw[k]["mean"])
    out["vw best"] = best
    out[f"{default} - vw best"] = difference(figures[default], vw[best])
    return out
