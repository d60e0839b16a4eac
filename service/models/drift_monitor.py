"""Drift detection of an online model: a detector over its progressive losses, in log order.

Every example an online model learns is scored first (``UpdateResult.errors``: 1.0
when a classifier predicted it wrong, else 0.0; a ranker's query: 1 − NDCG@10). The
model's detector (:mod:`learners.drift`: ADWIN by default, Page-Hinkley as an option)
reads that stream entry by entry, in log order, as the apply does: it is model state,
kept in the checkpoint and the same on every replica and after a restart (a replica
that applied the same entries holds the same detector, bit for bit: ``digest``).

The config (``drift`` in ``PUT /models/{name}``; stored with the model, defaults filled
in): ``{"detector": "adwin", "delta": 0.002, "clock": 32, "max_buckets": 5,
"min_window_length": 5, "grace_period": 10}``, ``{"detector": "page_hinkley",
"min_instances": 30, "delta": 0.005, "threshold": 50.0, "alpha": 0.9999, "mode": "both"}``
or ``{"detector": "none"}``; plus, with a detector, ``on_detection``: ``"none"`` (the
default) or ``{"reopen_confidence": a}`` (a in (0, 1]), the model's reaction: after an
applied entry in which the detector found a change, a CW, AROW or SCW model moves its
covariance a fraction ``a`` back to its prior, keeping its mean
(:meth:`learners.linear.LinearClassifier.reopen_confidence`). The reaction runs in the
apply, in log order, so it is model state like the rest (in the learner's checkpoint).
A model created before learnserve had detectors stored no
``drift`` and keeps none (a stored model never changes meaning); comparing configs
(``service.models.config_compare``) reads a missing ``drift`` as the default, so a
client that PUTs the same body as before still gets its model; a ``drift`` stored
before reactions existed has no ``on_detection`` and means ``"none"``.

>>> cfg = drift_config({"detector": "page_hinkley", "threshold": 5})
>>> cfg["detector"], cfg["threshold"], cfg["min_instances"]
('page_hinkley', 5.0, 30)
>>> m = DriftMonitor(cfg)
>>> import numpy as np
>>> m.update(np.r_[np.zeros(200), np.ones(60)], version=7)
1
>>> s = m.summary(); s["detections"], s["last_detection_version"], s["values_seen"]
(1, 7, 260)
>>> drift_config({"detector": "adwin", "on_detection": {"reopen_confidence": 1}})["on_detection"]
{'reopen_confidence': 1.0}
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import orjson

from service.errors import invalid
from service.models.json_fields import type_name

__all__ = [
    "DETECTORS",
    "DriftMonitor",
    "default_drift_config",
    "drift_config",
    "drift_monitor",
    "on_detection",
]

# Each detector's parameters and their defaults (River's, whose detection points the
# detectors reproduce: tests/service/test_drift_api.py).
DETECTORS: dict[str, dict[str, Any]] = {
    "adwin": {
        "delta": 0.002,
        "clock": 32,
        "max_buckets": 5,
        "min_window_length": 5,
        "grace_period": 10,
    },
    "page_hinkley": {
        "min_instances": 30,
        "delta": 0.005,
        "threshold": 50.0,
        "alpha": 1 - 0.0001,
        "mode": "both",
    },
    "none": {},
}
MAX_BUCKETS = 1000  # ADWIN's buckets per size: River's default is 5
_INTEGER = {"clock", "max_buckets", "min_window_length", "grace_period", "min_instances"}
_MODES = ("both", "up", "down")


_REACTION = "on_detection"
_REOPEN = "reopen_confidence"


def default_drift_config() -> dict[str, Any]:
    return {"detector": "adwin", **DETECTORS["adwin"], _REACTION: "none"}


def on_detection(config: dict[str, Any]) -> float | None:
    """The amount a stored ``drift`` config re-opens the confidence by on a detection
    (None: no reaction; a config stored before reactions existed has none)."""
    reaction = config.get(_REACTION, "none")
    return float(reaction[_REOPEN]) if isinstance(reaction, dict) else None


def drift_config(body: Any, reopens: bool = True) -> dict[str, Any]:
    """The stored ``drift`` config of a ``PUT /models/{name}`` body's ``drift`` (None:
    the default), every parameter filled in; a 422 naming ``drift.<field>`` if bad.
    ``reopens``: whether the model has a confidence to re-open (CW, AROW, SCW)."""
    if body is None:
        return default_drift_config()
    if not isinstance(body, dict):
        raise invalid(f"drift: must be an object, got {type_name(body)}", "drift")
    name = body.get("detector")
    if name is None:
        raise invalid("drift.detector: required (adwin, none or page_hinkley)", "drift.detector")
    if not isinstance(name, str) or name not in DETECTORS:
        raise invalid(
            f"drift.detector: must be one of {sorted(DETECTORS)}, got {name!r}", "drift.detector"
        )
    defaults = DETECTORS[name]
    extra = sorted(set(body) - {"detector", _REACTION, *defaults})
    if extra:
        known = ", ".join(sorted(defaults)) or "none"
        raise invalid(
            f"drift.{extra[0]}: unknown field for {name} (known: {known})", f"drift.{extra[0]}"
        )
    out: dict[str, Any] = {"detector": name}
    for key, default in defaults.items():
        out[key] = _param(key, body.get(key, default))
    if name == "page_hinkley" and out["mode"] not in _MODES:
        raise invalid(f"drift.mode: must be one of {list(_MODES)}", "drift.mode")
    _check(out)
    _detector_check(out)
    out[_REACTION] = _reaction(body.get(_REACTION, "none"), name, reopens)
    return out


def _reaction(v: Any, detector: str, reopens: bool) -> Any:
    """``on_detection``: "none" or ``{"reopen_confidence": amount in (0, 1]}``."""
    field = f"drift.{_REACTION}"
    if v == "none":
        return "none"
    if not isinstance(v, dict) or list(v) != [_REOPEN]:
        raise invalid(f'{field}: must be "none" or {{"{_REOPEN}": amount}}, got {v!r}', field)
    a = v[_REOPEN]
    if isinstance(a, bool) or not isinstance(a, int | float) or not 0.0 < a <= 1.0:
        where = f"{field}.{_REOPEN}"
        raise invalid(f"{where}: must be a number in (0, 1], got {a!r}", where)
    if detector == "none":
        raise invalid(f"{field}: needs a detector (drift.detector is none)", field)
    if not reopens:
        raise invalid(f"{field}: this algorithm keeps no confidence (covariance) to re-open", field)
    return {_REOPEN: float(a)}


def _param(key: str, v: Any) -> Any:
    field = f"drift.{key}"
    if key == "mode":
        if not isinstance(v, str):
            raise invalid(f"{field}: must be a string, got {type_name(v)}", field)
        return v
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise invalid(f"{field}: must be a finite number, got {v!r}", field)
    if key in _INTEGER:
        if float(v) != int(v):
            raise invalid(f"{field}: must be an integer, got {v!r}", field)
        return int(v)
    return float(v)


def _check(c: dict[str, Any]) -> None:
    def bad(key: str, what: str) -> None:
        raise invalid(f"drift.{key}: must be {what}, got {c[key]!r}", f"drift.{key}")

    if c["detector"] == "adwin":
        if not 0.0 < c["delta"] < 1.0:
            bad("delta", "in (0, 1)")
        for key in ("clock", "min_window_length"):
            if not 1 <= c[key] <= 1_000_000:
                bad(key, "an integer in [1, 1000000]")
        if not 2 <= c["max_buckets"] <= MAX_BUCKETS:
            # each bucket of each size costs two floats per worker, allocated at the PUT:
            # 1,000,000 was ~1 GB per model per worker (issue 32 item 8); 1,000 is ~1 MB
            bad("max_buckets", f"an integer in [2, {MAX_BUCKETS}]")
        if not 0 <= c["grace_period"] <= 1_000_000_000:
            bad("grace_period", "an integer in [0, 1000000000]")
    elif c["detector"] == "page_hinkley":
        if not 1 <= c["min_instances"] <= 1_000_000_000:
            bad("min_instances", "an integer in [1, 1000000000]")
        if c["delta"] < 0.0:
            bad("delta", ">= 0")
        if c["threshold"] <= 0.0:
            bad("threshold", "> 0")
        if not 0.0 < c["alpha"] <= 1.0:
            bad("alpha", "in (0, 1]")


def _params(config: dict[str, Any]) -> dict[str, Any]:
    """The detector's own parameters (the stored config less its name and reaction)."""
    return {k: v for k, v in config.items() if k not in ("detector", _REACTION)}


def _detector_class(name: str) -> Any:
    if name == "adwin":
        from learners.drift.adwin import ADWIN

        return ADWIN
    from learners.drift.page_hinkley import PageHinkley

    return PageHinkley


def _detector_check(config: dict[str, Any]) -> None:
    """The detector's own rules (``checked_params`` of :mod:`learners.drift`, which its
    constructor applies), before anything is stored: a config the detector would refuse
    when the model loads is a 422 naming ``drift.<name>``, never a stored model that
    cannot load. (``_check`` above adds the service's bounds.)"""
    if config["detector"] == "none":
        return
    try:
        _detector_class(config["detector"]).checked_params(**_params(config))
    except ValueError as e:
        message = str(e).removeprefix("params.")
        key = message.split(":", 1)[0]
        raise invalid(f"drift.{message}", f"drift.{key}" if key in config else "drift") from None


def _make(config: dict[str, Any]) -> Any:
    return _detector_class(config["detector"])(**_params(config))


def drift_monitor(config: dict[str, Any]) -> DriftMonitor | None:
    """The monitor of a model's stored config (None: no detector)."""
    c = config.get("drift")
    if not isinstance(c, dict) or c.get("detector", "none") == "none":
        return None
    return DriftMonitor(c)


class DriftMonitor:
    """One model's detector, its detections and where the last one happened."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.detector = _make(config)
        self.detections = 0
        self.values_seen = 0  # examples (rankers: queries) read so far
        self.last_detection_version: int | None = None
        self.last_detection_value: int | None = None  # its index in the stream (from 1)
        self.reopen = on_detection(config)  # the reaction's amount (None: no reaction)
        self.reactions = 0  # entries after which the model reacted

    def update(self, errors: np.ndarray | None, version: int) -> int:
        """Read one applied entry's progressive losses; the detections among them."""
        if errors is None or errors.shape[0] == 0:
            return 0
        flags = self.detector.update_many(np.ascontiguousarray(errors, dtype=np.float64))
        if not flags.any():  # the usual case: nothing detected
            self.values_seen += int(errors.shape[0])
            return 0
        hits = np.flatnonzero(flags)
        if hits.shape[0]:
            self.detections += int(hits.shape[0])
            self.last_detection_version = version
            self.last_detection_value = self.values_seen + int(hits[-1]) + 1
        self.values_seen += int(errors.shape[0])
        return int(hits.shape[0])

    def react(self, learner: Any) -> bool:
        """The reaction to the detections of the entry just read (``update`` > 0):
        called once per entry, after the whole entry was learned (a detection in the
        middle of a batch re-opens after its last example, not after the detecting
        one: a batch is not only a transport here). True if the learner changed."""
        if self.reopen is None:
            return False
        learner.reopen_confidence(self.reopen)
        self.reactions += 1
        return True

    def summary(self) -> dict[str, Any]:
        """``GET /models/{name}``'s ``drift``."""
        estimate = float(self.detector.estimation)
        return {
            "detector": self.config["detector"],
            "params": _params(self.config),
            "on_detection": self.config.get(_REACTION, "none"),
            "reactions": self.reactions,
            "estimate": estimate if math.isfinite(estimate) else None,
            "detections": self.detections,
            "last_detection_version": self.last_detection_version,
            "last_detection_example": self.last_detection_value,
            "values_seen": self.values_seen,
            "digest": self.digest(),
        }

    def digest(self) -> str:
        """SHA-256 of the canonical state: equal on replicas that applied the same entries."""
        return hashlib.sha256(orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    # ------------------------------------------------------------ checkpoints
    def to_json(self) -> dict[str, Any]:
        out = {
            "config": self.config,
            "state": self.detector.to_state(),
            "detections": self.detections,
            "values_seen": self.values_seen,
            "last_version": self.last_detection_version,
            "last_value": self.last_detection_value,
        }
        if self.reopen is not None:  # without a reaction: the state (and digest) as before
            out["reactions"] = self.reactions
        return out

    def restore(self, data: Any) -> None:
        """A checkpoint's monitor (``to_json``); a checkpoint without one (written before
        the model had a detector: never, for a model created with one) leaves it new."""
        if not isinstance(data, dict) or data.get("config") != self.config:
            return
        cls = type(self.detector)
        self.detector = cls.from_state(_params(self.config), data["state"])
        self.detections = int(data["detections"])
        self.values_seen = int(data["values_seen"])
        last_version, last_value = data.get("last_version"), data.get("last_value")
        self.last_detection_version = None if last_version is None else int(last_version)
        self.last_detection_value = None if last_value is None else int(last_value)
        self.reactions = int(data.get("reactions", 0))
