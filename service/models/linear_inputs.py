"""The request side of the linear classifiers: examples split into features, labels and
weights; labels checked against the model's; feature rows encoded (numpy's fast path
for dense rows, else ``FeatureSpec.encode`` naming the example and field); why a batch
was refused for overflow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from learners.base import check_label
from learners.features import Batch, FeatureError, FeatureSpec
from learners.intercept import with_ones_column
from service.errors import invalid
from service.models.example_weights import WEIGHT_FIELD, check_weight
from service.models.json_fields import type_name
from service.models.kernel_families import usable
from service.models.payload import dense_batch

if TYPE_CHECKING:
    from service.settings import Settings

from service.models.online_config import encode_features

EXAMPLE_FIELDS = ("x", "y", WEIGHT_FIELD)


def shift_down(batch: Batch, base: int) -> Batch | None:
    """``batch`` of ``base``-based sparse keys (its ``dim`` counts the unused index 0) as
    0-based columns; ``None`` when a key is below ``base``. Rows are sorted, so each
    row's first index is its smallest and the shift keeps them sorted."""
    if batch.nnz and int(batch.indices.min()) < base:
        return None
    return Batch(batch.indptr, batch.indices - base, batch.values, batch.dim - base)


def split_examples(
    examples: list[Any], check_y: Callable[[Any, int], Any] | None = None
) -> tuple[list[Any], list[Any], list[float] | None]:
    """``x``s, checked ``y``s and checked weights (``None`` when no example has one) of
    ``[{"x": ..., "y": ..., "weight"?: ...}, ...]`` in one pass. ``check_y(y, i)``: how a
    target is checked (a regressor's numbers); labels (strings, integers) by default."""
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
        if check_y is not None:
            y = check_y(y, i)
        elif not ((t is str and y) or t is int):
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
    if X.shape != (len(xs), spec.width) or X.dtype.kind not in "fi":
        return None
    X = X.astype(np.float64, copy=False)
    if not np.isfinite(X).all():
        return None
    return with_ones_column(X) if spec.intercept else X


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


def records_update_raw(
    raw: bytes, spec: FeatureSpec, settings: Settings, known: Any
) -> tuple[str, Batch, list[Any], dict[str, Any]] | None:
    """A records model's /update body read by the compiled scanner
    (:mod:`service.models.fast_json_records`): (model, batch, labels, the payload's extras
    as ``parse_update`` writes them: new names ``"n"`` within the room left, then the
    weights), or None for a body the general path reads (and for configs with
    standardize or idf, whose records go to the log raw). ``known``: the names map when
    names are recorded, else None."""
    from service.models.example_weights import weights_meta
    from service.models.fast_json_records import scan_records_examples

    if not usable("records-scan"):  # still compiling: the general path reads it
        return None
    new_of = None if known is None else known.unknown_hashes
    scanned = scan_records_examples(raw, spec.encoder, settings.max_batch_examples, new_of)
    if scanned is None:
        return None
    model, batch, labels, weights, new = scanned
    extra: dict[str, Any] = {}
    if known is not None and new:  # as encode_records_named bounds them
        kept = known.unknown(new)[: max(settings.max_feature_names - len(known), 0)]
        if kept:
            extra["n"] = kept
    extra.update(weights_meta(weights))
    return model, batch, labels, extra


def records_instances_raw(
    raw: bytes, spec: FeatureSpec, settings: Settings, n_instances: int
) -> Batch | None:
    """A records model's /predict rows read from the body's bytes by the compiled
    scanner; None for another kind or a body it does not read (or not this body: another
    count of instances)."""
    if spec.kind != "records" or not raw or not usable("records-scan"):
        return None
    from service.models.fast_json_records import scan_records_instances

    batch = scan_records_instances(raw, spec.encoder, settings.max_batch_examples)
    return batch if batch is not None and batch.n_rows == n_instances else None
