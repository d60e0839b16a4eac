"""Progressive (predict-then-learn) metrics of an online regressor: MAE, RMSE, R² and the
coverage of the served interval, over a recent window and since the model was created.

Every example is predicted before the model learns it (``UpdateResult.predicted``,
in the target's units). Per applied log entry the window keeps the examples, the sums
of |y − ŷ|, (y − ŷ)², y and y², and, for learners that serve an interval (AROW), how
many targets fell inside the central 90 % interval ŷ ± 1.645·√variance. From those:

- MAE = Σ|y − ŷ| / n; RMSE = √(Σ(y − ŷ)² / n);
- R² = 1 − Σ(y − ŷ)² / Σ(y − ȳ)², with ȳ the mean of the same targets (River's
  ``metrics.R2``: the model against predicting the mean of what it was scored on;
  below 0 is worse than that mean); None with fewer than two targets or all equal;
- ``interval_coverage``: the share of targets inside the served 90 % interval (0.9
  when the variance is calibrated).

The sums are exact integers of 2**-1074 (every double is a whole multiple), as in
:mod:`service.models.progressive_metrics`, so two workers, or a worker restored from a
checkpoint, report the same bits. The window keeps whole entries: the most recent ones
holding at least ``size`` examples.

>>> import numpy as np
>>> from learners.base import UpdateResult
>>> w = RegressionWindow(10)
>>> w.add_result(UpdateResult(3, predicted=np.array([1.0, 2.0, 3.0]),
...                           targets=np.array([1.0, 3.0, 5.0])))
>>> s = w.summary(); s["mae"], s["rmse"], round(s["r2"], 4)
(1.0, 1.2909944487358056, 0.375)
"""

from __future__ import annotations

import collections
import math
from typing import Any

import numpy as np

from learners.base import UpdateResult
from service.models.progressive_metrics import _ONE, _fixed

INTERVAL_LEVEL = 0.9
Z90 = 1.6448536269514722  # Φ⁻¹(0.95): the half-width of the central 90 % interval, in σ


class _Sums:
    """Exact sums: examples, |e|, e², y, y² (fixed point), interval rows and hits."""

    __slots__ = ("abs", "covered", "n", "n_interval", "sq", "y", "yy")

    def __init__(self) -> None:
        self.n = self.n_interval = self.covered = 0
        self.abs = self.sq = self.y = self.yy = 0

    def add(self, e: _Entry, sign: int = 1) -> None:
        self.n += sign * e.n
        self.n_interval += sign * e.n_interval
        self.covered += sign * e.covered
        self.abs += sign * e.fixed[0]
        self.sq += sign * e.fixed[1]
        self.y += sign * e.fixed[2]
        self.yy += sign * e.fixed[3]

    def figures(self) -> dict[str, Any]:
        n = self.n
        if not n:
            return {"mae": None, "rmse": None, "r2": None, "interval_coverage": None}
        # n·Σ(y − ȳ)² = n·Σy² − (Σy)², in units of 2**-2148: exact
        spread = n * self.yy * _ONE - self.y * self.y
        r2 = 1.0 - (n * self.sq * _ONE) / spread if n > 1 and spread > 0 else None
        return {
            "mae": self.abs / (_ONE * n),
            "rmse": math.sqrt(self.sq / (_ONE * n)),
            "r2": r2,
            "interval_coverage": self.covered / self.n_interval if self.n_interval else None,
        }

    def to_json(self) -> list[str]:
        return [str(v) for v in (self.n, self.n_interval, self.covered, self.abs, self.sq,
                                 self.y, self.yy)]  # fmt: skip

    @classmethod
    def from_json(cls, data: list[Any]) -> _Sums:
        s = cls()
        (s.n, s.n_interval, s.covered, s.abs, s.sq, s.y, s.yy) = map(int, data)
        return s


class _Entry:
    """One applied entry's figures: float sums as computed (the checkpoint keeps
    these) and their exact integers."""

    __slots__ = ("covered", "fixed", "floats", "n", "n_interval")

    def __init__(self, n: int, floats: tuple[float, float, float, float], n_interval: int,
                 covered: int) -> None:  # fmt: skip
        self.n, self.n_interval, self.covered = n, n_interval, covered
        self.floats = tuple(float(f) for f in floats)
        self.fixed = tuple(map(_fixed, self.floats))

    def to_json(self) -> list[Any]:
        return [self.n, *self.floats, self.n_interval, self.covered]


def entry_of(r: UpdateResult) -> _Entry:
    """The figures of one update: pre-update predictions against the targets."""
    if r.targets is not None and r.predicted is not None and len(r.targets) == 1:
        return _one(float(r.targets[0]), float(r.predicted[0]), r.variance)
    y = np.asarray(r.targets, dtype=np.float64)
    p = np.asarray(r.predicted, dtype=np.float64)
    e = y - p
    floats = (float(np.abs(e).sum()), float((e * e).sum()), float(y.sum()), float((y * y).sum()))
    n_interval = covered = 0
    if r.variance is not None:
        half = Z90 * np.sqrt(np.asarray(r.variance, dtype=np.float64))
        n_interval = int(y.shape[0])
        covered = int((np.abs(e) <= half).sum())
    return _Entry(int(y.shape[0]), floats, n_interval, covered)


def _one(t: float, p: float, variance: np.ndarray | None) -> _Entry:
    """``entry_of`` of one example (the usual small update): the same sums without
    numpy's per-call overhead (one term: the sums are the terms themselves)."""
    e = t - p
    covered = n_interval = 0
    if variance is not None:
        n_interval = 1
        covered = int(abs(e) <= Z90 * math.sqrt(float(variance[0])))
    return _Entry(1, (abs(e), e * e, t, t * t), n_interval, covered)


class RegressionWindow:
    """The window and cumulative sums of one regressor (the interface of
    :class:`service.models.progressive_metrics.EvalWindow` the engine reads)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: collections.deque[_Entry] = collections.deque()
        self.win = _Sums()
        self.total = _Sums()

    @property
    def n(self) -> int:
        return self.win.n

    groups = 0

    def add_result(self, r: UpdateResult) -> None:
        if r.predicted is None or r.targets is None:
            return
        self._push(entry_of(r))

    def _push(self, e: _Entry, count: bool = True) -> None:
        self.entries.append(e)
        self.win.add(e)
        if count:
            self.total.add(e)
        while len(self.entries) > 1 and self.win.n - self.entries[0].n >= self.size:
            self.win.add(self.entries.popleft(), -1)

    # the classifier's and ranker's gauges: none here
    def accuracy_loss(self) -> None:
        return None

    def log_loss(self) -> None:
        return None

    def ndcg(self) -> None:
        return None

    def auc(self) -> None:
        return None

    def regression(self) -> dict[str, Any] | None:
        """MAE, RMSE, R² and interval coverage over the window (the gauges)."""
        return self.win.figures() if self.win.n else None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"window_size": self.size, "window_examples": self.win.n}
        out.update(self.win.figures())
        out["cumulative"] = {"examples": self.total.n, **self.total.figures()}
        out["interval_level"] = INTERVAL_LEVEL
        return out

    def to_json(self) -> list[list[Any]]:
        return [e.to_json() for e in self.entries]

    def cumulative_json(self) -> list[str]:
        return self.total.to_json()

    def restore(self, meta: dict[str, Any]) -> None:
        cumulative = meta.get("cumulative")
        for b in meta.get("window", []):
            e = _Entry(int(b[0]), (float(b[1]), float(b[2]), float(b[3]), float(b[4])),
                       int(b[5]), int(b[6]))  # fmt: skip
            self._push(e, count=cumulative is None)
        if cumulative is not None:
            self.total = _Sums.from_json(cumulative)
