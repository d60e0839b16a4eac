"""Every number a ``/predict`` answer carries is finite: a score that overflowed
(e.g. 1e308 features times a weight of 10) is a 422 naming the instance, never a JSON
``null`` (orjson writes NaN and infinity as null).

>>> refuse_nonfinite([{"score": 1.0, "scores": {"a": 1.0, "b": -1.0}}], "instances")
>>> try:
...     refuse_nonfinite([{"score": 1.0}, {"score": float("inf")}], "instances")
... except Exception as e:
...     print(e.field)
instances[1].x
>>> try:
...     refuse_nonfinite([{"qid": "a", "scores": [0.5, float("nan")]}], "queries")
... except Exception as e:
...     print(e.field)
queries[0].items[1].x
"""

from __future__ import annotations

import math
from typing import Any

from service.errors import invalid

_NUMBERS = ("score", "confidence")


def refuse_nonfinite(predictions: list[dict[str, Any]], where: str) -> None:
    """422 for the first prediction holding a non-finite number. ``where``: ``"queries"``
    (one prediction per query, ``scores`` per item) or ``"instances"``.

    Cheap: one C-level ``sum`` per prediction; a non-finite sum (NaN and inf
    propagate; finite values may only overflow) sends it to the exact check."""
    isfinite = math.isfinite
    for i, p in enumerate(predictions):
        for key in _NUMBERS:
            v = p.get(key)
            if type(v) is float and not isfinite(v):
                _refuse(where, i, None, v)
        scores = p.get("scores")
        if scores is None:
            continue
        values = list(scores.values()) if type(scores) is dict else scores
        if isfinite(sum(values)):
            continue
        for j, v in enumerate(values):
            if not isfinite(v):
                _refuse(where, i, j if where == "queries" else None, v)


def _refuse(where: str, i: int, j: int | None, value: float) -> None:
    loc = f"{where}[{i}].items[{j}].x" if j is not None else f"{where}[{i}].x"
    raise invalid(
        f"{loc}: the model's score for these feature values is not finite ({value}); "
        "their magnitude is too large for the model's weights",
        loc,
    )
