"""Progressive off-policy estimators: the value (mean reward) of a target policy π
from rows logged by another policy μ: (context, action a, μ's probability p of a,
reward r), with π's probability q = π(a|x) of the logged action.

With the importance weight w = q/p:

- :class:`IPS`: mean of w·r (unbiased when p > 0 wherever q > 0).
- :class:`SNIPS`: Σw·r / Σw (self-normalised: biased, lower variance, always inside
  the range of the rewards).
- :class:`DR` (doubly robust): mean of Σ_b π(b|x)·ŷ(x, b) + w·(r − ŷ(x, a)), with a
  reward model's prediction ŷ for every action (:func:`dr_parts` builds the two
  numbers). Unbiased if either p or ŷ is right; the model must not have learned from
  the row it scores (learn progressively: predict first, then update).

Confidence intervals are normal approximations, estimate ± z·se with z the standard
normal quantile of (1 + level)/2:

- IPS and DR: se² = s²/n, s² the sample variance (n − 1) of the per-row terms.
- SNIPS: the delta method, se² = Σ wᵢ²(rᵢ − V̂)² / (Σwᵢ)².

They assume many rows and finite weight variance; with few non-zero rewards (a click
log) they are rough, and below 2 rows the interval is (−inf, inf).

Each estimator is updated one row at a time (``update``) and read at any time
(``estimate``, ``interval``). The state is a handful of floats summed in row order
with Python's float arithmetic (Welford for the mean and variance of the terms), so
the same rows in the same order give bit-identical results; ``to_dict`` is JSON-able
(floats round-trip exactly through ``json``) and ``from_dict`` restores it.

>>> ev = Evaluation()
>>> for p, r, q in [(0.5, 1.0, 1.0), (0.5, 0.0, 0.0), (0.25, 1.0, 0.5), (0.5, 0.0, 1.0)]:
...     ev.update(p, r, q)
>>> ev.ips.estimate, ev.snips.estimate
(1.0, 0.6666666666666666)
>>> lo, hi = ev.ips.interval(0.95)
>>> bool(lo < 1.0 < hi)
True
>>> IPS.from_dict(ev.ips.to_dict()).to_dict() == ev.ips.to_dict()
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

__all__ = ["DR", "IPS", "SNIPS", "Difference", "Evaluation", "dr_parts"]


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level!r}")
    return NormalDist().inv_cdf((1.0 + level) / 2.0)


def _weight(probability: float, target_probability: float) -> float:
    p, q = float(probability), float(target_probability)
    if not (math.isfinite(p) and 0.0 < p <= 1.0):
        raise ValueError(
            f"probability: the logged action's probability must be in (0, 1], got {probability!r}"
        )
    if not (math.isfinite(q) and 0.0 <= q <= 1.0):
        raise ValueError(f"target_probability: must be in [0, 1], got {target_probability!r}")
    return q / p


def _finite(name: str, x: float) -> float:
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {x!r}")
    return v


class _TermMean:
    """Mean and sample variance of per-row terms (Welford), with a normal CI."""

    kind = ""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def _add(self, term: float) -> float:
        self.n += 1
        delta = term - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (term - self.mean)
        return term

    @property
    def estimate(self) -> float:
        """The estimated value (0.0 before any row)."""
        return self.mean

    @property
    def stderr(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1) / self.n) if self.n >= 2 else math.inf

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        se, z = self.stderr, _z(level)
        if math.isinf(se):
            return (-math.inf, math.inf)
        return (self.estimate - z * se, self.estimate + z * se)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "mean": self.mean, "m2": self.m2}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        if d.get("kind") != cls.kind:
            raise ValueError(f"kind: expected {cls.kind!r}, got {d.get('kind')!r}")
        est = cls()
        est.n, est.mean, est.m2 = int(d["n"]), float(d["mean"]), float(d["m2"])
        return est


class IPS(_TermMean):
    """Inverse propensity scoring: the mean of (q/p)·r."""

    kind = "ips"

    def update(self, probability: float, reward: float, target_probability: float) -> float:
        """Add one row; returns its term."""
        return self._add(_weight(probability, target_probability) * _finite("reward", reward))


class DR(_TermMean):
    """Doubly robust: the mean of direct + (q/p)·(r − predicted), where ``direct`` =
    Σ_b π(b|x)·ŷ(x, b) and ``predicted`` = ŷ(x, a) of the logged action a."""

    kind = "dr"

    def update(
        self,
        probability: float,
        reward: float,
        target_probability: float,
        direct: float = 0.0,
        predicted: float = 0.0,
    ) -> float:
        w = _weight(probability, target_probability)
        r = _finite("reward", reward)
        return self._add(_finite("direct", direct) + w * (r - _finite("predicted", predicted)))


class Difference(_TermMean):
    """The mean of per-row differences of two policies' terms on the same rows (paired:
    much of the two policies' variance cancels), with its standard error."""

    kind = "difference"

    def add(self, term: float) -> float:
        return self._add(_finite("difference", term))


class SNIPS:
    """Self-normalised IPS: Σw·r / Σw, with a delta-method interval."""

    kind = "snips"
    _FIELDS = ("sw", "swr", "sw2", "sw2r", "sw2r2")

    def __init__(self) -> None:
        self.n = 0
        self.sw = self.swr = self.sw2 = self.sw2r = self.sw2r2 = 0.0

    def update(self, probability: float, reward: float, target_probability: float) -> float:
        """Add one row; returns its weight."""
        w = _weight(probability, target_probability)
        r = _finite("reward", reward)
        self.n += 1
        self.sw += w
        self.swr += w * r
        self.sw2 += w * w
        self.sw2r += w * w * r
        self.sw2r2 += w * w * r * r
        return w

    @property
    def estimate(self) -> float:
        """Σw·r / Σw (0.0 while Σw is 0)."""
        return self.swr / self.sw if self.sw > 0.0 else 0.0

    @property
    def stderr(self) -> float:
        if self.n < 2 or self.sw <= 0.0:
            return math.inf
        v = self.estimate
        # Σ w²(r − v)², expanded over the running sums (clipped at 0 against rounding)
        num = max(0.0, self.sw2r2 - 2.0 * v * self.sw2r + v * v * self.sw2)
        return math.sqrt(num) / self.sw

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        se, z = self.stderr, _z(level)
        if math.isinf(se):
            return (-math.inf, math.inf)
        return (self.estimate - z * se, self.estimate + z * se)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, **{f: getattr(self, f) for f in self._FIELDS}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SNIPS:
        if d.get("kind") != cls.kind:
            raise ValueError(f"kind: expected {cls.kind!r}, got {d.get('kind')!r}")
        est = cls()
        est.n = int(d["n"])
        for f in cls._FIELDS:
            setattr(est, f, float(d[f]))
        return est


def dr_parts(
    target_probabilities: Sequence[float], predictions: Sequence[float], action: int
) -> tuple[float, float, float]:
    """``(target_probability, direct, predicted)`` for :meth:`DR.update` from π's
    probability and the reward model's prediction for every action, and the logged
    action's index. ``direct`` is summed in action order (``math.fsum``)."""
    if len(target_probabilities) != len(predictions):
        raise ValueError("predictions: one per action, as many as target_probabilities")
    if not 0 <= action < len(predictions):
        raise ValueError(f"action: must be in 0..{len(predictions) - 1}, got {action!r}")
    direct = math.fsum(
        float(q) * float(y) for q, y in zip(target_probabilities, predictions, strict=True)
    )
    return float(target_probabilities[action]), direct, float(predictions[action])


class Evaluation:
    """IPS, SNIPS and DR of one target policy, updated together."""

    def __init__(self) -> None:
        self.ips, self.snips, self.dr = IPS(), SNIPS(), DR()

    def update(
        self,
        probability: float,
        reward: float,
        target_probability: float,
        direct: float = 0.0,
        predicted: float = 0.0,
    ) -> float:
        """One logged row; without ``direct``/``predicted`` DR has a zero reward model
        (and equals IPS). Returns the row's DR term."""
        _weight(probability, target_probability)  # validate before touching any state
        _finite("reward", reward), _finite("direct", direct), _finite("predicted", predicted)
        self.ips.update(probability, reward, target_probability)
        self.snips.update(probability, reward, target_probability)
        return self.dr.update(probability, reward, target_probability, direct, predicted)

    def summary(self, level: float = 0.95) -> dict[str, dict[str, float]]:
        """``{"ips": {"estimate", "lo", "hi", "n"}, "snips": …, "dr": …}``."""
        out: dict[str, dict[str, float]] = {}
        for est in (self.ips, self.snips, self.dr):
            lo, hi = est.interval(level)
            out[est.kind] = {"estimate": est.estimate, "lo": lo, "hi": hi, "n": est.n}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ips": self.ips.to_dict(), "snips": self.snips.to_dict(), "dr": self.dr.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evaluation:
        ev = cls()
        ev.ips, ev.snips, ev.dr = (
            IPS.from_dict(d["ips"]),
            SNIPS.from_dict(d["snips"]),
            DR.from_dict(d["dr"]),
        )
        return ev
