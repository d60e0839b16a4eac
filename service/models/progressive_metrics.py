"""Progressive (predict-then-learn) metrics of an online model: over a recent window
and cumulative since the model was created.

Every example is scored before the model learns it. Per applied log entry the
learner reports the examples, how many were predicted right, the sum of their hinge
losses (rankers: NDCG@10 per query) and, for binary classifiers, each example's
calibrated score z of the positive label (``learners.linear.calibration``: P =
F(z), F = Φ for the CW family, the logistic for PA). From those:

- the window: the most recent entries holding at least ``size`` examples (whole
  entries; ``size`` is the model config's ``metrics.window``, default
  ``LEARNSERVE_EVAL_WINDOW``): accuracy, mean hinge loss, mean log loss, ROC AUC
  (binary classifiers), NDCG@10 (rankers);
- cumulative: the same sums (no AUC: it needs every score) over every example
  since the model was created. They travel in the checkpoint, so a restarted
  worker continues them; a model whose last checkpoint predates them counts from
  that checkpoint.

Sums are kept exactly, as integers of 2**-1074 (every double is a whole multiple),
and divided once with correct rounding, so adding and dropping entries in any order
gives the same bits: two workers, or a worker restored from a checkpoint, report
identical figures (a float running sum would drift by ulps).

>>> w = EvalWindow(4)
>>> w.add(3, 3, 0.0, 0.0, 0); w.add(3, 0, 3.0, 0.0, 0)
>>> w.summary()["accuracy"]   # the first entry still fills the 4-example window
0.5
>>> w.add(3, 3, 0.0, 0.0, 0); s = w.summary(); s["window_examples"], s["cumulative"]["examples"]
(6, 9)
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from learners.base import UpdateResult
from learners.linear.calibration import log_loss_sum, roc_auc

__all__ = ["MAX_WINDOW", "NDCG_GAIN", "EvalWindow", "window_size"]

MAX_WINDOW = 100_000  # a window keeps each binary example's score (and checkpoints them)
_ONE = 1 << 1074  # every float64 is a whole multiple of 2**-1074

# How a ranker's progressive NDCG@10 weighs relevance (learners.ranking._ranksvm_kernels).
NDCG_GAIN = (
    "per query, scored before learning it: gain 2**rel - 1 when every relevance of the "
    "query is an integer in [0, 30], else linear gain rel - min(rel of the query)"
)


def window_size(config: dict[str, Any], default: int) -> int:
    """The model's window (``config["metrics"]["window"]``), else the service default."""
    metrics = config.get("metrics") or {}
    return int(metrics.get("window", default))


def _fixed(x: float) -> int:
    """``x`` in units of 2**-1074, exactly."""
    p, q = float(x).as_integer_ratio()  # q is a power of two <= 2**1074
    return p * (_ONE // q)


class _Sums:
    """Exact integer sums of the progressive figures."""

    __slots__ = ("correct", "groups", "logloss", "loss", "metric", "n", "n_proba")

    def __init__(self) -> None:
        self.n = self.correct = self.groups = self.n_proba = 0
        self.loss = self.metric = self.logloss = 0  # fixed point

    def add(self, e: _Entry, sign: int = 1) -> None:
        self.n += sign * e.n
        self.correct += sign * e.correct
        self.groups += sign * e.groups
        self.n_proba += sign * e.z.shape[0]
        self.loss += sign * e.loss
        self.metric += sign * e.metric
        self.logloss += sign * e.logloss

    def figures(self) -> dict[str, Any]:
        n, g = self.n, self.groups
        classifier = bool(n) and not g  # rankers report NDCG only
        return {
            "accuracy": self.correct / n if classifier else None,
            # int / int: one correctly rounded division of the exact sum
            "loss": self.loss / (_ONE * n) if classifier else None,
            "log_loss": (
                self.logloss / (_ONE * self.n_proba) if classifier and self.n_proba else None
            ),
            "ndcg_at_10": self.metric / (_ONE * g) if g else None,
        }

    def to_json(self) -> list[str]:
        # decimal strings: the fixed-point sums of a long-lived model outgrow int64
        return [str(v) for v in (self.n, self.correct, self.groups, self.n_proba, self.loss,
                                 self.metric, self.logloss)]  # fmt: skip

    @classmethod
    def from_json(cls, data: list[Any]) -> _Sums:
        s = cls()
        (s.n, s.correct, s.groups, s.n_proba, s.loss, s.metric, s.logloss) = map(int, data)
        return s


class _Entry:
    """One applied log entry's figures: its float sums (as the learner gave them; the
    checkpoint keeps these), their exact integers, the binary examples' scores."""

    __slots__ = ("correct", "floats", "groups", "logloss", "loss", "metric", "n", "pos", "z")

    def __init__(self, n: int, correct: int, loss: float, metric: float, groups: int,
                 logloss: float, z: np.ndarray, pos: np.ndarray) -> None:  # fmt: skip
        self.n, self.correct, self.groups, self.z, self.pos = n, correct, groups, z, pos
        self.floats = (float(loss), float(metric), float(logloss))
        self.loss, self.metric, self.logloss = map(_fixed, self.floats)

    def to_json(self) -> list[Any]:
        return [self.n, self.correct, *self.floats[:2], self.groups, self.floats[2],
                self.z.tolist(), self.pos.astype(np.int8).tolist()]  # fmt: skip


_NO_Z = np.empty(0)
_NO_POS = np.empty(0, dtype=np.bool_)


class EvalWindow:
    """The window and the cumulative sums of one model (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: collections.deque[_Entry] = collections.deque()
        self.win = _Sums()
        self.total = _Sums()

    # the window's sums, read by the gauges
    @property
    def n(self) -> int:
        return self.win.n

    @property
    def groups(self) -> int:
        return self.win.groups

    def add(self, n: int, correct: int, loss: float, metric: float, groups: int) -> None:
        """An entry without per-example scores (rankers; kept for the doctest and tools)."""
        self._push(_Entry(n, correct, loss, metric, groups, 0.0, _NO_Z, _NO_POS))

    def add_result(self, r: UpdateResult) -> None:
        z, pos = r.z, r.positive
        if z is None or pos is None or z.shape[0] == 0:
            z, pos, ll = _NO_Z, _NO_POS, 0.0
        else:
            ll = log_loss_sum(np.where(pos, z, -z), r.probit)
        e = _Entry(r.applied, r.correct, r.loss_sum, r.metric_sum, r.n_groups, ll, z, pos)
        self._push(e)

    def _push(self, e: _Entry, count: bool = True) -> None:
        self.entries.append(e)
        self.win.add(e)
        if count:
            self.total.add(e)
        # Drop whole entries from the front while the rest still fills the window.
        while len(self.entries) > 1 and self.win.n - self.entries[0].n >= self.size:
            self.win.add(self.entries.popleft(), -1)

    def accuracy_loss(self) -> tuple[float, float] | None:
        """(accuracy, mean hinge loss) over the window, for the gauges; None for rankers."""
        if not self.win.n or self.win.groups:
            return None
        return self.win.correct / self.win.n, self.win.loss / (_ONE * self.win.n)

    def log_loss(self) -> float | None:
        """Mean log loss over the window's binary examples, for the gauge."""
        if self.win.groups or not self.win.n_proba:
            return None
        return self.win.logloss / (_ONE * self.win.n_proba)

    def ndcg(self) -> float | None:
        return self.win.metric / (_ONE * self.win.groups) if self.win.groups else None

    def auc(self) -> float | None:
        """ROC AUC over the window's binary examples (every entry of the window must have
        scores: a model that became multiclass has none); None with one class only."""
        if not self.entries or any(e.z.shape[0] != e.n for e in self.entries):
            return None
        z = np.concatenate([e.z for e in self.entries])
        pos = np.concatenate([e.pos for e in self.entries])
        a = float(roc_auc(z, pos))
        return None if a != a else a

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"window_size": self.size, "window_examples": self.win.n}
        out.update(self.win.figures())
        if out["accuracy"] is not None:
            out["roc_auc"] = self.auc()
        else:
            out.pop("log_loss")
        total = self.total.figures()
        if total["accuracy"] is None:
            total.pop("log_loss")
        out["cumulative"] = {"examples": self.total.n, **total}
        if self.win.groups or self.total.groups:
            out["ndcg_gain"] = NDCG_GAIN
        return out

    # ------------------------------------------------------------ checkpoints
    def to_json(self) -> list[list[Any]]:
        return [e.to_json() for e in self.entries]

    def cumulative_json(self) -> list[str]:
        return self.total.to_json()

    def restore(self, meta: dict[str, Any]) -> None:
        """Load a checkpoint's window and cumulative sums (``checkpoint_meta``)."""
        cumulative = meta.get("cumulative")
        for b in meta.get("window", []):
            if len(b) >= 8:
                z = np.array(b[6], dtype=np.float64)
                pos = np.array(b[7], dtype=np.int8).astype(np.bool_)
                e = _Entry(int(b[0]), int(b[1]), float(b[2]), float(b[3]), int(b[4]),
                           float(b[5]), z, pos)  # fmt: skip
            else:  # a checkpoint of an older learnserve: no log loss, no scores
                e = _Entry(int(b[0]), int(b[1]), float(b[2]), float(b[3]), int(b[4]), 0.0,
                           _NO_Z, _NO_POS)  # fmt: skip
            self._push(e, count=cumulative is None)
        if cumulative is not None:
            self.total = _Sums.from_json(cumulative)
