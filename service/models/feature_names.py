"""Recording the feature names of hashed and records models (for
``GET /models/{name}/weights``).

Where the names live: in the model's state. The worker that parses an ``/update``
puts the names its copy of the model does not know yet into the log entry
(``"n"`` in the entry's JSON part, :mod:`service.models.payload`); ``apply`` adds an
entry's names to the model's :class:`~learners.feature_names.FeatureNames`. So the
map is a pure function of the log, like the weights: every worker (owner or guest)
holds the same one, checkpoints and exports carry it, and no extra store key or
round trip is needed. A name already known (by the parser's copy, which is some
prefix of the log) is never sent again, so after warm-up entries carry no names.

Bounds: a parser sends names only while its copy holds fewer than
``max_feature_names`` (a setting, 100k by default); ``apply`` keeps at most
``learners.feature_names.MAX_FEATURE_NAMES``, the first ones in log order.

The fast path (``fast_json_maps.scan_hashed_examples``) gives each feature's full
32-bit hash; one compiled pass finds the unknown ones, and only a body holding
some is parsed again (orjson) to read their names. Records models (``features.kind =
"records"``) take the general path: the names are the encoder's
(:meth:`learners.records.RecordEncoder.names`, what ``/explain`` lists: ``age#3``,
``job=clerk``, ``note^free``), recorded the same way, in log order, under the same
bound. Dense and sparse models do none of this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import numpy as np
import orjson

from learners.feature_keys import hashed_indices
from learners.feature_names import MAX_FEATURE_NAMES, FeatureNames, names_of_rows

if TYPE_CHECKING:
    from service.settings import Settings

_FULL = 0xFFFFFFFF
# A records model's names map -> its encoder, which names the raw records a parser
# reads (``new_names`` is handed the map only). Weak: a map goes with its model.
_RECORD_ENCODERS: WeakKeyDictionary[FeatureNames, Any] = WeakKeyDictionary()


def named(spec: Any) -> bool:
    """Whether a model of this feature spec records names: hashed, and records without
    statistics (a model with standardize or idf keeps its records in the log and encodes
    them at apply time, where no names are recorded yet)."""
    return bool(spec.kind == "hashed" or (spec.kind == "records" and not spec.stateful))


def attach(model: Any, spec: Any) -> None:
    """Give the learner its feature spec, and a names map if hashed or records and it
    has none."""
    model.features_ = spec
    if named(spec) and getattr(model, "feature_names_", None) is None:
        model.feature_names_ = FeatureNames(MAX_FEATURE_NAMES)
    elif model.feature_names_ is not None:
        # a map read from an artifact keeps its writer's limit; here the parsers bound
        # it (max_feature_names), apply only by the hard maximum (as on every worker)
        model.feature_names_.limit = MAX_FEATURE_NAMES
    if spec.kind == "records" and model.feature_names_ is not None:
        _RECORD_ENCODERS[model.feature_names_] = spec.encoder


def wanted(model: Any, settings: Settings) -> FeatureNames | None:
    """The model's names map when this parse should record names, else None."""
    names: FeatureNames | None = getattr(model, "feature_names_", None)
    if names is None or len(names) >= settings.max_feature_names:
        return None
    return names


def new_names(names: FeatureNames, rows: list[Any], settings: Settings) -> list[str]:
    """The names of ``rows`` (dicts; raw records of a records model, valid: the parser
    encoded them first) that ``names`` does not hold, within the room left."""
    room = settings.max_feature_names - len(names)
    encoder = _RECORD_ENCODERS.get(names)
    if encoder is None:
        return names.unknown(names_of_rows(rows))[: max(room, 0)]
    # the full hashes first (compiled): after warm-up no name is new and none is decoded
    return names.unknown(encoder.names(rows, names.unknown_hashes))[: max(room, 0)]


def new_names_raw(
    names: FeatureNames, raw: bytes, hashes: np.ndarray, settings: Settings, key: str
) -> list[str]:
    """``new_names`` of a body the fast scanner read: ``hashes`` (full 32-bit, one per
    feature) tell whether any is unknown; only then is the body parsed again."""
    unknown = names.unknown_hashes(hashes)
    if unknown.size == 0:
        return []
    try:
        body = orjson.loads(raw)
        rows = [ex["x"] for ex in body[key]]
    except (orjson.JSONDecodeError, KeyError, TypeError):  # the scanner read it: not reached
        return []
    candidates = names.unknown(names_of_rows(rows))
    if not candidates:
        return []
    keep = set(unknown.tolist())
    full = hashed_indices(candidates, _FULL).tolist()
    room = settings.max_feature_names - len(names)
    return [n for n, h in zip(candidates, full, strict=True) if h in keep][: max(room, 0)]


def record(model: Any, meta: dict[str, Any]) -> None:
    """Add a log entry's names (``"n"``) to the model's map (in ``apply``)."""
    entry_names = meta.get("n")
    names: FeatureNames | None = getattr(model, "feature_names_", None)
    if names is None or not isinstance(entry_names, list):
        return
    names.add(n for n in entry_names if isinstance(n, str))
