"""Validation of LL-SVM's hyperparameters (run by ``fit``, ``check_params`` and
``from_bytes``, not by ``__init__``: scikit-learn's ``set_params`` and ``clone`` bypass
or re-run ``__init__``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ANCHORS", "MULTICLASS", "WEIGHTINGS", "checked_params"]

WEIGHTINGS = ("inverse", "exponential", "relative")
MULTICLASS = ("ovr", "crammer_singer")
ANCHORS = ("kmeans", "kmeans_per_class")


def _check_int(name: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _check_pos(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    return float(v)


def _check_choice(name: str, v: Any, choices: Sequence[str]) -> str:
    if v not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {v!r}")
    return str(v)


def checked_params(p: Mapping[str, Any]) -> dict[str, Any]:
    """``p`` validated (``ValueError`` naming the first bad one) and converted."""
    out: dict[str, Any] = {
        "n_anchors": _check_int("n_anchors", p["n_anchors"], 1),
        "n_neighbours": _check_int("n_neighbours", p["n_neighbours"], 1),
    }
    if out["n_neighbours"] > out["n_anchors"]:
        raise ValueError(
            f"n_neighbours ({p['n_neighbours']}) must not exceed n_anchors ({p['n_anchors']})"
        )
    out["lam"] = _check_pos("lam", p["lam"])
    t0 = p["t0"]
    try:
        out["t0"] = float(t0)
    except (TypeError, ValueError):
        raise ValueError(f"t0 must be a finite number >= 0, got {t0!r}") from None
    if isinstance(t0, bool) or not np.isfinite(out["t0"]) or out["t0"] < 0:
        raise ValueError(f"t0 must be a finite number >= 0, got {t0!r}")
    out["skip"] = _check_int("skip", p["skip"], 1)
    out["passes"] = _check_int("passes", p["passes"], 1)
    out["weighting"] = _check_choice("weighting", p["weighting"], WEIGHTINGS)
    out["beta"] = _check_pos("beta", p["beta"])
    out["multiclass"] = _check_choice("multiclass", p["multiclass"], MULTICLASS)
    out["anchors"] = _check_choice("anchors", p["anchors"], ANCHORS)
    out["kmeans_iter"] = _check_int("kmeans_iter", p["kmeans_iter"], 0)
    for name in ("fit_bias", "normalize", "average"):
        if not isinstance(p[name], bool):
            raise ValueError(f"{name} must be a bool, got {p[name]!r}")
        out[name] = p[name]
    out["seed"] = _check_int("seed", p["seed"], 0)
    return out
