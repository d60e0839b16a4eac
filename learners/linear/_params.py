"""Validation of hyperparameters and dimensions (messages name ``params.<name>``)."""

from __future__ import annotations

import math
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
