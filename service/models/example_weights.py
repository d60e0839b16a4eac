"""Importance weights on the wire and in the log (``/update`` examples and queries).

An example (``{"x", "y", "weight"}``) or a ranking query (``{"qid", "items",
"weight"}``) may carry ``"weight"``: a finite JSON number > 0 (default 1). Anything
else (0, a negative, a string, ``true``, ``null``, a number beyond float64) is a 422
naming ``examples[i].weight`` / ``queries[q].weight``. What a weight does to a step
is the learner's (see :mod:`learners.weights` and the learner modules).

The log entry keeps the weights in its JSON part under ``"w"`` (one per example, or
one per query) only when the request sent at least one, so an unweighted entry is
byte for byte what it was before weights existed and old entries decode unchanged.

>>> weights_meta(None), weights_meta([1.0, 2.5])
({}, {'w': [1.0, 2.5]})
>>> entry_weights({"y": [1]}) is None, entry_weights({"y": [1, 2], "w": [1.0, 3.0]})
(True, [1.0, 3.0])
"""

from __future__ import annotations

import math
from typing import Any

from service.errors import invalid
from service.models.json_fields import type_name

__all__ = ["WEIGHT_FIELD", "check_weight", "entry_weights", "weights_meta"]

WEIGHT_FIELD = "weight"
_META_KEY = "w"


def check_weight(h: Any, loc: str) -> float:
    """The weight as a float, or a 422 naming ``loc`` (e.g. ``examples[3].weight``)."""
    if isinstance(h, bool) or not isinstance(h, int | float):
        raise invalid(f"{loc}: must be a finite number > 0, got {type_name(h)}", loc)
    try:
        v = float(h)
    except OverflowError:  # an integer beyond float64
        v = math.inf
    if not (math.isfinite(v) and v > 0.0):
        raise invalid(f"{loc}: must be a finite number > 0, got {h!r}", loc)
    return v


def weights_meta(weights: list[float] | None) -> dict[str, Any]:
    """The log entry's extra JSON for ``weights`` (nothing when none was sent)."""
    return {} if weights is None else {_META_KEY: weights}


def entry_weights(meta: dict[str, Any]) -> list[float] | None:
    """The weights a decoded log entry carries, ``None`` for an unweighted one."""
    w = meta.get(_META_KEY)
    return None if w is None else [float(h) for h in w]
