"""The stored config of an online model (``PUT /models/{name}``): its algorithm and
hyperparameters (the learner's own, defaults filled in), features (dense, sparse,
hashed or raw records), metrics window, drift detector and the model it follows;
every refusal a 422 naming the field. Shared by the linear classifiers and RankSVM.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from learners.features import FeatureError, FeatureSpec
from service.errors import ServiceError, invalid
from service.models.drift_monitor import drift_config
from service.models.json_fields import json_int, too_large, type_name

if TYPE_CHECKING:
    from service.settings import Settings


# A model name, as the routes take it (service.api.models.NAME_RE).
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
CONFIG_KEYS = frozenset({"algorithm", "params", "features", "metrics", "drift", "follows"})
INTEGER_PARAMS = frozenset({"pairs_per_group", "seed"})  # ranksvm
_RECORD_DEFAULT_MAX_FEATURES = 10_000  # learners.records.config's default


def feature_spec(body: dict[str, Any], settings: Settings) -> FeatureSpec:
    features = body.get("features")
    if not isinstance(features, dict):
        raise invalid(
            f'features: must be an object like {{"kind": "dense", "dim": 28}}, '
            f"got {type_name(features)}",
            "features",
        )
    if features.get("kind") == "records":
        return records_spec(features, settings)
    features = {k: json_int(v) for k, v in features.items()}  # "dim": 28.0 is 28
    try:
        spec = FeatureSpec.from_config(features)
    except ValueError as e:
        msg = str(e)
        field = next((f"features.{k}" for k in ("index_base", "intercept") if msg.startswith(k)),
                     "features")  # fmt: skip
        raise invalid(f"features: {e}", field) from None
    extra = set(features) - {"kind", "dim", "bits", "index_base", "intercept"}
    if extra:
        raise invalid(f"features: unknown field(s) {sorted(extra)}", "features")
    # A field of another kind is a mistake (the value would be silently ignored).
    misplaced = "dim" if spec.kind == "hashed" else "bits"
    if misplaced in features:
        raise invalid(
            f"features.{misplaced}: does not apply to kind {spec.kind!r} "
            f"({'bits' if spec.kind == 'hashed' else 'dim'} sets the dimension)",
            f"features.{misplaced}",
        )
    if spec.dim > settings.max_dim:
        raise invalid(
            f"features: dimension {spec.dim} exceeds the limit of {settings.max_dim}", "features"
        )
    return spec


def records_spec(features: dict[str, Any], settings: Settings) -> FeatureSpec:
    """Raw records (``learners.records``): a 422 naming the config's bad field. The
    statistics of ``standardize`` and ``idf`` are learned in log order, which the
    service does not do yet: refused, naming the field."""
    from learners.records.config import ConfigError

    fields = features.get("fields")
    if isinstance(fields, dict):
        # The fields in the order the store keeps them (its JSON sorts keys): a worker
        # that builds the model from the stored config then has the same encoder as the
        # one that took the PUT, which makes a record's feature names in field order
        # (the names a bounded map keeps; the encoded rows do not depend on it).
        features = {**features, "fields": dict(sorted(fields.items()))}
    if "max_features_per_record" not in features:  # the encoder's default, within ours
        cap = min(_RECORD_DEFAULT_MAX_FEATURES, settings.max_features_per_example)
        features = {**features, "max_features_per_record": cap}
    try:
        spec = FeatureSpec.records(features)
    except ConfigError as e:
        raise invalid(str(e), e.path) from None
    except ValueError as e:
        raise invalid(f"features: {e}", "features") from None
    if spec.dim > settings.max_dim:
        raise invalid(
            f"features.bits: dimension {spec.dim} exceeds the limit of {settings.max_dim}",
            "features.bits",
        )
    from learners.records.state import idf_fields

    # idf's document frequencies: an int32 table of (idf fields, 2**bits) held by every
    # worker (counted in place: learners.records._row_kernel.encode_rows) and read whole
    # into each checkpoint: a sixteenth of the model budget (256 MiB by default: 4 idf
    # fields at bits 24, 64 at bits 20)
    idf_bytes = 4 * len(idf_fields(spec.encoder.config)) * spec.dim
    if idf_bytes > settings.max_model_bytes // 16:
        raise invalid(
            f"features.bits: idf over {len(idf_fields(spec.encoder.config))} text fields "
            f"at {spec.dim} columns needs a {idf_bytes / 2**20:.0f} MiB table, more than "
            f"{settings.max_model_bytes // 16 / 2**20:.0f} MiB (max_model_bytes / 16); use "
            "fewer bits or fewer idf fields",
            "features.bits",
        )
    per_record = spec.encoder.config.max_features_per_record
    if per_record > settings.max_features_per_example:
        # one limit for every kind: a record may not make more features than the
        # service takes in one example of a sparse or hashed model
        field = "features.max_features_per_record"
        raise invalid(
            f"{field}: {per_record} exceeds this service's max_features_per_example "
            f"({settings.max_features_per_example}, LEARNSERVE_MAX_FEATURES_PER_EXAMPLE)",
            field,
        )
    return spec


def encode_features(spec: FeatureSpec, rows: list[Any], where: str, settings: Settings) -> Any:
    try:
        return spec.encode(
            rows, where=where, field="x", max_features=settings.max_features_per_example
        )
    except FeatureError as e:
        raise _refused(e) from None


def encode_records_named(
    spec: FeatureSpec, rows: list[Any], known: Any, settings: Settings
) -> tuple[Any, list[str]]:
    """A records model's batch and the names of its features ``known`` (the model's
    names map) lacks, within the room left, in one encoding pass."""
    try:
        batch, new = spec.encoder.encode_named(rows, known.unknown_hashes, where="examples")
    except FeatureError as e:
        raise _refused(e) from None
    room = settings.max_feature_names - len(known)
    return batch, known.unknown(new)[: max(room, 0)]


def _refused(e: FeatureError) -> ServiceError:
    if "exceed the limit" in e.problem:
        return too_large(str(e), e.location)
    return invalid(str(e), e.location)


def online_model_config(
    kind: str,
    body: dict[str, Any],
    settings: Settings,
    algorithms: Sequence[str],
    build: Callable[[str, FeatureSpec, dict[str, Any]], Any],
) -> dict[str, Any]:
    """Validate a ``PUT /models/{name}`` body of an online kind; return the stored config.

    ``build(algorithm, spec, params)`` constructs the learner once, so bad
    hyperparameters are refused here with the learner's own message
    (``params.r: must be > 0``) instead of when the first update arrives. The config
    keeps the learner's hyperparameters, every one (defaults filled in): a stored model
    says what it is, whatever later defaults become (``{"r": 1.0}`` and ``{}`` are
    one AROW model; configs stored before this kept the body's params, and compare
    equal by ``service.models.config_compare``)."""
    extra = set(body) - CONFIG_KEYS
    if extra:
        raise invalid(f"unknown field(s) {sorted(extra)}", sorted(extra)[0])
    algorithm = body.get("algorithm")
    if not isinstance(algorithm, str) or algorithm not in algorithms:
        raise invalid(
            f"algorithm: must be one of {list(algorithms)}, got {algorithm!r}", "algorithm"
        )
    params = body.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid(f"params: must be an object, got {type_name(params)}", "params")
    # JSON does not tell 100.0 from 100: integer-valued hyperparameters arrive as ints.
    params = {k: json_int(v) if k in INTEGER_PARAMS else v for k, v in params.items()}
    spec = feature_spec(body, settings)
    try:
        learner = build(algorithm, spec, dict(params))
    except (ValueError, TypeError) as e:
        msg = str(e)
        field = msg.split(":", 1)[0] if msg.startswith("params.") else "params"
        raise invalid(msg if msg.startswith("params") else f"params: {msg}", field) from None
    config = {"kind": kind, "algorithm": algorithm, "params": dict(learner.params),
              "features": spec.to_config()}  # fmt: skip
    if body.get("metrics") is not None:  # kept only when sent: an older model's body stays equal
        metrics = metrics_config(body["metrics"])
        if metrics:
            config["metrics"] = metrics
    # Always stored, defaults filled in: the detector is the model's from its creation.
    reopens = getattr(learner, "covariance", "none") != "none"  # CW, AROW, SCW
    config["drift"] = drift_config(body.get("drift"), reopens)
    follows = body.get("follows")
    if follows is not None:  # a challenger (service.engine.followers checks the leader)
        if not isinstance(follows, str) or not _NAME.fullmatch(follows):
            raise invalid(f"follows: must be a model name, got {follows!r}", "follows")
        config["follows"] = follows
    return config


def metrics_config(metrics: Any) -> dict[str, Any]:
    """``{"window": n}``: the progressive metrics' window, 1..MAX_WINDOW examples."""
    from service.models.progressive_metrics import MAX_WINDOW

    if not isinstance(metrics, dict):
        raise invalid(f"metrics: must be an object, got {type_name(metrics)}", "metrics")
    extra = sorted(set(metrics) - {"window"})
    if extra:
        raise invalid(f"metrics.{extra[0]}: unknown field (known: window)", f"metrics.{extra[0]}")
    if "window" not in metrics:
        return {}
    w = json_int(metrics["window"])
    if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_WINDOW:
        raise invalid(
            f"metrics.window: must be an integer in [1, {MAX_WINDOW}], got {metrics['window']!r}",
            "metrics.window",
        )
    return {"window": w}
