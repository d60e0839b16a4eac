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
  approximation. :func:`bts_policy_prior` is the dataset paper's way instead: BTS
  frozen at its Beta parameters of the start of the collection period (published with
  the Open Bandit Pipeline, :mod:`.open_bandit_prior`), its probability of each item at
  each position simulated. That policy can be written down, but it is not the one that
  logged: the posteriors moved over the week (the BTS log's item frequencies at a
  position are a total variation of 0.33-0.46 away from it, and 0.25 between the log's
  two halves), so its value is not BTS's own click rate, only near it.

The DR reward model is progressive and per (item, position): ŷ = (clicks + α·m)/(n + α)
with m the position's click rate so far (both from the rows before the one scored,
so the model never scores a row it learned from) and α = ``prior`` (default 200).
``reward_model="item_mean"`` is instead the model of ``learnserve evaluate-policy``: each
item's mean click so far, 0 before the item was seen (pooled over positions).

:func:`dsjson_records` turns a log into DSJSON decisions (:mod:`.dsjson`), so the same
estimates can be made through ``learnserve evaluate-policy`` and a decision model's
``POST /models/{name}/decisions``: the context is the user features and the position,
each of the 80 actions has ``_id`` = the item id, the item's features and its
user-item affinity (when not 0); the reward is the click. The chosen item's probability
is the logged ``propensity_score``; the log has no probability for the other items, so
they are given (1 − p)/79 each (the probabilities must sum to 1): only the chosen one
enters IPS, SNIPS and DR of another policy, but the ``logged``/``served`` policy's DR
direct term reads them and is not meaningful for the BTS log.
"""

from __future__ import annotations

import bisect
import csv
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from learners.decisions.dsjson import DecisionRecord, format_timestamp, write_dsjson
from learners.decisions.estimators import IPS, Evaluation

__all__ = [
    "N_ITEMS",
    "OBDLog",
    "bts_policy_nearest",
    "bts_policy_prior",
    "data_dir",
    "dsjson_records",
    "estimate",
    "load_items",
    "load_log",
    "on_policy",
    "write_log_dsjson",
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
    reward_model: str = "item_position",
) -> Evaluation:
    """IPS, SNIPS and DR of ``target``'s click rate from ``log`` (the rows at
    ``position``, or all rows pooled), in log order; DR's reward model is
    ``"item_position"`` (shrunk per (item, position)) or ``"item_mean"`` (each item's
    mean click so far, as ``learnserve evaluate-policy`` has it)."""
    if reward_model not in ("item_position", "item_mean"):
        raise ValueError(f"reward_model: item_position or item_mean, got {reward_model!r}")
    ev = Evaluation()
    item_clicks, item_shown = np.zeros(N_ITEMS), np.zeros(N_ITEMS)
    clicks = np.zeros((4, N_ITEMS))
    shown = np.zeros((4, N_ITEMS))
    pos_clicks, pos_rows = np.zeros(4), np.zeros(4)
    for i in range(len(log)):
        pos, a, r = int(log.position[i]), int(log.item[i]), float(log.click[i])
        if position is None or pos == position:
            if reward_model == "item_mean":
                yhat = np.divide(
                    item_clicks, item_shown, out=np.zeros(N_ITEMS), where=item_shown > 0
                )
            else:
                m = (pos_clicks[pos] + 0.5) / (pos_rows[pos] + 100.0)  # a weak start: 0.005
                yhat = (clicks[pos] + prior * m) / (shown[pos] + prior)
            q = target(log, i)
            direct = math.fsum((q * yhat).tolist())
            ev.update(float(log.propensity[i]), r, float(q[a]), direct, float(yhat[a]))
        clicks[pos, a] += r
        shown[pos, a] += 1.0
        pos_clicks[pos] += r
        pos_rows[pos] += 1.0
        if position is None or pos == position:
            item_clicks[a] += r
            item_shown[a] += 1.0
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


def load_items(path: str | Path) -> list[dict[str, Any]]:
    """An ``item_context.csv``: each item's features (``item_feature_0`` a number, the
    others hashed strings), in item order."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    items: list[dict[str, Any]] = [{} for _ in rows]
    for row in rows:
        feats: dict[str, Any] = {"item_feature_0": float(row["item_feature_0"])}
        feats.update({f"item_feature_{k}": row[f"item_feature_{k}"] for k in (1, 2, 3)})
        items[int(row["item_id"])] = feats
    if len(items) != N_ITEMS or not all(items):
        raise ValueError(f"{path}: expected the features of items 0..{N_ITEMS - 1}")
    return items


def dsjson_records(
    log: OBDLog, items: list[dict[str, Any]], prefix: str = "obd"
) -> Iterator[DecisionRecord]:
    """Each row of ``log`` as a DSJSON decision (see the module's docstring), event id
    ``{prefix}-{row}``, in log order."""
    k = N_ITEMS
    for i in range(len(log)):
        a, p = int(log.item[i]), float(log.propensity[i])
        context: dict[str, Any] = {f"user_feature_{j}": u for j, u in enumerate(log.user[i])}
        context["position"] = str(int(log.position[i]))
        actions = []
        for b in range(k):
            act: dict[str, Any] = {"_id": str(b), **items[b]}
            if log.affinity[i, b] != 0.0:
                act["affinity"] = float(log.affinity[i, b])
            actions.append(act)
        probs = [(1.0 - p) / (k - 1)] * k
        probs[a] = p
        when = datetime.fromtimestamp(float(log.time[i]), UTC)
        yield DecisionRecord(
            f"{prefix}-{i}", context, actions, a, probs, float(log.click[i]),
            timestamp=format_timestamp(when),
        )  # fmt: skip


def write_log_dsjson(directory: Path, policy: str, out: str | Path) -> int:
    """``directory/policy/all.csv`` (``policy``: ``random`` or ``bts``) as a DSJSON file;
    returns the number of lines."""
    log = load_log(directory / policy / "all.csv")
    items = load_items(directory / policy / "item_context.csv")
    return write_dsjson(out, dsjson_records(log, items, f"obd-{policy}"))


def bts_policy_prior(n_sim: int = 100_000, seed: int = 12345) -> tuple[TargetPolicy, np.ndarray]:
    """BTS frozen at its prior (:mod:`.open_bandit_prior`): per draw, a Beta(αᵢ, βᵢ)
    sample per item, the 3 highest at positions 1, 2, 3; the policy is each item's share
    of ``n_sim`` draws at the row's position (as ``obp``'s
    ``BernoulliTS.compute_batch_action_dist``; its examples' seed). Returns the policy
    and the (3, 80) table."""
    from learners.decisions.open_bandit_prior import ALPHA, BETA

    rng = np.random.default_rng(seed)
    alpha, beta = np.array(ALPHA, dtype=np.float64), np.array(BETA, dtype=np.float64)
    counts = np.zeros((len(POSITIONS), N_ITEMS))
    done = 0
    while done < n_sim:
        m = min(20_000, n_sim - done)
        top = np.argsort(-rng.beta(alpha, beta, size=(m, N_ITEMS)), axis=1)[:, : len(POSITIONS)]
        for k in range(len(POSITIONS)):
            counts[k] += np.bincount(top[:, k], minlength=N_ITEMS)
        done += m
    table = counts / n_sim

    def policy(log: OBDLog, i: int) -> np.ndarray:
        return table[int(log.position[i]) - 1]

    return policy, table


def logged_frequencies(log: OBDLog) -> np.ndarray:
    """(3, 80): each item's share of the rows at each position."""
    out = np.zeros((len(POSITIONS), N_ITEMS))
    for k, pos in enumerate(POSITIONS):
        rows = log.position == pos
        out[k] = np.bincount(log.item[rows], minlength=N_ITEMS) / max(1, int(rows.sum()))
    return out


def _row(est: object, level: float) -> dict[str, float]:
    lo, hi = est.interval(level)  # type: ignore[attr-defined]
    return {"estimate": est.estimate, "lo": lo, "hi": hi, "se": est.stderr}  # type: ignore[attr-defined]


def report(directory: Path, level: float = 0.95) -> dict[str, object]:
    """Every figure of the off-policy check, pooled (``"all"``) and per position:
    ``random_from_bts`` (the uniform policy's value from the BTS log, with the random
    log's on-policy value) and ``bts_from_random`` (BTS's value from the random log,
    with the nearest-in-time policy raw and normalised, BTS frozen at its prior, and
    BTS's on-policy value); ``bts_prior_distance``: per position, the total variation
    between the prior policy and the BTS log's item frequencies."""
    rnd = load_log(directory / "random" / "all.csv")
    bts = load_log(directory / "bts" / "all.csv")
    raw, check = bts_policy_nearest(bts)
    norm, _ = bts_policy_nearest(bts, normalize=True)
    prior, table = bts_policy_prior()
    tv = 0.5 * np.abs(table - logged_frequencies(bts)).sum(axis=1)
    out: dict[str, object] = {
        "bts_policy_sum": check,
        "bts_prior_distance": {
            f"position_{p}": float(d) for p, d in zip(POSITIONS, tv, strict=True)
        },
    }
    bts_targets = {"nearest": raw, "nearest_normalized": norm, "prior": prior}
    for name, logged, other, targets in (
        ("random_from_bts", bts, rnd, {"uniform": uniform_policy}),
        ("bts_from_random", rnd, bts, bts_targets),
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


if __name__ == "__main__":
    # python -m learners.decisions.open_bandit                 every figure, as JSON
    # python -m learners.decisions.open_bandit dsjson bts FILE  a log as DSJSON
    import json
    import sys

    where = data_dir()
    if where is None:
        sys.exit("no open-bandit data found")
    if sys.argv[1:2] == ["dsjson"] and len(sys.argv) == 4:
        print(write_log_dsjson(where, sys.argv[2], sys.argv[3]), "lines")
    else:
        print(json.dumps(report(where), indent=1))
