"""A decision model's own config (:mod:`service.models.decision`): the exploration
policy, the draw's seed, the bounds on actions and rewards, the weighting, and the
default reward with its wait; every refusal a 422 naming the field."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from learners.decisions.explore import make_policy
from service.errors import invalid
from service.models.decision_candidates import AUTO, AUTO_CANDIDATES
from service.models.decision_features import MODES
from service.models.json_fields import type_name

if TYPE_CHECKING:
    from service.settings import Settings

MAX_ACTIONS = 1024  # the most a config may allow
DEFAULT_RANGE = (-1e6, 1e6)
VARIANCE_POLICIES = ("thompson", "ucb")
SQUARECB_DEFAULT = {"gamma": 10.0, "gamma_exponent": 0.5, "gamma_action_exponent": 0.5}


def only_fields(obj: Any, keys: tuple[str, ...], loc: str) -> None:
    if type(obj) is not dict:
        raise invalid(f"{loc}: must be an object, got {type_name(obj)}", loc)
    for k in obj:
        if k not in keys:
            raise invalid(f"{loc}.{k}: unknown field ({loc} has {', '.join(keys)})", f"{loc}.{k}")


def check_reward(reward_range: list[float], r: Any, loc: str) -> float:
    """A reward as a float: a finite number in the model's ``reward_range``."""
    lo, hi = reward_range
    if type(r) not in (int, float):
        raise invalid(f"{loc}: must be a finite number, got {type_name(r)}", loc)
    try:
        f = float(r)
    except OverflowError:
        f = math.inf
    if not (math.isfinite(f) and lo <= f <= hi):
        raise invalid(f"{loc}: must be a finite number in [{lo:g}, {hi:g}] (the model's "
                      f"reward_range), got {r!r}", loc)  # fmt: skip
    return f + 0.0


def reward_model(body: dict[str, Any], algorithms: tuple[str, ...]) -> tuple[str, str, Any]:
    """The body's ``reward_model``: its algorithm (one of ``algorithms``, or ``auto``:
    service.models.decision_candidates), the regressor built first and its params. The
    default is ``auto``, or AROW for a policy that needs a variance (thompson, ucb: SGD
    has none)."""
    reward = body.get("reward_model", {})
    only_fields(reward, ("algorithm", "params"), "reward_model")
    exploration = body.get("exploration")
    policy = exploration.get("policy") if isinstance(exploration, dict) else None
    algorithm = reward.get("algorithm", "arow_regression" if policy in VARIANCE_POLICIES else AUTO)
    if algorithm not in (*algorithms, AUTO):
        loc = "reward_model.algorithm"
        raise invalid(f"{loc}: must be one of {[*algorithms, AUTO]}, got {algorithm!r}", loc)
    if algorithm == AUTO and reward.get("params"):
        raise invalid("reward_model.params: the auto reward model's candidates take "
                      "their default params (choose arow_regression or sgd_regression "
                      "to set them)", "reward_model.params")  # fmt: skip
    first = AUTO_CANDIDATES[0] if algorithm == AUTO else algorithm
    return algorithm, first, reward.get("params", {})


def decision_config(body: dict[str, Any], reward_algorithm: str) -> dict[str, Any]:
    exploration = body.get("exploration", {})
    only_fields(exploration, ("policy", "params"), "exploration")
    name = exploration.get("policy", "squarecb")
    params = exploration.get("params")
    if params is None:
        # SquareCB's γ_t = 10·√(K·t), K the eligible actions (bench/README.md, issue 34)
        params = SQUARECB_DEFAULT if name == "squarecb" else {}
    try:
        policy = make_policy(name, params)
    except ValueError as e:
        field = "exploration.policy" if str(e).startswith("policy") else "exploration.params"
        raise invalid(f"{field}: {e}", field) from None
    if name in VARIANCE_POLICIES and reward_algorithm != "arow_regression":
        raise invalid(f"exploration.policy: {name} needs a reward model with a variance "
                      "(arow_regression)", "exploration.policy")  # fmt: skip
    seed = body.get("seed", 0)
    if type(seed) is not int or not 0 <= seed < 2**63:
        raise invalid(f"seed: must be an integer >= 0, got {seed!r}", "seed")
    max_actions = body.get("max_actions", 256)
    if type(max_actions) is not int or not 1 <= max_actions <= MAX_ACTIONS:
        raise invalid(f"max_actions: must be an integer in 1..{MAX_ACTIONS}, got "
                      f"{max_actions!r}", "max_actions")  # fmt: skip
    rng = body.get("reward_range", list(DEFAULT_RANGE))
    ok = type(rng) is list and len(rng) == 2 and all(type(v) in (int, float) for v in rng)
    if not ok or not (math.isfinite(rng[0]) and math.isfinite(rng[1]) and rng[0] < rng[1]):
        raise invalid("reward_range: must be [low, high], finite numbers with low < high",
                      "reward_range")  # fmt: skip
    weighting = body.get("weighting", "none")
    if weighting not in ("ips", "dr", "none"):
        raise invalid(f"weighting: must be 'none', 'ips' or 'dr', got {weighting!r}", "weighting")
    mode = body.get("mode", "learning")
    if mode not in MODES:
        raise invalid(f"mode: must be one of {list(MODES)}, got {mode!r}", "mode")
    crossing = body.get("crossing", "hash")  # (decision_crossing; a records context's too)
    records = (body.get("features") or {}).get("kind") == "records"
    if crossing not in ("hash", "names") or (records and crossing != "hash"):
        allowed = "'hash' (a raw-record context's only)" if records else "'hash' or 'names'"
        raise invalid(f"crossing: must be {allowed}, got {crossing!r}", "crossing")
    return {
        "mode": mode, "crossing": crossing,
        "reward_algorithm": reward_algorithm, "policy": name, "policy_params": policy.params,
        "seed": seed, "max_actions": max_actions,
        "reward_range": [float(rng[0]), float(rng[1])], "weighting": weighting,
    }  # fmt: skip


def default_config(body: dict[str, Any], d: dict[str, Any], settings: Settings) -> dict[str, Any]:
    default = body.get("default_reward")
    wait = body.get("reward_wait_seconds", 600.0)
    if default is not None:
        lo, hi = d["reward_range"]
        ok = type(default) in (int, float) and math.isfinite(default) and lo <= default <= hi
        if not ok:
            msg = f"must be null or a finite number in the reward_range [{lo:g}, {hi:g}]"
            raise invalid(f"default_reward: {msg}, got {default!r}", "default_reward")
        default = float(default)
    ttl = settings.feedback_ttl_seconds
    if type(wait) not in (int, float) or not 0 < wait <= ttl:
        raise invalid(f"reward_wait_seconds: must be a number in (0, feedback_ttl_seconds = "
                      f"{ttl:g}], got {wait!r}", "reward_wait_seconds")  # fmt: skip
    # the most column names the model records (service.models.decision_names)
    return {"default_reward": default, "reward_wait_seconds": float(wait),
            "max_feature_names": settings.max_feature_names}  # fmt: skip
