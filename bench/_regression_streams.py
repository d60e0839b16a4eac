"""Streams and peers for ``bench/regression.py``: the rows, the records configs, and the
progressive (predict-then-learn) scores of River, Vowpal Wabbit and the running mean,
computed here in this run.

A stream is a list of ``(x, y)``: ``x`` a flat record (numbers, a category string, or
``None`` for a missing cell), ``y`` a float. The same rows, in the same order, go to
learnserve (as raw records through HTTP), to the in-process learner (the cross-check) and
to every peer.

- ``chick_weights``, ``trump_approval``: River's two regression benchmark data sets
  (``river.datasets.ChickWeights``: 578 rows, ``time``, ``chick``, ``diet``;
  ``TrumpApproval``: 1,001 rows, six numbers), in River's order; every field numeric,
  as River's benchmark takes them.
- ``california``: ``california-housing/housing.csv`` from the shared data (20,640 rows),
  permuted with ``numpy.random.default_rng(seed).permutation`` (the file is grouped by
  district: shuffled, the stream is stationary); target ``median_house_value``; eight
  numeric columns, ``ocean_proximity`` categorical, an empty ``total_bedrooms`` cell
  (207 rows) missing.

Peers (each fed the rows one by one, every row predicted before it is learned):

- River: ``StandardScaler() | LinearRegression()`` (defaults), the same with ``l1=1.0``,
  ``StandardScaler() | PARegressor()``, and ``dummy.StatisticRegressor(stats.Mean())``
  (the running mean). A category is one-hot (``{"ocean_proximity=NEAR BAY": 1}``); a
  missing cell is left out of the dict. Scored with ``river.metrics`` (MAE, RMSE, R2).
- Vowpal Wabbit (``vowpalwabbit.Workspace``, squared loss, its defaults: adaptive,
  normalised, invariant updates, ``-l 0.5``, a constant): the numbers as they are and
  ``ocean_proximity=<value>`` as a categorical feature; ``ws.predict(ex)`` then
  ``ws.learn(ex)`` per row. Also each ``-l`` of a small grid; the best of the grid is
  picked on the very stream it is scored on (hindsight: optimistic for VW).
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Row = tuple[dict[str, Any], float]

CALIFORNIA_NUMERIC = (
    "longitude",
    "latitude",
    "housing_median_age",
    "total_rooms",
    "total_bedrooms",
    "population",
    "households",
    "median_income",
)
CALIFORNIA_TARGET = "median_house_value"
CALIFORNIA_CATEGORY = "ocean_proximity"
VW_LEARNING_RATES = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass
class Stream:
    name: str
    rows: list[Row]
    numeric: tuple[str, ...]
    categorical: tuple[str, ...] = ()
    about: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def records_config(self, bits: int) -> dict[str, Any]:
        """Every numeric field standardised online, every categorical one one-hot."""
        fields: dict[str, Any] = {f: {"type": "numeric", "transform": "standardize"}
                                  for f in self.numeric}  # fmt: skip
        fields.update({f: {"type": "categorical"} for f in self.categorical})
        return {"kind": "records", "bits": bits, "fields": fields}


# ------------------------------------------------------------------------- streams


def river_stream(name: str, limit: int | None = None) -> Stream:
    from river import datasets

    ds = {"chick_weights": datasets.ChickWeights, "trump_approval": datasets.TrumpApproval}[name]()
    rows: list[Row] = []
    for x, y in ds:
        rows.append(({k: float(v) for k, v in x.items()}, float(y)))
        if limit is not None and len(rows) >= limit:
            break
    numeric = tuple(rows[0][0])
    return Stream(name, rows, numeric, about=f"river.datasets.{type(ds).__name__}, River's order")


def california_stream(path: Path, seed: int = 0, limit: int | None = None) -> Stream:
    with path.open(newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    perm = np.random.default_rng(seed).permutation(len(table))
    if limit is not None:
        perm = perm[:limit]
    rows: list[Row] = []
    missing = 0
    for i in perm.tolist():
        r = table[i]
        x: dict[str, Any] = {}
        for c in CALIFORNIA_NUMERIC:
            cell = r[c].strip()
            x[c] = float(cell) if cell else None
            missing += not cell
        x[CALIFORNIA_CATEGORY] = r[CALIFORNIA_CATEGORY].strip()
        rows.append((x, float(r[CALIFORNIA_TARGET])))
    return Stream(
        "california",
        rows,
        CALIFORNIA_NUMERIC,
        (CALIFORNIA_CATEGORY,),
        about=f"{path.name}, {len(table):,} rows, permuted with default_rng({seed})",
        extra={"missing_cells": missing, "seed": seed, "file_rows": len(table)},
    )


# ------------------------------------------------------------------------- scores


@dataclass
class Scores:
    """Progressive figures from the predictions made before each row was learned."""

    n: int
    mae: float
    rmse: float
    r2: float | None
    interval_coverage: float | None = None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def scores(y: Sequence[float], pred: Sequence[float], variance: Sequence[float] | None = None,
           seconds: float | None = None) -> Scores:  # fmt: skip
    """MAE, RMSE, R² (against the mean of the same targets, River's ``metrics.R2``) and
    the share of targets within ŷ ± 1.645·√variance (the central 90 % interval)."""
    ya, pa = np.asarray(y, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    e = ya - pa
    spread = float(((ya - ya.mean()) ** 2).sum())
    r2 = 1.0 - float((e * e).sum()) / spread if len(ya) > 1 and spread > 0 else None
    cov = None
    if variance is not None:
        half = 1.6448536269514722 * np.sqrt(np.asarray(variance, dtype=np.float64))
        cov = float((np.abs(e) <= half).mean())
    return Scores(len(ya), float(np.abs(e).mean()), math.sqrt(float((e * e).mean())), r2, cov,
                  seconds)  # fmt: skip


# ------------------------------------------------------------------------- River


def river_x(x: dict[str, Any]) -> dict[str, float]:
    """Numbers as they are, a category one-hot, a missing cell left out."""
    out: dict[str, float] = {}
    for k, v in x.items():
        if v is None:
            continue
        if isinstance(v, str):
            out[f"{k}={v}"] = 1.0
        else:
            out[k] = float(v)
    return out


def river_models() -> dict[str, Callable[[], Any]]:
    from river import dummy, linear_model, preprocessing, stats

    return {
        "River StandardScaler | LinearRegression": lambda: (
            preprocessing.StandardScaler() | linear_model.LinearRegression()
        ),
        "River StandardScaler | LinearRegression(l1=1.0)": lambda: (
            preprocessing.StandardScaler() | linear_model.LinearRegression(l1=1.0)
        ),
        "River StandardScaler | PARegressor": lambda: (
            preprocessing.StandardScaler() | linear_model.PARegressor()
        ),
        "running mean (River StatisticRegressor(Mean))": lambda: dummy.StatisticRegressor(
            stats.Mean()
        ),
    }


def run_river(make: Callable[[], Any], rows: Sequence[Row]) -> Scores:
    """Predict-then-learn, scored with ``river.metrics`` (our :func:`scores` agrees)."""
    from river import metrics

    model = make()
    mae, rmse, r2 = metrics.MAE(), metrics.RMSE(), metrics.R2()
    xs = [river_x(x) for x, _ in rows]
    preds: list[float] = []
    t0 = time.perf_counter()
    for x, (_, y) in zip(xs, rows, strict=True):
        p = model.predict_one(x)
        p = 0.0 if p is None else float(p)
        preds.append(p)
        mae.update(y, p)
        rmse.update(y, p)
        r2.update(y, p)
        model.learn_one(x, y)
    seconds = time.perf_counter() - t0
    ours = scores([y for _, y in rows], preds, seconds=seconds)
    # River's own metrics are the figures reported; ours must agree (same definitions)
    assert math.isclose(ours.mae, mae.get(), rel_tol=1e-9), (ours.mae, mae.get())
    r2_river = r2.get()
    return Scores(len(rows), mae.get(), rmse.get(), r2_river, None, seconds)


# ------------------------------------------------------------------------- VW


def vw_line(x: dict[str, Any], y: float) -> str:
    """``y |n name:value ... |c field=value``: numbers as they are, a missing cell left
    out, spaces in a category value as ``_`` (VW's text format splits on spaces)."""
    nums = " ".join(f"{k}:{v!r}" for k, v in x.items() if v is not None and not isinstance(v, str))
    cats = " ".join(f"{k}={v.replace(' ', '_')}" for k, v in x.items() if isinstance(v, str))
    line = f"{y!r} |n {nums}"
    return f"{line} |c {cats}" if cats else line


def run_vw(rows: Sequence[Row], learning_rate: float | None = None) -> Scores:
    from vowpalwabbit import Workspace

    args = "--quiet --loss_function squared"
    if learning_rate is not None:
        args += f" -l {learning_rate:g}"
    ws = Workspace(args)
    lines = [vw_line(x, y) for x, y in rows]
    preds: list[float] = []
    t0 = time.perf_counter()
    for line in lines:
        ex = ws.parse(line)
        preds.append(float(ws.predict(ex)))
        ws.learn(ex)
        ws.finish_example(ex)
    seconds = time.perf_counter() - t0
    ws.finish()
    return scores([y for _, y in rows], preds, seconds=seconds)
