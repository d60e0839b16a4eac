"""The Open Bandit Dataset (Saito et al., NeurIPS 2021 Datasets and Benchmarks): read a
log and estimate one logging policy's value from the other policy's log.

Each row is one slot (a user, one of 3 positions) where the logging policy showed one of
80 items; the reward is a click on it. The value of a policy is its click rate per slot:
pooled over the positions (the mean over all rows, positions weighted as logged: each
log has about a third of its rows at each position) or per position.

- ``random/all.csv`` was logged by the uniform random policy: every item has probability
  1/80 at every position, so its on-policy value is the log's mean click.
- ``bts/all.csv`` was logged by Bernoulli Thompson Sampling (context-free, its
  posteriors re-estimated over time); ``propensity_score`` is its probability of the
  logged item at that position *at that time*, and nothing in the log gives its
  probabilities of the other items. :func:`bts_policy_nearest` approximates them by the
  propensity of the same (item, position) logged nearest in time (0 for a pair the
  BTS log never shows) and reports how far those approximate distributions are from
  summing to 1; the estimates of BTS's value from the random log rest on that
  approximation.

The DR reward model is progressive and per (item, position): ŷ = (clicks + α·m)/(n + α)
with m the position's click rate so far (both from the rows before the one scored,
so the model never scores a row it learned from) and α = ``prior`` (default 200).
"""

from __future__ import annotations

import bisect
import csv
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from learners.decisions.estimators import IPS, Evaluation

__all__ = [
    "N_ITEMS",
    "OBDLog",
    "bts_policy_nearest",
    "data_dir",
    "estimate",
    "load_log",
    "on_policy",
]

N_ITEMS = 80
POSITIONS = (1, 2, 3)


def data_dir() -> Path | None:
    """``$LEARNSERVE_SHARED_DATA/open-bandit`` if set, else ``../shared/data/open-bandit``
    beside the repository; None when absent."""
    env = os.environ.get("LEARNSERVE_SHARED_DATA")
    repo = Path(__file__).resolve().parents[2]
    for base in ([Path(env)] if env else []) + [repo.parent / "shared" / "data"]:
        if (base / "open-bandit" / "random" / "all.csv").is_file():
            return base / "open-bandit"
    return None


@dataclass(frozen=True)
class OBDLog:
    """One log, in file order: time (seconds since the epoch), item (0-79), position
    (1-3), click (0/1), the logging policy's propensity, user features, affinities."""

    time: np.ndarray
    item: np.ndarray
    position: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    user: list[tuple[str, ...]]
    affinity: np.ndarray  # (n, 80)

    def __len__(self) -> int:
        return int(self.item.shape[0])


def load_log(path: str | Path) -> OBDLog:
    """Read an ``all.csv`` of the Open Bandit Dataset."""
    cols: dict[str, list[str]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    for j, name in enumerate(header):
        cols[name] = [r[j] for r in rows]
    aff = [f"user-item_affinity_{k}" for k in range(N_ITEMS)]
    users = [f"user_feature_{k}" for k in range(4)]
    return OBDLog(
        time=np.array([datetime.fromisoformat(t).timestamp() for t in cols["timestamp"]]),
        item=np.array(cols["item_id"], dtype=np.int64),
        position=np.array(cols["position"], dtype=np.int64),
        click=np.array(cols["click"], dtype=np.float64),
        propensity=np.array(cols["propensity_score"], dtype=np.float64),
        user=list(zip(*(cols[u] for u in users), strict=True)),
        affinity=np.array([cols[a] for a in aff], dtype=np.float64).T,
    )


# a target policy: (log, row) -> the probability of every item at the row's position
TargetPolicy = Callable[[OBDLog, int], np.ndarray]


def uniform_policy(log: OBDLog, i: int) -> np.ndarray:
    return np.full(N_ITEMS, 1.0 / N_ITEMS)


def estimate(
    log: OBDLog,
    target: TargetPolicy = uniform_policy,
    position: int | None = None,
    prior: float = 200.0,
) -> Evaluation:
    """IPS, SNIPS and DR of ``target``'s click rate from ``log`` (the rows at
    ``position``, or all rows pooled), in log order."""
    ev = Evaluation()
    clicks = np.zeros((4, N_ITEMS))
    shown = np.zeros((4, N_ITEMS))
    pos_clicks, pos_rows = np.zeros(4), np.zeros(4)
    for i in range(len(log)):
        pos, a, r = int(log.position[i]), int(log.item[i]), float(log.click[i])
        if position is None or pos == position:
            m = (pos_clicks[pos] + 0.5) / (pos_rows[pos] + 100.0)  # a weak start: 0.005
            yhat = (clicks[pos] + prior * m) / (shown[pos] + prior)
            q = target(log, i)
            direct = math.fsum((q * yhat).tolist())
            ev.update(float(log.propensity[i]), r, float(q[a]), direct, float(yhat[a]))
        clicks[pos, a] += r
        shown[pos, a] += 1.0
        pos_clicks[pos] += r
        pos_rows[pos] += 1.0
    return ev


def on_policy(log: OBDLog, position: int | None = None) -> IPS:
    """The logging policy's own click rate, as an IPS estimate with weight 1 (the mean
    click and its normal interval)."""
    est = IPS()
    for i in range(len(log)):
        if position is None or int(log.position[i]) == position:
            est.update(1.0, float(log.click[i]), 1.0)
    return est


def bts_policy_nearest(
    bts: OBDLog, normalize: bool = False
) -> tuple[TargetPolicy, dict[str, float]]:
    """An approximate BTS policy for any time: per (position, item), the propensity
    logged nearest in time in ``bts`` (divided by their sum over the items when
    ``normalize``); with the min, mean and max of that sum over every 10th row of
    ``bts`` before normalising (how far from a distribution the raw approximation is)."""
    times: dict[tuple[int, int], list[float]] = {}
    props: dict[tuple[int, int], list[float]] = {}
    order = np.argsort(bts.time, kind="stable")
    for i in order.tolist():
        key = (int(bts.position[i]), int(bts.item[i]))
        times.setdefault(key, []).append(float(bts.time[i]))
        props.setdefault(key, []).append(float(bts.propensity[i]))

    def nearest(key: tuple[int, int], t: float) -> float:
        ts = times.get(key)
        if not ts:
            return 0.0
        j = bisect.bisect_left(ts, t)
        best = min((k for k in (j - 1, j) if 0 <= k < len(ts)), key=lambda k: abs(ts[k] - t))
        return props[key][best]

    def policy(log: OBDLog, i: int) -> np.ndarray:
        pos, t = int(log.position[i]), float(log.time[i])
        return np.array([nearest((pos, a), t) for a in range(N_ITEMS)])

    def normalized(log: OBDLog, i: int) -> np.ndarray:
        q = policy(log, i)
        return q / q.sum()

    sums = np.array([policy(bts, i).sum() for i in range(0, len(bts), 10)])
    if normalize:
        return normalized, {
            "min": float(sums.min()),
            "mean": float(sums.mean()),
            "max": float(sums.max()),
        }
    return policy, {"min": float(sums.min()), "mean": float(sums.mean()), "max": float(sums.max())}


def _row(est: object, level: float) -> dict[str, float]:
    lo, hi = est.interval(level)  # type: ignore[attr-defined]
    return {"estimate": est.estimate, "lo": lo, "hi": hi, "se": est.stderr}  # type: ignore[attr-defined]


def report(directory: Path, level: float = 0.95) -> dict[str, object]:
    """Every figure of the off-policy check, pooled (``"all"``) and per position:
    ``random_from_bts`` (the uniform policy's value from the BTS log, with the random
    log's on-policy value) and ``bts_from_random`` (BTS's value from the random log,
    with the nearest-in-time policy raw and normalised, and BTS's on-policy value)."""
    rnd = load_log(directory / "random" / "all.csv")
    bts = load_log(directory / "bts" / "all.csv")
    raw, check = bts_policy_nearest(bts)
    norm, _ = bts_policy_nearest(bts, normalize=True)
    out: dict[str, object] = {"bts_policy_sum": check}
    for name, logged, other, targets in (
        ("random_from_bts", bts, rnd, {"uniform": uniform_policy}),
        ("bts_from_random", rnd, bts, {"nearest": raw, "nearest_normalized": norm}),
    ):
        part: dict[str, object] = {}
        for pos in (None, *POSITIONS):
            key = "all" if pos is None else f"position_{pos}"
            fig: dict[str, object] = {"on_policy": _row(on_policy(other, pos), level)}
            for tname, target in targets.items():
                ev = estimate(logged, target, pos)
                fig[tname] = {e.kind: _row(e, level) for e in (ev.ips, ev.snips, ev.dr)}
            part[key] = fig
        out[name] = part
    return out


if __name__ == "__main__":  # python -m learners.decisions.open_bandit
    import json

    where = data_dir()
    print(json.dumps(report(where), indent=1) if where else "no open-bandit data found")
