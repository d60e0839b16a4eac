"""A decision model's exported state read back (``PUT /models/{name}`` with the body
``GET /models/{name}/state`` answered; the import itself is
:mod:`service.engine.transfers`).

The artifact is the reward model's (kind ``"regression"``: ``mu``, ``sigma``,
``y_stats``, ``noise``, checked by :meth:`learners.regression.LinearRegressor.from_artifact`)
with two more parts in its meta:

- ``meta.decisions``: the decision state :meth:`DecisionAdapter._state` writes in every
  checkpoint (``t``: rewards learned, which the exploration's schedule reads; ``mode``;
  ``agree``: rewards evaluated and how many of them the learned greedy policy agreed
  on; ``ope``: the progressive IPS/SNIPS/DR sums of each target policy);
- ``meta.service.config``: the exported model's config, from which the new model's is
  rebuilt (exploration, seed, bounds, weighting, default reward, mode, metrics, drift),
  with the reward model's hyperparameters read from the artifact itself.

Everything is checked before a model is built from it: each refusal a ``ValueError``
naming the field (the caller makes it a 422). Decisions awaiting a reward are in the
exported model's decision log, not in its state: they are not carried.

A challenger's export (a config with ``follows``) imports as a standalone decision
model, as a follower of another kind does: its reward model, ``t``, mode, agreement and
the four base estimates are carried; its ``challenger`` estimate (its own policy on its
leader's log) is checked against the export's digest and dropped, so the new model's
``state_digest`` is that of the standalone state.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from learners.decisions.estimators import Evaluation
from service.models.decision import DECISION_KEYS, TARGETS
from service.models.decision_candidates import AUTO, AUTO_CANDIDATES, REWARD_ARRAYS
from service.models.decision_features import MODES
from service.models.regression import learner_algorithm

if TYPE_CHECKING:
    from service.models.decision import DecisionAdapter

CHALLENGER = "challenger"  # a challenger's own estimate (service.models.decision_follower)
_CARRIED = ("metrics", "drift")  # config fields besides the decision's own
_FLOATS = {
    "ips": ("mean", "m2"),
    "dr": ("mean", "m2"),
    "snips": ("sw", "swr", "sw2", "sw2r", "sw2r2"),
}
_NONNEGATIVE = ("m2", "sw", "sw2", "sw2r2")  # sums of squares and of weights


def check_arrays(arrays: dict[str, np.ndarray]) -> None:
    """The reward model's arrays are float64 (what it keeps and writes): another dtype
    is refused here, naming the array, before the learner would cast it."""
    for name, a in arrays.items():
        reward_array = name in REWARD_ARRAYS or name.startswith("candidates.")
        if reward_array and a.dtype != np.float64:
            raise ValueError(
                f"array {name!r} has dtype {a.dtype}; a decision model's reward "
                "model keeps float64 arrays"
            )


def import_body(meta: dict[str, Any], model: Any) -> tuple[dict[str, Any], bool]:
    """The ``PUT`` body that makes the exported model's config again (without
    ``follows``), for the reward model ``model`` the artifact holds; and whether the
    export is a challenger's."""
    if not isinstance(meta.get("decisions"), dict):
        raise ValueError(
            "meta.decisions is missing: the artifact does not hold a decision "
            "model's state (export one with GET /models/{name}/state)"
        )
    service = meta.get("service")
    config = service.get("config") if isinstance(service, dict) else None
    if not isinstance(service, dict) or not isinstance(service.get("state_digest"), str):
        raise ValueError(
            "meta.service.state_digest is missing: a decision model's artifact "
            "is an export (GET /models/{name}/state), checked by its digest"
        )
    if not isinstance(config, dict) or config.get("kind") != "decision":
        raise ValueError(
            "meta.service.config is missing or not a decision model's config: "
            "a decision model's exploration, seed and bounds are read from it"
        )
    d = config.get("decision")
    if not isinstance(d, dict) or not isinstance(d.get("reward_algorithm"), str):
        raise ValueError("meta.service.config.decision is missing or malformed")
    auto = d["reward_algorithm"] == AUTO
    allowed = [learner_algorithm(n) for n in (AUTO_CANDIDATES if auto else [d["reward_algorithm"]])]
    if model.algorithm not in allowed:
        raise ValueError(
            f"meta.service.config.decision.reward_algorithm is "
            f"{d['reward_algorithm']!r}, but the reward model the artifact holds "
            f"is {model.algorithm!r}"
        )
    reward: dict[str, Any] = {"algorithm": d["reward_algorithm"]}
    if not auto:  # (auto's candidates take their default params)
        reward["params"] = dict(model.params)
    body: dict[str, Any] = {
        "algorithm": "decision",
        "features": config.get("features"),
        "reward_model": reward,
        "exploration": {"policy": d.get("policy"), "params": d.get("policy_params")},
    }
    for k in DECISION_KEYS:
        if k in d and k not in ("reward_model", "exploration"):
            body[k] = d[k]
    features = config.get("features")
    if not (isinstance(features, dict) and features.get("kind") == "records"):
        # (service.models.decision_crossing) a config stored before crossings existed
        # has none: its rows were crossed by names, and the weights learned so
        body.setdefault("crossing", "names")
    for k in _CARRIED:
        if k in config:
            body[k] = config[k]
    return body, config.get("follows") is not None


def restore(
    adapter: DecisionAdapter,
    saved: dict[str, Any],
    challenger: bool,
    arrays: dict[str, np.ndarray] | None = None,
) -> None:
    """``meta.decisions`` checked and set on ``adapter`` (a new model built from the
    artifact's reward model); a challenger's ``challenger`` estimate is set too, for the
    digest check (:func:`standalone` drops it). ``arrays``: the artifact's, which hold
    an ``auto`` model's other candidates (:mod:`service.models.decision_candidates`)."""
    want = set(TARGETS) | ({CHALLENGER} if challenger else set())
    keys = {"t", "ope", "mode", "agree"} | ({"candidates"} if adapter.candidates else set())
    if set(saved) != keys:
        raise ValueError(f"meta.decisions: must hold {', '.join(sorted(keys))}, got "
                         f"{sorted(saved)}")  # fmt: skip
    t, mode, agree, ope = saved["t"], saved["mode"], saved["agree"], saved["ope"]
    if not _count(t):
        raise ValueError(f"meta.decisions.t: must be an integer >= 0 (rewards learned), got {t!r}")
    if mode not in MODES:
        raise ValueError(f"meta.decisions.mode: must be one of {list(MODES)}, got {mode!r}")
    ok = type(agree) is list and len(agree) == 2 and all(_count(v) for v in agree)
    if not ok or agree[1] > agree[0]:
        raise ValueError(
            f"meta.decisions.agree: must be [evaluated, agreed], integers with 0 <= agreed <= "
            f"evaluated, got {agree!r}"
        )
    if not isinstance(ope, dict) or set(ope) != want:
        got = sorted(ope) if isinstance(ope, dict) else type(ope).__name__
        raise ValueError(
            f"meta.decisions.ope: must hold the estimates of {sorted(want)}, got {got}"
        )
    names = [t for t in (*TARGETS, CHALLENGER) if t in want]  # the adapter's order
    evaluations = {name: _evaluation(ope[name], f"meta.decisions.ope.{name}") for name in names}
    if adapter.candidates is not None:
        c = saved["candidates"]
        values = c.get("values") if isinstance(c, dict) else None
        if not isinstance(values, list):
            raise ValueError("meta.decisions.candidates.values: must be a list of estimates")
        for i, v in enumerate(values):
            _evaluation(v, f"meta.decisions.candidates.values[{i}]")
        gaps = c.get("gaps")
        for i, g in enumerate(gaps if isinstance(gaps, list) else []):
            _estimate(g, "difference", ("mean", "m2"), f"meta.decisions.candidates.gaps[{i}]")
        adapter.candidates.restore(c, arrays or {})
    adapter.rewards_learned = t
    adapter.mode = mode
    adapter.agreement = [agree[0], agree[1]]
    adapter.evaluations = evaluations


def standalone(adapter: DecisionAdapter) -> None:
    """A challenger's state as a standalone model's: without its own estimate."""
    adapter.evaluations.pop(CHALLENGER, None)


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _evaluation(d: Any, loc: str) -> Evaluation:
    if not isinstance(d, dict) or set(d) != set(_FLOATS):
        raise ValueError(f"{loc}: must hold ips, snips and dr")
    for kind, fields in _FLOATS.items():
        _estimate(d[kind], kind, fields, f"{loc}.{kind}")
    return Evaluation.from_dict(d)


def _estimate(est: Any, kind: str, fields: tuple[str, ...], at: str) -> None:
    """One estimator's saved sums (``kind``, ``n`` and ``fields``), checked."""
    if not isinstance(est, dict) or set(est) != {"kind", "n", *fields}:
        raise ValueError(f"{at}: must hold kind, n, {', '.join(fields)}")
    if est["kind"] != kind or not _count(est["n"]):
        raise ValueError(f"{at}: kind must be {kind!r} and n an integer >= 0")
    for f in fields:
        v = est[f]
        if type(v) is not float or not math.isfinite(v) or (f in _NONNEGATIVE and v < 0):
            sign = " >= 0" if f in _NONNEGATIVE else ""
            raise ValueError(f"{at}.{f}: must be a finite float{sign}, got {v!r}")
