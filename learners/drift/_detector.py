"""What ADWIN and Page-Hinkley share: one value or many fed through a compiled loop,
the two counters every detector keeps, and their repr."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from learners.drift._checks import one_value, value_array


class DriftDetector:
    """A detector whose ``_counters`` hold (detections so far, pending reset) at the
    indices ``_N_DETECTIONS`` and ``_PENDING_RESET``; ``_run(values, detected)`` is its
    compiled loop over finite float64 values."""

    _N_DETECTIONS: ClassVar[int]
    _PENDING_RESET: ClassVar[int]
    _counters: np.ndarray

    @property
    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    def _run(self, values: np.ndarray, detected: np.ndarray) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def update_many(self, values: Any) -> np.ndarray:
        """Feed values in order; element i of the result is whether value i signalled a
        drift (what ``update`` would have returned). One compiled loop per call."""
        arr = value_array(values)
        detected = np.zeros(arr.shape[0], dtype=np.bool_)
        self._run(arr, detected)
        return detected

    def update(self, x: float) -> bool:
        """Feed one value (an error flag 0/1, a loss, ...); whether it signalled a drift."""
        return bool(self.update_many(np.array([one_value(x)]))[0])

    @property
    def drift_detected(self) -> bool:
        """Whether the last update signalled a drift."""
        return bool(self._counters[self._PENDING_RESET])

    @property
    def n_detections(self) -> int:
        """Drifts signalled since construction (carried through ``to_state``)."""
        return int(self._counters[self._N_DETECTIONS])
