"""ADWIN, ADaptive WINdowing (Bifet & Gavaldà, SDM 2007), as River's ``drift.ADWIN``.

ADWIN keeps a window of recent values, compressed into an exponential histogram
(ADWIN2: at most ``max_buckets`` buckets of each size 1, 2, 4, ...). Every ``clock``
updates, once the window holds more than ``grace_period`` values, it tries every cut
between buckets into an older part W0 (n0 values) and a newer part W1 (n1), both at
least ``min_window_length`` long, and drops the oldest bucket while some cut has

    |mean(W0) − mean(W1)| > sqrt(2 m σ² δ') + (2/3) δ' m,
    m = 1/(n0 − min_window_length + 1) + 1/(n1 − min_window_length + 1),
    δ' = ln(2 ln(width) / delta),    σ² = the window's variance.

An update that dropped anything signals a drift.

Detections agree exactly with River 0.26's ``river.drift.ADWIN`` given the same
parameters and values (tests/learners/test_drift_adwin.py holds this against River):

- the float operations follow River's order (its Rust ``AdaptiveWindowing``), see
  :mod:`learners.drift._adwin_kernels`;
- like River, after a detection the next update first empties the window (River's
  ``ADWIN.update`` resets its helper), so ``width`` and ``estimation`` still describe
  the shrunk window right after the detecting update;
- ``n_detections`` counts every detection since construction (River's counter lives
  in the helper it resets, so it never exceeds 1 there).

Where this differs on purpose: non-finite values are refused (River would carry a NaN
in its window for ever), and ``max_buckets`` must be at least 2 (with 1, River's window
can hold an empty level and its Rust code panics when a cut reaches it).

The state (:meth:`ADWIN.to_state`) is plain JSON with floats as hex strings; the window
arithmetic is IEEE-754 +, −, ×, ÷ and √, so the same values give the same state bits
on any machine. The cut test also takes ``ln``; a platform whose ``log`` rounded
differently from glibc's could flip a cut that sits within an ulp of its bound.

>>> import numpy as np
>>> rng = np.random.default_rng(7)
>>> errors = np.concatenate([rng.random(1000) < 0.2, rng.random(1000) < 0.7])
>>> detector = ADWIN()
>>> np.flatnonzero(detector.update_many(errors)).tolist()
[1055]
>>> detector.width, round(detector.estimation, 2)  # the window kept the newer values
(944, 0.69)
>>> restored = ADWIN.from_state(detector.params, detector.to_state())
>>> restored.update(1.0), restored.width, restored.n_detections
(False, 945, 1)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from learners.drift import _adwin_kernels as K
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

__all__ = ["ADWIN"]

_FORMAT = "adwin/1"
_PARAM_NAMES = {"delta", "clock", "max_buckets", "min_window_length", "grace_period"}
_I32_MAX = 2**31 - 1


class ADWIN(DriftDetector):
    """Adaptive-window drift detector; see the module docstring.

    Parameters (River's names and defaults):

    - ``delta``: confidence of the cut test, in (0, 1); smaller detects less;
    - ``clock``: test for cuts every ``clock`` updates (1 = every update);
    - ``max_buckets``: buckets of each size kept before two merge (>= 2);
    - ``min_window_length``: shortest sub-window a cut may leave (>= 1);
    - ``grace_period``: no test while the window holds at most this many values.
    """

    _N_DETECTIONS = K.N_DETECTIONS
    _PENDING_RESET = K.PENDING_RESET

    def __init__(
        self,
        delta: float = 0.002,
        clock: int = 32,
        max_buckets: int = 5,
        min_window_length: int = 5,
        grace_period: int = 10,
    ) -> None:
        p = self.checked_params(delta, clock, max_buckets, min_window_length, grace_period)
        self.delta: float = p["delta"]
        self.clock: int = p["clock"]
        self.max_buckets: int = p["max_buckets"]
        self.min_window_length: int = p["min_window_length"]
        self.grace_period: int = p["grace_period"]
        self._sums, self._sqdevs, self._fill, self._window, self._counters = K.empty_arrays(
            self.max_buckets
        )

    @staticmethod
    def checked_params(
        delta: float = 0.002,
        clock: int = 32,
        max_buckets: int = 5,
        min_window_length: int = 5,
        grace_period: int = 10,
    ) -> dict[str, Any]:
        """The constructor's parameters, checked as it checks them (``ValueError`` naming
        ``params.<name>``) without building a detector, whose bucket arrays grow with
        ``max_buckets``: what a service validates a stored config with."""
        checked_delta = float_param("delta", delta, 0.0, 1.0, high_open=True)
        checked_clock = int_param("clock", clock, 1)
        if checked_clock > _I32_MAX:  # River holds it in an i32
            raise ValueError(f"params.clock: must be <= {_I32_MAX}, got {clock!r}")
        return {
            "delta": checked_delta,
            "clock": checked_clock,
            "max_buckets": int_param("max_buckets", max_buckets, 2),
            "min_window_length": int_param("min_window_length", min_window_length, 1),
            "grace_period": int_param("grace_period", grace_period, 0),
        }

    @property
    def params(self) -> dict[str, Any]:
        """The constructor's arguments, as :meth:`from_state` takes them."""
        return {
            "delta": self.delta,
            "clock": self.clock,
            "max_buckets": self.max_buckets,
            "min_window_length": self.min_window_length,
            "grace_period": self.grace_period,
        }

    def _run(self, values: np.ndarray, detected: np.ndarray) -> None:
        K.adwin_run(
            values,
            detected,
            self._sums,
            self._sqdevs,
            self._fill,
            self._window,
            self._counters,
            self.delta,
            self.clock,
            self.max_buckets,
            float(self.min_window_length),
            float(self.grace_period),
        )

    # -- what the window holds -------------------------------------------------------

    @property
    def width(self) -> int:
        """How many values the window holds."""
        return int(self._window[K.WIDTH])

    @property
    def total(self) -> float:
        """The sum of the window's values."""
        return float(self._window[K.TOTAL])

    @property
    def variance(self) -> float:
        """The sum of squared deviations from the window's mean (River's ``variance``)."""
        return float(self._window[K.SQDEV])

    @property
    def estimation(self) -> float:
        """The mean of the window (0.0 when it is empty), as River computes it."""
        width = self._window[K.WIDTH]
        return 0.0 if width == 0.0 else float(self._window[K.TOTAL] / width)

    # -- state -----------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """The detector's state as JSON-ready data (parameters not included: see
        :attr:`params`). Buckets are listed per level, newest level first, each level's
        buckets oldest first, as ``[sum, squared deviations]`` hex floats."""
        levels = int(self._counters[K.N_LEVELS])
        buckets = [
            [
                [encode_float(self._sums[lv, j]), encode_float(self._sqdevs[lv, j])]
                for j in range(int(self._fill[lv]))
            ]
            for lv in range(levels)
        ]
        return {
            "format": _FORMAT,
            "total": encode_float(self._window[K.TOTAL]),
            "variance": encode_float(self._window[K.SQDEV]),
            "tick": int(self._counters[K.TICK]),
            "n_detections": int(self._counters[K.N_DETECTIONS]),
            "drift_detected": bool(self._counters[K.PENDING_RESET]),
            "buckets": buckets,
        }

    @classmethod
    def from_state(cls, params: dict[str, Any], state: dict[str, Any]) -> ADWIN:
        """The detector ``to_state`` described, built with ``params``; it continues
        exactly as the original would. Malformed states raise ``ValueError`` naming the
        field."""
        detector = cls(**check_params("ADWIN", params, _PARAM_NAMES))
        check_format(state, _FORMAT)
        levels = state_field(state, "buckets")
        if not isinstance(levels, list) or not 1 <= len(levels) <= K.MAX_LEVELS:
            raise ValueError(f"state.buckets: must be a list of 1 to {K.MAX_LEVELS} levels")
        width = 0
        for lv, level in enumerate(levels):
            where = f"buckets[{lv}]"
            # A level is never left empty (an emptied oldest level is dropped), except
            # the single level of an empty window.
            least = 0 if len(levels) == 1 else 1
            if not isinstance(level, list) or not least <= len(level) <= detector.max_buckets:
                raise ValueError(
                    f"state.{where}: must be a list of {least} to "
                    f"{detector.max_buckets} (max_buckets) buckets"
                )
            for j, bucket in enumerate(level):
                if not isinstance(bucket, list) or len(bucket) != 2:
                    raise ValueError(f"state.{where}[{j}]: must be [sum, squared deviations]")
                detector._sums[lv, j] = decode_float(f"{where}[{j}][0]", bucket[0])
                detector._sqdevs[lv, j] = decode_float(f"{where}[{j}][1]", bucket[1])
            detector._fill[lv] = len(level)
            width += len(level) << lv
        if width > 2**53:
            raise ValueError("state.buckets: more values than a float64 counts exactly")
        detector._window[K.TOTAL] = decode_float("total", state_field(state, "total"))
        detector._window[K.SQDEV] = decode_float("variance", state_field(state, "variance"))
        detector._window[K.WIDTH] = float(width)
        detector._counters[K.N_LEVELS] = len(levels)
        detector._counters[K.TICK] = state_int(state, "tick", -(2**31), _I32_MAX)
        detector._counters[K.N_DETECTIONS] = state_int(state, "n_detections", 0, 2**62)
        detector._counters[K.PENDING_RESET] = state_bool(state, "drift_detected")
        return detector
