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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from learners.base import UpdateResult
from learners.features import Batch, FeatureSpec
from learners.intercept import with_ones_column
from learners.linear.serving import dense_answers
from service.errors import Kind, ServiceError, invalid
from service.models import feature_names as names
from service.models import probability, record_entries
from service.models.base import FastUpdate, ModelAdapter
from service.models.example_weights import entry_weights, weights_meta
from service.models.feedback_rows import Record, served_outcome, update_with_served
from service.models.json_fields import require_list
from service.models.kernel_families import usable
from service.models.linear_inputs import (
    dense_matrix,
    encode_fast,
    label_clash,
    overflow_problem,
    records_update_raw,
    refuse_label_clash,
    shift_down,
    split_examples,
)
from service.models.linear_predict import LinearReadPath
from service.models.online_config import (
    encode_features,
    encode_records_named,
    online_model_config,
)
from service.models.payload import (
    decode_payload,
    encode_dense_payload,
    encode_payload,
)
from service.models.record_entries import (
    RECORDS_MAGIC,
    decode_records_entry,
    encode_records_entry,
)

if TYPE_CHECKING:
    from learners.linear._learning import CheckedBatch
    from service.settings import Settings

# Decoded entries kept between check_update and apply (at most 64 of at most 256 KiB:
# a few requests in flight per worker; a failed append's entry is dropped in turn).
_CHECKED_KEEP = 64
_CHECKED_MAX_BYTES = 256 * 1024


class LinearAdapter(LinearReadPath, ModelAdapter):
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
            dense_answers(clf, dense.to_dense()[:1], pmap.a, pmap.b)  # a dense /predict
            first_nonfinite_row(clf, batch, ["a", "b", "a"])  # the dry run's kernel
            first_nonfinite_row(clf, dense, ["a", "b", "a", "b"], [1.0, 2.0, 0.5, 1.0])
            clf.update(batch, ["a", "b", 1])
            clf.predict_details(batch)
        window.summary()

    # ------------------------------------------------------------ write path
    def target_check(self) -> Callable[[Any, int], Any] | None:
        """How an example's ``y`` is checked (None: a label, see ``split_examples``)."""
        return None

    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]:
        examples = require_list(body, "examples", settings.max_batch_examples)
        xs, labels, weights = split_examples(examples, self.target_check())
        self._check_labels(labels, settings)
        if self.spec.stateful:  # features from the statistics at apply time: the records
            encode_features(self.spec, xs, "examples", settings)  # refused here if bad
            fields = frozenset(f.name for f in self.spec.encoder.config.fields)
            kept = record_entries.read_fields(xs, fields)
            return encode_records_entry(kept, labels, **weights_meta(weights)), len(labels)
        X = dense_matrix(self.spec, xs, raw)
        if X is not None:
            return encode_dense_payload(X, labels, **weights_meta(weights)), len(labels)
        # the checked path, with errors naming the example and field
        known = names.wanted(self.model, settings)
        if known is not None and self.spec.kind == "records":  # features and names, one pass
            batch, new = encode_records_named(self.spec, xs, known, settings)
        else:
            batch = encode_fast(self.spec, xs, "examples", settings, b"")
            new = names.new_names(known, xs, settings) if known is not None else []
        # the fast path's key order ("n", then "w"): both paths write the same bytes
        extra: dict[str, Any] = {"n": new} if new else {}
        extra.update(weights_meta(weights))
        dense = self.spec.kind == "dense"
        return encode_payload(batch, labels, dense=dense, **extra), len(labels)

    def ignored_fields(self, examples: list[Any]) -> dict[str, int]:
        if self.spec.kind != "records":
            return {}
        return self.spec.encoder.ignored_fields([e.get("x") for e in examples])

    def parse_update_raw(self, raw: bytes, settings: Settings) -> FastUpdate | None:
        if self.spec.kind == "records":
            return self._records_raw(raw, settings)
        if self.spec.kind != "dense":
            if not usable("json-maps"):  # still compiling: the orjson path reads it
                return None
            from service.models.fast_json_maps import scan_hashed_examples, scan_map_examples

            base = self.spec.index_base
            # 1-based keys: scanned as 0-based in [0, dim + 1), then shifted down; a key
            # 0 takes the general path, which refuses it naming the field. (Hashed
            # models have no index base.)
            dim, n_max, f_max = (
                self.spec.width + base,
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
            batch = self.spec.add_intercept(batch)  # as spec.encode adds it
            if not self._takes_scanned(labels):
                return None
            self._check_labels(labels, settings)
            extra.update(weights_meta(weights))
            payload = encode_payload(batch, labels, dense=False, **extra)
            return FastUpdate(model, payload, len(labels))
        if not usable("json"):
            return None
        from service.models.fast_json import scan_dense_examples

        scanned = scan_dense_examples(raw, self.spec.width, settings.max_batch_examples)
        if scanned is None or not self._takes_scanned(scanned.labels):
            return None
        self._check_labels(scanned.labels, settings)
        X = with_ones_column(scanned.X) if self.spec.intercept else scanned.X
        payload = encode_dense_payload(X, scanned.labels, **weights_meta(scanned.weights))
        return FastUpdate(scanned.model, payload, len(scanned.labels))

    def _records_raw(self, raw: bytes, settings: Settings) -> FastUpdate | None:
        read = records_update_raw(raw, self.spec, settings, names.wanted(self.model, settings))
        if read is None:
            return None
        model, batch, labels, extra = read
        if not self._takes_scanned(labels):
            return None
        self._check_labels(labels, settings)
        payload = encode_payload(batch, labels, dense=False, **extra)
        return FastUpdate(model, payload, len(labels))

    def _takes_scanned(self, labels: list[Any]) -> bool:
        """Whether the scanners' labels are this model's: a number other than an integer
        (``1.5``, ``1e3``) is no label (the general path reads ``1e3`` as 1000 and
        refuses ``1.5``, naming it)."""
        return float not in set(map(type, labels))

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
        records = decode_records_entry(payload) if payload[:4] == RECORDS_MAGIC else None
        if records is not None:  # encoded with the statistics as they are now
            batch = self.spec.encoder.encode(records[0], sequential=True)
            meta = records[1]
        else:
            batch, meta = decode_payload(payload, self.spec.dim)
        weights = entry_weights(meta)
        checked = self.model.check(batch, meta["y"], weights)
        row = self._first_nonfinite_row(batch, meta["y"], weights, checked)
        if row is not None:
            loc, problem = self._overflow_refusal(batch, meta["y"], weights, row)
            raise invalid(f"{loc}: {problem}", loc)
        # This worker appends and applies this very bytes object next (several are in
        # flight at once, waiting for one group commit): ``apply`` takes the decoded,
        # checked and label-coded form instead of making it again (``update`` checks
        # that its codes still hold). Keyed by id() and held with the object, so an id
        # cannot be reused while its entry is here; nothing mutates them either.
        if records is None and len(payload) <= _CHECKED_MAX_BYTES:  # (records: at apply)
            self._keep_checked(payload, batch, meta, checked)

    def _keep_checked(
        self, payload: bytes, batch: Batch, meta: dict[str, Any], checked: Any
    ) -> None:
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

        if payload[:4] == RECORDS_MAGIC:  # raw records (features from the statistics)
            return self._apply_records(*decode_records_entry(payload))  # type: ignore[misc]
        batch, meta, checked = self._decode(payload)
        self._refuse_clash(meta["y"])
        try:
            result = self._update_entry(batch, meta, entry_weights(meta), checked)
        except NonFiniteWeightsError as e:  # appended by a worker behind this state
            loc, problem = self._overflow_refusal(batch, meta["y"], entry_weights(meta), e.row)
            raise ValueError(f"{loc}: {problem}") from None
        names.record(self.model, meta)
        return self._learned(result, meta)

    def _apply_records(self, records: list[Any], meta: dict[str, Any]) -> UpdateResult:
        """Learn an entry of raw records: each encoded with the statistics of the
        records before it, which then take it in (service.models.record_entries); the
        statistics as they were if the entry is refused."""
        from learners.linear import NonFiniteWeightsError

        self._refuse_clash(meta["y"])
        encoder = self.spec.encoder
        before = encoder._state
        batch = encoder.learn(records)
        try:
            result: UpdateResult = self.model.update(batch, meta["y"], entry_weights(meta))
        except NonFiniteWeightsError as e:
            encoder._state = before
            loc, problem = self._overflow_refusal(batch, meta["y"], entry_weights(meta), e.row)
            raise ValueError(f"{loc}: {problem}") from None
        except BaseException:
            encoder._state = before
            raise
        return self._learned(result, meta)

    def _overflow_refusal(
        self, batch: Batch, y: list[Any], weights: list[float] | None, row: int
    ) -> tuple[str, str]:
        """Where and why the example ``row`` was refused although every value is finite:
        a classifier's labels are classes, so its feature values."""
        return f"examples[{row}].x", overflow_problem(batch, [row])

    # What a model of another target (service.models.regression) does otherwise: the
    # dry run's kernel, the labels' clash check, the update of an entry (with delayed
    # labels' rows) and what follows it.
    def _first_nonfinite_row(
        self, batch: Batch, y: list[Any], weights: list[float] | None, checked: Any
    ) -> int | None:
        from learners.linear import first_nonfinite_row

        return first_nonfinite_row(self.model, batch, y, weights, checked)

    def _refuse_clash(self, y: list[Any]) -> None:
        refuse_label_clash(y, self.model.labels_)

    def _update_entry(
        self, batch: Batch, meta: dict[str, Any], weights: list[float] | None, checked: Any
    ) -> UpdateResult:
        if meta.get("fb"):  # rows of delayed labels (service.models.feedback_rows)
            return update_with_served(self.model, batch, meta["y"], meta["fb"], weights)
        result: UpdateResult = self.model.update(batch, meta["y"], weights, checked)
        return result

    def _learned(self, result: UpdateResult, meta: dict[str, Any]) -> UpdateResult:
        """An applied entry's result, as the window reads it: scored by the probability
        map before the map learns the entry's scores."""
        return probability.learn(self.calibration, result)

    def state_digest(self) -> str:
        digest = str(self.model.state_digest())
        if not self.spec.stateful:
            return digest
        # the record statistics are model state too
        both = f"{digest}:{self.spec.encoder.state_digest()}".encode()
        return hashlib.sha256(both).hexdigest()

    @staticmethod
    def served_outcome(rec: Record, y: Any) -> tuple[int, float]:
        """What the prediction kept with an id scores against its label, as the
        entry's ``fb`` row carries it (:func:`service.models.feedback_rows.served_outcome`)."""
        return served_outcome(rec, y)

    def zero_features(self) -> Any:
        """An ``x`` of the model's kind that is the zero vector (a placeholder)."""
        return [0.0] * self.spec.width if self.spec.kind == "dense" else {}

    def weights(self, top: int, label: str | None) -> dict[str, Any]:
        from service.models.weights import linear_weights

        return linear_weights(self.model, self.spec, top, label)

    tensor_task: ClassVar[str | None] = "classify"

    def tensor_width(self) -> int | None:
        return self.spec.width if self.spec.kind == "dense" else None

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
