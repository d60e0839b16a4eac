"""Validation of LambdaMART's hyperparameters (run by ``fit`` and ``from_bytes``, not by
``__init__``: scikit-learn's ``set_params`` and ``clone`` bypass or re-run ``__init__``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["checked_params"]


def _int(name: str, v: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__") or v < lo or (hi is not None and v > hi):
        span = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name}: must be an integer {span}, got {v!r}")
    return int(v)


def _float(name: str, v: Any, what: str, ok: Any) -> float:
    if isinstance(v, bool) or not (isinstance(v, int | float) or hasattr(v, "__float__")):
        raise ValueError(f"{name}: must be a number {what}, got {v!r}")
    f = float(v)
    if not ok(f):
        raise ValueError(f"{name}: must be {what}, got {v!r}")
    return f


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool) and type(v).__name__ != "bool_":
        raise ValueError(f"{name}: must be a bool, got {v!r}")
    return bool(v)


def checked_params(p: Mapping[str, Any]) -> dict[str, Any]:
    """``p`` validated (``ValueError`` naming the first bad one) and converted to the
    types the kernels are compiled for."""
    inf = float("inf")
    out: dict[str, Any] = {
        "n_estimators": _int("n_estimators", p["n_estimators"], 1),
        "learning_rate": _float("learning_rate", p["learning_rate"], "> 0", lambda f: 0 < f < inf),
        "num_leaves": _int("num_leaves", p["num_leaves"], 2),
        "min_data_in_leaf": _int("min_data_in_leaf", p["min_data_in_leaf"], 1),
        "min_sum_hessian_in_leaf": _float(
            "min_sum_hessian_in_leaf", p["min_sum_hessian_in_leaf"], ">= 0", lambda f: 0 <= f < inf
        ),
        "lambda_l2": _float("lambda_l2", p["lambda_l2"], ">= 0", lambda f: 0 <= f < inf),
        "bagging_fraction": _float(
            "bagging_fraction", p["bagging_fraction"], "in (0, 1]", lambda f: 0 < f <= 1
        ),
        "bagging_freq": _int("bagging_freq", p["bagging_freq"], 0),
        "max_bin": _int("max_bin", p["max_bin"], 2, 65535),
        "min_data_in_bin": _int("min_data_in_bin", p["min_data_in_bin"], 1),
        "sigma": _float("sigma", p["sigma"], "> 0", lambda f: 0 < f < inf),
        "truncation_level": _int("truncation_level", p["truncation_level"], 1),
        "lambdarank_norm": _bool("lambdarank_norm", p["lambdarank_norm"]),
        "hessian_counts": _bool("hessian_counts", p["hessian_counts"]),
        "lightgbm_numerics": _bool("lightgbm_numerics", p["lightgbm_numerics"]),
        "seed": _int("seed", p["seed"], 0),
    }
    es = p["early_stopping_rounds"]
    out["early_stopping_rounds"] = None if es is None else _int("early_stopping_rounds", es, 1)
    eval_at = p["eval_at"]
    try:
        out["eval_at"] = [_int("eval_at", k, 1) for k in eval_at]
    except TypeError:
        raise ValueError(f"eval_at: must be a sequence of positive ints, got {eval_at!r}") from None
    if not out["eval_at"]:
        raise ValueError("eval_at: must hold at least one cut-off")
    return out
