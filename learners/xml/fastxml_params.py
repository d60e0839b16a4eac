"""Validation of FastXML's hyperparameters (run by ``fit``, ``check_params`` and
``from_bytes``, not by ``__init__``: scikit-learn's ``set_params`` and ``clone`` bypass
or re-run ``__init__``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["checked_jobs", "checked_params"]


def _positive_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def _positive_float(name: str, v: Any, allow_zero: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.floating):
        raise ValueError(f"{name} must be a number, got {v!r}")
    f = float(v)
    if not np.isfinite(f) or f < 0 or (f == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {v!r}")
    return f


def checked_params(p: Mapping[str, Any]) -> dict[str, Any]:
    """``p`` validated (``ValueError`` naming the first bad one) and converted."""
    out: dict[str, Any] = {
        "n_trees": _positive_int("n_trees", p["n_trees"]),
        "max_leaf": _positive_int("max_leaf", p["max_leaf"]),
        "labels_per_leaf": _positive_int("labels_per_leaf", p["labels_per_leaf"]),
        "c_delta": _positive_float("c_delta", p["c_delta"]),
        "c_rank": _positive_float("c_rank", p["c_rank"], allow_zero=True),
    }
    if not isinstance(p["balance"], bool):
        raise ValueError(f"balance must be a bool, got {p['balance']!r}")
    out["balance"] = p["balance"]
    out["bias"] = _positive_float("bias", p["bias"], allow_zero=True)
    depth = p["ndcg_depth"]
    out["ndcg_depth"] = None if depth is None else _positive_int("ndcg_depth", depth)
    for name in ("max_outer_iter", "max_partition_iter"):
        out[name] = _positive_int(name, p[name])
    out["tol"] = _positive_float("tol", p["tol"])
    for name in ("max_newton_iter", "max_inner_iter"):
        out[name] = _positive_int(name, p[name])
    seed = p["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    out["seed"] = int(seed)
    out["n_jobs"] = checked_jobs(p["n_jobs"])
    names = p["label_names"]
    if names is not None:
        if isinstance(names, str) or not hasattr(names, "__iter__"):
            raise ValueError(f"label_names must be a list of strings, got {names!r}")
        names = list(names)
        if not all(isinstance(s, str) for s in names):
            raise ValueError("label_names must be a list of strings")
    out["label_names"] = names
    return out


def checked_jobs(n_jobs: Any) -> int | None:
    """``n_jobs`` (``None``: all cores) checked; predict reads it too."""
    return None if n_jobs is None else _positive_int("n_jobs", n_jobs)
