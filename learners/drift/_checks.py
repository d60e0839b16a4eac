"""Validation of drift-detector parameters, inputs and saved states.

Parameter errors name ``params.<name>``, state errors ``state.<field>``, as the rest
of ``learners`` does. Floats in a state are hex strings (``float.hex``): JSON keeps
them exactly, infinities included, and they read back bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)


def int_param(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"params.{name}: must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"params.{name}: must be >= {minimum}, got {value!r}")
    return int(value)


def float_param(
    name: str, value: Any, low: float, high: float, *, low_open: bool = True, high_open: bool
) -> float:
    """A finite float between ``low`` and ``high``, each end open or closed."""
    if not _is_number(value):
        raise ValueError(f"params.{name}: must be a number, got {value!r}")
    v = float(value)
    above = low < v or (not low_open and v == low)
    below = v < high or (not high_open and v == high)
    if not (math.isfinite(v) and above and below):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"params.{name}: must be in {interval}, got {value!r}")
    return v


def check_params(cls_name: str, params: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise ValueError(f"params: must be a mapping, got {type(params).__name__}")
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"params: unknown for {cls_name}: {unknown} (known: {sorted(allowed)})")
    return dict(params)


def one_value(x: Any) -> float:
    """One input value as a float; a bool counts as 0/1 (an error flag)."""
    if not (isinstance(x, bool | np.bool_) or _is_number(x)):
        raise ValueError(f"x: must be a real number, got {x!r}")
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"x: must be finite, got {x!r}")
    return v


def value_array(values: Any) -> np.ndarray:
    """Input values as a contiguous 1-D float64 array, all finite."""
    arr = np.ascontiguousarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"values: must be one-dimensional, got shape {arr.shape}")
    if not np.isfinite(arr).all():  # (the usual case costs no Python call)
        bad = np.flatnonzero(~np.isfinite(arr))
        raise ValueError(f"values[{bad[0]}]: must be finite, got {arr[bad[0]]!r}")
    return arr


def encode_float(v: float) -> str:
    return float(v).hex()


def decode_float(field: str, v: Any, *, allow_inf: bool = False) -> float:
    if not isinstance(v, str):
        raise ValueError(f"state.{field}: must be a hex float string, got {v!r}")
    try:
        f = float.fromhex(v)
    except ValueError:
        raise ValueError(f"state.{field}: not a hex float: {v!r}") from None
    if math.isnan(f) or (math.isinf(f) and not allow_inf):
        raise ValueError(f"state.{field}: must be finite, got {v!r}")
    return f


def state_field(state: Mapping[str, Any], field: str) -> Any:
    if field not in state:
        raise ValueError(f"state.{field}: missing")
    return state[field]


def state_int(state: Mapping[str, Any], field: str, low: int, high: int) -> int:
    v = state_field(state, field)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ValueError(f"state.{field}: must be an integer in [{low}, {high}], got {v!r}")
    return v


def state_bool(state: Mapping[str, Any], field: str) -> bool:
    v = state_field(state, field)
    if not isinstance(v, bool):
        raise ValueError(f"state.{field}: must be true or false, got {v!r}")
    return v


def check_format(state: Any, expected: str) -> Mapping[str, Any]:
    if not isinstance(state, Mapping):
        raise ValueError(f"state: must be a mapping, got {type(state).__name__}")
    fmt = state.get("format")
    if fmt != expected:
        raise ValueError(f"state.format: expected {expected!r}, got {fmt!r}")
    return state
