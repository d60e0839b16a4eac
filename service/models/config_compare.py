"""Model configs compared by what they mean: hyperparameters with their defaults filled in.

``PUT /models/{name}`` on an existing name is idempotent when it asks for the same model.
The store compares configs as text (``service.store.base.canonical_config``); a body
that spells out a default (``{"r": 1.0}``) is the same model as one that leaves it out
(``{}``), and a config stored by an older learnserve keeps its hyperparameters as they
were sent (newer ones store them all, ``service.models.online_config.online_model_config``).
So when the texts differ, the catalog compares :func:`effective` configs: the stored
one is never rewritten, and means what it meant. When they still differ,
:func:`difference` names the first field that does and both values, for the 409.

>>> a = {"kind": "linear", "algorithm": "arow", "params": {},
...      "features": {"kind": "dense", "dim": 4}}
>>> difference(a, {**a, "params": {"r": 1.0, "covariance": "diagonal"}}) is None
True
>>> difference(a, {**a, "params": {"r": 0.5}})
('params.r', 1.0, 0.5)
>>> conflict_message("m", *difference(a, {**a, "features": {"kind": "dense", "dim": 5}}))
"model 'm' exists with features.dim=4; this body asks features.dim=5"
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MISSING", "conflict_message", "difference", "effective", "field_of"]


class _Missing:
    def __repr__(self) -> str:
        return "(not set)"


MISSING: Any = _Missing()
# The order fields are looked at in: the one a reader changes first comes first.
_ORDER = ("kind", "algorithm", "features", "params", "metrics", "drift", "imported")
_FEATURES_ORDER = ("kind", "dim", "bits", "index_base")
_ORDERS = {"": _ORDER, "features": _FEATURES_ORDER, "drift": ("detector", "on_detection")}


def _filled_params(kind: str, algorithm: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The learner's own hyperparameters for ``params`` (its defaults filled in, numbers
    as it holds them), read from a 1-dimension instance (nothing to allocate)."""
    if kind == "linear":
        from learners.linear import make_classifier

        return dict(make_classifier(algorithm, 1, dict(params)).params)
    from learners.ranking.ranksvm import make_ranker

    return dict(make_ranker(1, dict(params)).params)


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with an online model's hyperparameters complete (defaults filled in);
    other kinds, and params the learner refuses (never stored), as they are."""
    kind = config.get("kind", "linear")
    params = config.get("params")
    if isinstance(config.get("follows"), dict):  # stored: the leader and where it began
        config = {**config, "follows": config["follows"].get("model")}
    if kind not in ("linear", "ranksvm") or not isinstance(params, dict):
        return config
    if "drift" not in config:
        # Stored before models had detectors (it keeps none): the same body as then
        # still names that model, so a missing drift compares as the default.
        from service.models.drift_monitor import default_drift_config

        config = {**config, "drift": default_drift_config()}
    elif isinstance(config["drift"], dict) and "on_detection" not in config["drift"]:
        # Stored before reactions existed: it has none.
        config = {**config, "drift": {**config["drift"], "on_detection": "none"}}
    try:
        filled = _filled_params(kind, config.get("algorithm"), params)
    except (ValueError, TypeError):
        return config
    return {**config, "params": filled}


def _keys(a: dict[str, Any], b: dict[str, Any], order: tuple[str, ...]) -> list[str]:
    rest = sorted((set(a) | set(b)) - set(order))
    return [k for k in order if k in a or k in b] + rest


def _first(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        order = _ORDERS.get(path, ())
        for k in _keys(a, b, order):
            found = _first(a.get(k, MISSING), b.get(k, MISSING), f"{path}.{k}" if path else k)
            if found is not None:
                return found
        return None
    # 1 and 1.0 are one value (JSON does not tell them apart); True is not 1
    same = type(a) is type(b) or (_number(a) and _number(b))
    return None if same and a == b else (path, a, b)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def difference(stored: dict[str, Any], asked: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The first field (dotted path) whose value differs between the two configs, once
    defaults are filled in: ``(path, stored value, asked value)``, ``MISSING`` for a
    field one of them lacks; ``None`` when they are the same model."""
    return _first(effective(stored), effective(asked), "")


def _show(v: Any) -> str:
    if v is MISSING:
        return "(not set)"
    try:
        return json.dumps(v, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return repr(v)


def conflict_message(name: str, path: str, stored: Any, asked: Any) -> str:
    if path == "imported":  # the SHA-256 of the artifact a model was imported from

        def what(v: Any) -> str:
            return "not imported" if v is MISSING else f"imported from the artifact {v}"

        asks = "a config, not an artifact" if asked is MISSING else f"the artifact {asked}"
        return f"model {name!r} exists, {what(stored)}; this body is {asks}"
    has, asks = _show(stored), _show(asked)
    return f"model {name!r} exists with {path}={has}; this body asks {path}={asks}"


def field_of(path: str, asked: dict[str, Any]) -> str:
    """The request field a 409 names: the body's own (an import's is its artifact; an
    online body chooses its kind with ``algorithm``)."""
    if path == "imported":
        return "artifact"
    return "algorithm" if path == "kind" and "algorithm" in asked else path
