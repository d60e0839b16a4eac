"""Page-Hinkley test (Page, Biometrika 1954), as River's ``drift.PageHinkley``.

With x̄ₜ the running mean of the values since the last reset and dₜ = xₜ − x̄ₜ, two
faded cumulative sums are kept:

    Uₜ = α Uₜ₋₁ + dₜ − δ    (a rise of the mean makes U climb above its minimum)
    Lₜ = α Lₜ₋₁ + dₜ + δ    (a fall makes L drop below its maximum)

Once ``min_instances`` values have been seen, a drift is signalled when
Uₜ − min U > ``threshold`` (mode "up"), max L − Lₜ > ``threshold`` ("down"), or
either ("both"). As in River, the update after a detection starts afresh (mean,
sums and extremes reset; the maximum of L restarts at −1, River's initial value).

Detections agree exactly with River 0.26's ``river.drift.PageHinkley`` for the same
parameters and values (tests/learners/test_drift_page_hinkley.py): the running mean
is River's ``stats.Mean`` update ``mean += (1/n)(x − mean)`` (not ``(x − mean)/n``,
which rounds differently), and every sum is associated as River writes it.
``n_detections`` counts detections since construction (River has no counter).
Non-finite values are refused. All arithmetic is IEEE-754 +, −, ×, ÷: the same values
give the same state bits on any machine.

>>> import numpy as np
>>> rng = np.random.default_rng(7)
>>> losses = np.concatenate([rng.random(1000) * 0.4, 0.6 + rng.random(1000) * 0.4])
>>> detector = PageHinkley()
>>> np.flatnonzero(detector.update_many(losses)).tolist()
[1087]
>>> restored = PageHinkley.from_state(detector.params, detector.to_state())
>>> restored.to_state() == detector.to_state()
True
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from learners.drift._checks import (
    check_format,
    check_params,
    decode_float,
    encode_float,
    float_param,
    int_param,
    state_bool,
    state_field,
    state_int,
)
from learners.drift._detector import DriftDetector

__all__ = ["PageHinkley"]

_FORMAT = "page_hinkley/1"
_PARAM_NAMES = {"min_instances", "delta", "threshold", "alpha", "mode"}
_MODES = ("up", "down", "both")

# stats float64[6] and counters int64[2] (indices)
_N, _MEAN, _SUM_UP, _SUM_DOWN, _MIN_UP, _MAX_DOWN = range(6)
_N_DETECTIONS, _PENDING_RESET = range(2)
_MODE_UP, _MODE_DOWN, _MODE_BOTH = range(3)
_STAT_FIELDS = ("mean", "sum_increase", "sum_decrease", "min_increase", "max_decrease")


@njit(cache=True)
def _clear(stats):  # pragma: no cover - numba
    stats[_N] = 0.0
    stats[_MEAN] = 0.0
    stats[_SUM_UP] = 0.0
    stats[_SUM_DOWN] = 0.0
    stats[_MIN_UP] = np.inf
    stats[_MAX_DOWN] = -1.0


@njit(cache=True)
def page_hinkley_run(  # pragma: no cover - numba
    values, detected, stats, counters, min_instances, delta, threshold, alpha, mode
):
    """Feed ``values`` in order; ``detected[i]`` is whether value i signalled drift."""
    for i in range(values.shape[0]):
        if counters[_PENDING_RESET]:
            _clear(stats)
            counters[_PENDING_RESET] = 0
        x = values[i]
        n = stats[_N] + 1.0
        stats[_N] = n
        mean = stats[_MEAN] + 1.0 / n * (x - stats[_MEAN])
        stats[_MEAN] = mean
        dev = x - mean
        up = alpha * stats[_SUM_UP] + dev - delta
        down = alpha * stats[_SUM_DOWN] + dev + delta
        stats[_SUM_UP] = up
        stats[_SUM_DOWN] = down
        if up < stats[_MIN_UP]:
            stats[_MIN_UP] = up
        if down > stats[_MAX_DOWN]:
            stats[_MAX_DOWN] = down
        found = False
        if n >= min_instances:
            rise = up - stats[_MIN_UP] > threshold
            fall = stats[_MAX_DOWN] - down > threshold
            if mode == _MODE_UP:
                found = rise
            elif mode == _MODE_DOWN:
                found = fall
            else:
                found = rise or fall
        detected[i] = found
        if found:
            counters[_N_DETECTIONS] += 1
            counters[_PENDING_RESET] = 1


class PageHinkley(DriftDetector):
    """Page-Hinkley drift detector; see the module docstring.

    Parameters (River's names and defaults):

    - ``min_instances``: values seen (since the last reset) before any test (>= 1);
    - ``delta``: tolerated drift of the mean per value (>= 0);
    - ``threshold``: the test's λ (> 0);
    - ``alpha``: fading factor of the cumulative sums, in (0, 1];
    - ``mode``: "up", "down" or "both" (which changes of the mean to signal).
    """

    _N_DETECTIONS = _N_DETECTIONS
    _PENDING_RESET = _PENDING_RESET

    def __init__(
        self,
        min_instances: int = 30,
        delta: float = 0.005,
        threshold: float = 50.0,
        alpha: float = 1 - 0.0001,
        mode: str = "both",
    ) -> None:
        p = self.checked_params(min_instances, delta, threshold, alpha, mode)
        self.min_instances: int = p["min_instances"]
        self.delta: float = p["delta"]
        self.threshold: float = p["threshold"]
        self.alpha: float = p["alpha"]
        self.mode: str = p["mode"]
        self._stats = np.zeros(6, dtype=np.float64)
        self._counters = np.zeros(2, dtype=np.int64)
        _clear(self._stats)

    @staticmethod
    def checked_params(
        min_instances: int = 30,
        delta: float = 0.005,
        threshold: float = 50.0,
        alpha: float = 1 - 0.0001,
        mode: str = "both",
    ) -> dict[str, Any]:
        """The constructor's parameters, checked as it checks them (``ValueError`` naming
        ``params.<name>``) without building a detector: what a service validates a
        stored config with."""
        inf = float("inf")
        checked = {
            "min_instances": int_param("min_instances", min_instances, 1),
            "delta": float_param("delta", delta, 0.0, inf, low_open=False, high_open=True),
            "threshold": float_param("threshold", threshold, 0.0, inf, high_open=True),
            "alpha": float_param("alpha", alpha, 0.0, 1.0, high_open=False),
        }
        if mode not in _MODES:
            raise ValueError(f"params.mode: must be one of {list(_MODES)}, got {mode!r}")
        return {**checked, "mode": str(mode)}

    @property
    def params(self) -> dict[str, Any]:
        """The constructor's arguments, as :meth:`from_state` takes them."""
        return {
            "min_instances": self.min_instances,
            "delta": self.delta,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "mode": self.mode,
        }

    def _run(self, values: np.ndarray, detected: np.ndarray) -> None:
        page_hinkley_run(
            values,
            detected,
            self._stats,
            self._counters,
            float(self.min_instances),
            self.delta,
            self.threshold,
            self.alpha,
            _MODES.index(self.mode),
        )

    @property
    def n_seen(self) -> int:
        """Values seen since the last reset."""
        return int(self._stats[_N])

    @property
    def estimation(self) -> float:
        """The running mean of the values since the last reset."""
        return float(self._stats[_MEAN])

    def to_state(self) -> dict[str, Any]:
        """The detector's state as JSON-ready data, floats as hex strings (parameters
        not included: see :attr:`params`)."""
        state: dict[str, Any] = {"format": _FORMAT, "n_seen": int(self._stats[_N])}
        for offset, name in enumerate(_STAT_FIELDS):
            state[name] = encode_float(self._stats[_MEAN + offset])
        state["n_detections"] = int(self._counters[_N_DETECTIONS])
        state["drift_detected"] = bool(self._counters[_PENDING_RESET])
        return state

    @classmethod
    def from_state(cls, params: dict[str, Any], state: dict[str, Any]) -> PageHinkley:
        """The detector ``to_state`` described, built with ``params``; it continues
        exactly as the original would. Malformed states raise ``ValueError`` naming the
        field."""
        detector = cls(**check_params("PageHinkley", params, _PARAM_NAMES))
        check_format(state, _FORMAT)
        detector._stats[_N] = float(state_int(state, "n_seen", 0, 2**53))
        for offset, name in enumerate(_STAT_FIELDS):
            # the minimum of U is +inf until the first value after a reset
            allow_inf = name == "min_increase"
            value = decode_float(name, state_field(state, name), allow_inf=allow_inf)
            detector._stats[_MEAN + offset] = value
        detector._counters[_N_DETECTIONS] = state_int(state, "n_detections", 0, 2**62)
        detector._counters[_PENDING_RESET] = state_bool(state, "drift_detected")
        return detector
