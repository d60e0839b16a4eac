"""Validation of hyperparameters and dimensions (messages name ``params.<name>``)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

MAX_FULL_DIM = 4096  # a full covariance holds a d×d float64 matrix per label


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"params.{name}: must be a number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"params.{name}: must be > 0, got {value!r}")
    return v


def _eta(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"params.eta: must be a number, got {value!r}")
    v = float(value)
    if not 0.5 < v < 1.0:
        raise ValueError(f"params.eta: must be in (0.5, 1), got {value!r}")
    return v


def _covariance(value: Any, dim: int) -> str:
    if value not in ("diagonal", "full"):
        raise ValueError(f"params.covariance: must be 'diagonal' or 'full', got {value!r}")
    if value == "full" and dim > MAX_FULL_DIM:
        raise ValueError(
            f"params.covariance: 'full' keeps a d×d matrix per label and needs "
            f"dim <= {MAX_FULL_DIM}, got dim={dim}"
        )
    return str(value)


def _check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise ValueError(f"dim: must be a positive integer, got {dim!r}")
    return int(dim)


def build_by_name(classes: Mapping[str, type], algorithm: Any, dim: int, params: Any) -> Any:
    """``classes[algorithm](dim, **params)``: ``ValueError`` naming ``algorithm``, a
    ``params`` that is no object, or ``params.<name>`` unknown to that class (its
    ``__init__`` names the hyperparameters); the class validates the values. What
    ``make_classifier`` and ``make_regressor`` do."""
    try:
        cls: Any = classes[algorithm]
    except (KeyError, TypeError):
        raise ValueError(
            f"algorithm: must be one of {', '.join(classes)}, got {algorithm!r}"
        ) from None
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(f"params: must be an object, got {type(params).__name__}")
    params = dict(params or {})
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "dim")]
    for name in params:
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise ValueError(
                f"params.{name}: unknown hyperparameter for {algorithm} (expected: {expected})"
            )
    return cls(dim, **params)
