"""Adapter for the online linear classifiers (PA, PA-I, PA-II, CW, AROW, SCW-I, SCW-II).

Config (``PUT /models/{name}``)::

    {"algorithm": "arow", "params": {"r": 1.0},
     "features": {"kind": "dense", "dim": 28}}

Update examples are ``{"x": <features>, "y": <label>}`` plus an optional importance
``"weight"`` (finite, > 0; see :mod:`service.models.example_weights`), no other field; labels
are strings or integers and come back exactly as sent, except that a float equal
to an integer (``1.0``, as files give labels) is that integer. The labels of a
model are the keys of each prediction's ``scores``, so ``1`` and ``"1"`` cannot
both be labels of one model (the answer would hold two equal keys).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from learners.base import UpdateResult, check_label
from learners.features import Batch, FeatureError, FeatureSpec
from learners.linear import NotFittedError
from service.errors import Kind, ServiceError, invalid
from service.models import feature_names as names
from service.models import probability, record_entries
from service.models.base import FastUpdate, ModelAdapter
from service.models.drift_monitor import drift_config
from service.models.example_weights import WEIGHT_FIELD, check_weight, entry_weights, weights_meta
from service.models.feedback_rows import encode_record, update_with_served
from service.models.json_fields import items_field, json_int, require_list, too_large, type_name
from service.models.payload import (
    decode_payload,
    dense_batch,
    encode_dense_payload,
    encode_payload,
)
from service.models.record_entries import decode_records_entry, encode_records_entry

if TYPE_CHECKING:
    from learners.linear._base import CheckedBatch
    from service.settings import Settings

# A model name, as the routes take it (service.api.models.NAME_RE).
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
CONFIG_KEYS = frozenset({"algorithm", "params", "features", "metrics", "drift", "follows"})
EXAMPLE_FIELDS = ("x", "y", WEIGHT_FIELD)
INTEGER_PARAMS = frozenset({"pairs_per_group", "seed"})  # ranksvm
# Decoded entries kept between check_update and apply (at most 64 of at most 256 KiB:
# a few requests in flight per worker; a failed append's entry is dropped in turn).
_CHECKED_KEEP = 64
_CHECKED_MAX_BYTES = 256 * 1024


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
        field = "features.index_base" if str(e).startswith("index_base") else "features"
        raise invalid(f"features: {e}", field) from None
    extra = set(features) - {"kind", "dim", "bits", "index_base"}
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
    return spec


def encode_features(spec: FeatureSpec, rows: list[Any], where: str, settings: Settings) -> Any:
    try:
        return spec.encode(
            rows, where=where, field="x", max_features=settings.max_features_per_example
        )
    except FeatureError as e:
        if "exceed the limit" in e.problem:
            raise too_large(str(e), e.location) from None
        raise invalid(str(e), e.location) from None


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


class LinearAdapter(ModelAdapter):
    kind: ClassVar[str] = "linear"

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        super().__init__(config, model)
        self.spec = FeatureSpec.from_config(config["features"])
        names.attach(model, self.spec)
        # check_update's decoded entries, by id() of their bytes, until apply takes them
        self._checked: dict[int, tuple[bytes, Batch, dict[str, Any], CheckedBatch]] = {}
        # the probability a binary model serves (service.models.probability)
        self.calibration = probability.read_map(model, {})

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        from learners.linear import ALGORITHMS, make_classifier

        return online_model_config(
            cls.kind,
            body,
            settings,
            ALGORITHMS,
            lambda algorithm, spec, params: make_classifier(algorithm, spec.dim, params),
        )

    @classmethod
    def create(cls, config: dict[str, Any]) -> LinearAdapter:
        from learners.linear import make_classifier

        spec = FeatureSpec.from_config(config["features"])
        model = make_classifier(config["algorithm"], dim=spec.dim, params=dict(config["params"]))
        return cls(config, model)

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> LinearAdapter:
        from learners.artifact import read_header
        from learners.linear import LinearClassifier

        adapter = cls(config, LinearClassifier.from_bytes(blob))
        meta = read_header(blob).get("meta") or {}
        adapter.load_calibration(meta)
        if adapter.spec.stateful:
            record_entries.restore_statistics(adapter.spec, meta)
        return adapter

    def load_calibration(self, meta: dict[str, Any]) -> None:
        """The probability map an artifact's ``meta`` carries (``ValueError`` naming
        ``meta.calibration`` when malformed); a fresh one when it has none."""
        self.calibration = probability.read_map(self.model, meta)

    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], bytes | memoryview]:
        # the map's state (a few kB) taken now, with the weights, into the artifact's meta
        own = {**(meta or {}), probability.META_KEY: self.calibration.to_json()}
        if self.spec.stateful:
            own.update(record_entries.snapshot_meta(self.spec.encoder))
        dump: Callable[[], bytes | memoryview] = self.model.snapshot(own)
        return dump

    @classmethod
    def warmup(cls) -> None:
        from learners.linear import ALGORITHMS, first_nonfinite_row, make_classifier
        from service.models.progressive_metrics import EvalWindow

        spec = FeatureSpec.sparse(4)
        batch = spec.encode([{"0": 1.0}, {"1": 1.0, "3": -1.0}, {"2": 0.5}])

        window = EvalWindow(4)  # compiles the log-loss and AUC kernels
        dense = FeatureSpec.dense(4).encode([[1.0, 0.0, 2.0, 0.0]] * 4)  # the whole-state copy
        for algorithm in ALGORITHMS:
            clf = make_classifier(algorithm, dim=4, params={})
            pmap = probability.read_map(clf, {})  # the map's fit, and its variance kernels
            window.add_result(
                probability.learn(pmap, clf.update(batch, ["a", "b", "a"], [1.0, 2.0, 0.5]))
            )
            probability.add_probabilities(clf, pmap, batch, cls._answers(clf, batch))
            first_nonfinite_row(clf, batch, ["a", "b", "a"])  # the dry run's kernel
            first_nonfinite_row(clf, dense, ["a", "b", "a", "b"], [1.0, 2.0, 0.5, 1.0])
            clf.update(batch, ["a", "b", 1])
            clf.predict_details(batch)
        window.summary()

    # ------------------------------------------------------------ write path
    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]:
        examples = require_list(body, "examples", settings.max_batch_examples)
        xs, labels, weights = split_examples(examples)
        self._check_labels(labels, settings)
        if self.spec.stateful:  # features from the statistics at apply time: the records
            encode_features(self.spec, xs, "examples", settings)  # refused here if bad
            return encode_records_entry(xs, labels, **weights_meta(weights)), len(labels)
        X = dense_matrix(self.spec, xs, raw)
        if X is not None:
            return encode_dense_payload(X, labels, **weights_meta(weights)), len(labels)
        # the checked path, with errors naming the example and field
        batch = encode_fast(self.spec, xs, "examples", settings, b"")
        known = names.wanted(self.model, settings)
        new = names.new_names(known, xs, settings) if known is not None else []
        # the fast path's key order ("n", then "w"): both paths write the same bytes
        extra: dict[str, Any] = {"n": new} if new else {}
        extra.update(weights_meta(weights))
        dense = self.spec.kind == "dense"
        return encode_payload(batch, labels, dense=dense, **extra), len(labels)

    def parse_update_raw(self, raw: bytes, settings: Settings) -> FastUpdate | None:
        if self.spec.kind == "records":  # the general path encodes raw records
            return None
        if self.spec.kind != "dense":
            from service.models.fast_json_maps import scan_hashed_examples, scan_map_examples

            base = self.spec.index_base
            # 1-based keys: scanned as 0-based in [0, dim + 1), then shifted down; a key
            # 0 takes the general path, which refuses it naming the field. (Hashed
            # models have no index base.)
            dim, n_max, f_max = (
                self.spec.dim + base,
                settings.max_batch_examples,
                settings.max_features_per_example,
            )
            known = names.wanted(self.model, settings) if self.spec.kind == "hashed" else None
            if known is None:  # no names to record: the scan alone
                maps = scan_map_examples(raw, self.spec.kind, dim, n_max, f_max)
                if maps is None:
                    return None
                model, batch, labels, weights = maps
                extra: dict[str, Any] = {}
                if base:
                    shifted = shift_down(batch, base)
                    if shifted is None:
                        return None
                    batch = shifted
            else:
                hashed = scan_hashed_examples(raw, dim, n_max, f_max)
                if hashed is None:
                    return None
                model, batch, labels, hashes, weights = hashed
                new = names.new_names_raw(known, raw, hashes, settings, "examples")
                extra = {"n": new} if new else {}
            self._check_labels(labels, settings)
            extra.update(weights_meta(weights))
            payload = encode_payload(batch, labels, dense=False, **extra)
            return FastUpdate(model, payload, len(labels))
        from service.models.fast_json import scan_dense_examples

        scanned = scan_dense_examples(raw, self.spec.dim, settings.max_batch_examples)
        if scanned is None:
            return None
        self._check_labels(scanned.labels, settings)
        payload = encode_dense_payload(scanned.X, scanned.labels, **weights_meta(scanned.weights))
        return FastUpdate(scanned.model, payload, len(scanned.labels))

    def _check_labels(self, labels: list[Any], settings: Settings) -> None:
        """Refuse a batch with labels that clash (``1`` and ``"1"``, within the batch or
        with a known label) or whose new labels would grow the model past the limits.

        Reads ``labels_`` without the model lock: a concurrent update can only add
        labels, so the check may be a little lenient, never wrong the other way
        (``apply`` checks clashes again, against the labels of that moment)."""
        known = self.model.labels_
        clash = label_clash(labels, known)
        if clash is not None:
            raise invalid(clash.message("examples"), f"examples[{clash.row}].y")
        new = set(labels).difference(known)
        if not new:
            return
        total = len(known) + len(new)
        # per label: a dim-sized mean row, plus the covariance (diagonal or d x d)
        cov = self.model.params.get("covariance")
        per_label = (
            8
            * self.spec.dim
            * (1 + (self.spec.dim if cov == "full" else 1 if cov == "diagonal" else 0))
        )
        if total > settings.max_labels:
            raise ServiceError(
                Kind.INVALID,
                "too_many_labels",
                f"examples: {len(new)} new labels would give the model {total} labels, "
                f"more than the limit of {settings.max_labels}",
                "examples",
            )
        if total * per_label > settings.max_model_bytes:
            raise ServiceError(
                Kind.INVALID,
                "model_too_large",
                f"examples: {total} labels x {self.spec.dim} dimensions would need "
                f"{total * per_label / 2**30:.1f} GiB of weights, more than the limit of "
                f"{settings.max_model_bytes / 2**30:.1f} GiB",
                "examples",
            )

    def check_update(self, payload: bytes) -> None:
        from learners.linear import first_nonfinite_row

        records = decode_records_entry(payload)
        if records is not None:  # encoded with the statistics as they are now
            batch = self.spec.encoder.encode(records[0], sequential=True)
            meta = records[1]
        else:
            batch, meta = decode_payload(payload, self.spec.dim)
        weights = entry_weights(meta)
        checked = self.model.check(batch, meta["y"], weights)
        row = first_nonfinite_row(self.model, batch, meta["y"], weights, checked)
        if row is not None:
            loc = f"examples[{row}].x"
            raise invalid(f"{loc}: {overflow_problem(batch, [row])}", loc)
        # This worker appends and applies this very bytes object next (several are in
        # flight at once, waiting for one group commit): ``apply`` takes the decoded,
        # checked and label-coded form instead of making it again (``update`` checks
        # that its codes still hold). Keyed by id() and held with the object, so an id
        # cannot be reused while its entry is here; nothing mutates them either.
        if records is None and len(payload) <= _CHECKED_MAX_BYTES:  # (records: at apply)
            kept = self._checked
            kept[id(payload)] = (payload, batch, meta, checked)
            if len(kept) > _CHECKED_KEEP:  # entries whose append failed: the oldest go
                del kept[next(iter(kept))]

    def forget_checked(self, payload: bytes) -> None:
        # An entry applied from the store's copy (the apply loop was first), a replayed
        # key, a refused append: else it stays until 64 newer ones push it out, ~10 KB
        # each, and a worker's memory crept up for tens of minutes (issue 20, defect 10).
        hit = self._checked.get(id(payload))
        if hit is not None and hit[0] is payload:
            del self._checked[id(payload)]

    def _decode(self, payload: bytes) -> tuple[Batch, dict[str, Any], CheckedBatch | None]:
        hit = self._checked.pop(id(payload), None)
        if hit is not None and hit[0] is payload:
            return hit[1], hit[2], hit[3]
        return (*decode_payload(payload, self.spec.dim), None)

    def apply(self, payload: bytes) -> UpdateResult:
        from learners.linear import NonFiniteWeightsError

        records = decode_records_entry(payload)
        if records is not None:
            return self._apply_records(*records)
        batch, meta, checked = self._decode(payload)
        refuse_label_clash(meta["y"], self.model.labels_)
        try:
            result: UpdateResult
            weights = entry_weights(meta)
            if meta.get("fb"):  # rows of delayed labels (service.models.feedback_rows)
                result = update_with_served(self.model, batch, meta["y"], meta["fb"], weights)
            else:
                result = self.model.update(batch, meta["y"], weights, checked)
        except NonFiniteWeightsError as e:  # appended by a worker behind this state
            raise ValueError(f"examples[{e.row}].x: {overflow_problem(batch, [e.row])}") from None
        names.record(self.model, meta)
        return probability.learn(self.calibration, result)

    def _apply_records(self, records: list[Any], meta: dict[str, Any]) -> UpdateResult:
        """Learn an entry of raw records: each encoded with the statistics of the
        records before it, which then take it in (service.models.record_entries); the
        statistics as they were if the entry is refused."""
        from learners.linear import NonFiniteWeightsError

        refuse_label_clash(meta["y"], self.model.labels_)
        encoder = self.spec.encoder
        before = encoder._state
        batch = encoder.learn(records)
        try:
            result: UpdateResult = self.model.update(batch, meta["y"], entry_weights(meta))
        except NonFiniteWeightsError as e:
            encoder._state = before
            raise ValueError(f"examples[{e.row}].x: {overflow_problem(batch, [e.row])}") from None
        except BaseException:
            encoder._state = before
            raise
        return probability.learn(self.calibration, result)

    def state_digest(self) -> str:
        digest = str(self.model.state_digest())
        if not self.spec.stateful:
            return digest
        # the record statistics are model state too
        both = f"{digest}:{self.spec.encoder.state_digest()}".encode()
        return hashlib.sha256(both).hexdigest()

    # ------------------------------------------------------------ read path
    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        instances = require_list(body, "instances", settings.max_batch_examples)
        return self._predict(instances, settings, raw)[0]

    def _predict(
        self, instances: list[Any], settings: Settings, raw: bytes
    ) -> tuple[list[dict[str, Any]], Any]:
        xs = items_field(instances, "instances", "x")
        batch = encode_fast(self.spec, xs, "instances", settings, raw)
        return self.predict_batch(batch), batch

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        try:
            answers = self._answers(self.model, batch)
        except NotFittedError:
            raise ServiceError(
                Kind.CONFLICT,
                "not_fitted",
                "the model has not learned any label yet; send /update first",
            ) from None
        probability.add_probabilities(self.model, self.calibration, batch, answers)
        return answers

    @staticmethod
    def _answers(model: Any, batch: Batch) -> list[dict[str, Any]]:
        return [
            {"label": p.label, "score": p.score, "scores": p.scores, "confidence": p.confidence}
            for p in model.predict_details(batch)
        ]

    # ------------------------------------------------------------ delayed labels
    def predict_tracked(
        self, instances: list[Any], ids: list[str | None], settings: Settings, raw: bytes
    ) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
        """``predict`` of ``instances`` (their ``id`` fields taken out, in ``ids``), and a
        record (``feedback_rows.encode_record``) for each instance that had an id."""
        predictions, batch = self._predict(instances, settings, raw)
        records = [
            (i, encode_record(batch, k, predictions[k])) for k, i in enumerate(ids) if i is not None
        ]
        return predictions, records

    def zero_features(self) -> Any:
        """An ``x`` of the model's kind that is the zero vector (a placeholder)."""
        return [0.0] * self.spec.dim if self.spec.kind == "dense" else {}

    def weights(self, top: int, label: str | None) -> dict[str, Any]:
        from service.models.weights import linear_weights

        return linear_weights(self.model, self.spec, top, label)

    tensor_task: ClassVar[str | None] = "classify"

    def tensor_width(self) -> int | None:
        return self.spec.dim if self.spec.kind == "dense" else None

    def classes(self) -> list[Any]:
        return list(self.model.labels_)

    def has_confidence(self) -> bool:
        return getattr(self.model, "covariance", "none") != "none"  # PA has none

    def describe(self) -> dict[str, Any]:
        labels = getattr(self.model, "labels_", None)
        out = {"labels": list(labels) if labels is not None else [], "dim": self.spec.dim}
        calibration = probability.describe(self.model, self.calibration)
        if calibration is not None:
            out["calibration"] = calibration
        return out


def shift_down(batch: Batch, base: int) -> Batch | None:
    """``batch`` of ``base``-based sparse keys (its ``dim`` counts the unused index 0) as
    0-based columns; ``None`` when a key is below ``base``. Rows are sorted, so each
    row's first index is its smallest and the shift keeps them sorted."""
    if batch.nnz and int(batch.indices.min()) < base:
        return None
    return Batch(batch.indptr, batch.indices - base, batch.values, batch.dim - base)


def split_examples(examples: list[Any]) -> tuple[list[Any], list[Any], list[float] | None]:
    """``x``s, checked ``y``s and checked weights (``None`` when no example has one) of
    ``[{"x": ..., "y": ..., "weight"?: ...}, ...]`` in one pass."""
    xs: list[Any] = []
    ys: list[Any] = []
    ws: list[float] | None = None
    for i, ex in enumerate(examples):
        if type(ex) is not dict:
            raise invalid(
                f"examples[{i}]: must be an object, got {type_name(ex)}", f"examples[{i}]"
            )
        try:
            x, y = ex["x"], ex["y"]
        except KeyError:
            missing = "x" if "x" not in ex else "y"
            raise invalid(
                f"examples[{i}].{missing}: field required", f"examples[{i}].{missing}"
            ) from None
        if len(ex) != 2:
            refuse_unknown_fields(ex, EXAMPLE_FIELDS, f"examples[{i}]")
            if WEIGHT_FIELD in ex:
                if ws is None:
                    ws = [1.0] * i
                ws.append(check_weight(ex[WEIGHT_FIELD], f"examples[{i}].{WEIGHT_FIELD}"))
            elif ws is not None:
                ws.append(1.0)
        elif ws is not None:
            ws.append(1.0)
        t = type(y)
        if not ((t is str and y) or t is int):
            y = check_label_api(y, i)  # 1.0 -> 1, or raises with the example named
        xs.append(x)
        ys.append(y)
    return xs, ys, ws


def refuse_unknown_fields(item: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    """422 naming the first field of ``item`` not in ``known`` (e.g. ``examples[0].foo``):
    a field the service would silently ignore is a client's mistake (or a feature it
    does not have)."""
    for key in item:
        if key not in known:
            loc = f"{where}.{key}"
            raise invalid(f"{loc}: unknown field (an example has only {list(known)})", loc)


class LabelClash(NamedTuple):
    """``labels[row]`` and ``other`` (a known label, or ``labels[other_row]``) are
    different labels with the same JSON key (``1`` and ``"1"``)."""

    row: int
    label: Any
    other: Any
    other_row: int | None

    def message(self, where: str) -> str:
        whose = (
            "a label the model already knows"
            if self.other_row is None
            else f"the label of {where}[{self.other_row}]"
        )
        return (
            f"{where}[{self.row}].y: label {self.label!r} clashes with {self.other!r}, "
            f"{whose}: both would be the key {str(self.label)!r} of a prediction's "
            '"scores" (a JSON object), so one model cannot have both'
        )


def label_clash(labels: list[Any], known: list[Any]) -> LabelClash | None:
    """The first label of ``labels`` (string or int) whose JSON key (``str``) another
    label, known or earlier in the batch, already has; ``None`` when there is none.
    Only a batch or model mixing strings and ints can clash (one pass over types)."""
    types = set(map(type, labels))
    if len(types) == 1 and (not known or {type(k) for k in known} == types):
        return None
    seen: dict[str, tuple[Any, bool]] = {str(k): (k, True) for k in known}  # (label, known)
    for lab in dict.fromkeys(labels):  # distinct labels, in order of first appearance
        other, is_known = seen.setdefault(str(lab), (lab, False))
        if type(other) is not type(lab):  # equal keys, one an int and one a str
            at = None if is_known else labels.index(other)
            return LabelClash(labels.index(lab), lab, other, at)
    return None


def refuse_label_clash(labels: list[Any], known: list[Any]) -> None:
    """``apply``'s check of an entry's labels against the model's at that moment (another
    worker may have appended a clashing label since this entry was parsed): raises, so
    every replica skips the entry alike (they hold the same labels at that position)."""
    clash = label_clash(labels, known)
    if clash is not None:
        raise ValueError(clash.message("labels"))


def dense_matrix(spec: FeatureSpec, xs: list[Any], raw: bytes) -> np.ndarray | None:
    """Dense rows straight through numpy when that is provably what ``spec.encode``
    would read: a finite float64 ``(n, dim)`` matrix, else ``None``."""
    if spec.kind != "dense" or not raw or b"true" in raw or b"false" in raw:
        return None
    # No JSON true/false anywhere, so no bools among the values (numpy would
    # silently turn them into 1.0/0.0). Strings, None or ragged rows change the
    # inferred dtype/shape and fall through to the checked path.
    try:
        X = np.array(xs)
    except (ValueError, TypeError):
        return None
    if X.shape != (len(xs), spec.dim) or X.dtype.kind not in "fi":
        return None
    X = X.astype(np.float64, copy=False)
    return X if np.isfinite(X).all() else None


def encode_fast(
    spec: FeatureSpec, xs: list[Any], where: str, settings: Settings, raw: bytes
) -> Any:
    """The batch of ``xs``: the numpy fast path when it applies, else ``spec.encode``
    (which names the offending example and field)."""
    X = dense_matrix(spec, xs, raw)
    if X is not None:
        return dense_batch(X)
    if spec.kind == "dense":
        reject_strings(xs, where)
    return encode_features(spec, xs, where, settings)


def reject_strings(xs: list[Any], where: str) -> None:
    # numpy turns "3" into 3.0 when asked for floats; a feature value must be a number.
    for i, row in enumerate(xs):
        if isinstance(row, list):
            for j, v in enumerate(row):
                if isinstance(v, str):
                    loc = f"{where}[{i}].x[{j}]"
                    raise invalid(f"{loc}: value must be a number, got str", loc)


def check_label_api(y: Any, i: int) -> Any:
    try:
        return check_label(y, f"examples[{i}].y")
    except FeatureError as e:
        raise invalid(str(e), e.location) from None


def overflow_problem(batch: Any, rows: Sequence[int]) -> str:
    """Why an example was refused although every value is finite (names the largest)."""
    vals = np.concatenate([batch.values[batch.indptr[r] : batch.indptr[r + 1]] for r in rows])
    big = float(np.abs(vals).max()) if vals.size else 0.0
    return (
        f"these feature values (largest magnitude {big:.3g}) would make the model's "
        "weights non-finite; the update was refused and the model is unchanged"
    )
