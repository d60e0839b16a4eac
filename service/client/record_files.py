"""Rows of a file as raw records, for a model with ``features.kind = "records"``.

The model's config says which fields are numbers (``"type": "numeric"``); a CSV cell
of such a column is sent as a number, every other cell as the string written (a
categorical or text field; a column the config does not name goes as a string too, and
the service ignores or refuses it as the config's ``unknown_fields`` says). Cells are
stripped of spaces (UCI Adult writes ``", State-gov"``); an empty cell, or one equal to
the ``missing`` token (``?`` in Adult), is ``null``: the record has no value there.

JSON lines: with a label column named, each line is one flat record holding its label
under that name (``{"age": 39, "job": "clerk", "class": ">50K"}``), taken out as the
example's ``y``; string values equal to ``missing`` are ``null``. Without one, a line is
an example as ``/update`` takes it (``{"x": {...}, "y": ...}``).

This mirrors :func:`learners.io.records.read_csv_records` (which the library's tests
read Adult with) but streams, and imports nothing of the server or the library: the
client stands alone.

>>> r = RecordColumns(numeric=frozenset({"age"}), missing="?")
>>> r.record([" 39", " clerk", "?"], ["age", "job", "sex"], "adult.data:1")
{'age': 39.0, 'job': 'clerk', 'sex': None}
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class RecordFormatError(ValueError):
    """A cell the reader cannot send; the message names ``file:line`` and the column."""


@dataclass(frozen=True)
class RecordColumns:
    """The fields sent as numbers, and the token read as a missing value."""

    numeric: frozenset[str] = frozenset()
    missing: str | None = None

    @classmethod
    def of_model(cls, features: dict[str, Any], missing: str | None) -> RecordColumns:
        fields = features.get("fields")
        numeric = frozenset(
            name
            for name, f in (fields.items() if isinstance(fields, dict) else ())
            if isinstance(f, dict) and f.get("type") == "numeric"
        )
        return cls(numeric, missing)

    def record(self, cells: list[str], names: list[str], where: str) -> dict[str, Any]:
        """One CSV row's record (``names`` are the columns of ``cells``)."""
        out: dict[str, Any] = {}
        for name, cell in zip(names, cells, strict=True):
            v = cell.strip()
            if not v or v == self.missing:
                out[name] = None
            elif name in self.numeric:
                out[name] = self._number(v, f"{where}: column {name!r}")
            else:
                out[name] = v
        return out

    def json_record(self, obj: dict[str, Any], label: str, where: str) -> tuple[Any, Any]:
        """``(record, label)`` of one JSON line holding its label under ``label``
        (``None`` when the line has none: fine to predict, refused to learn)."""
        rec = dict(obj)
        y = rec.pop(label, None)
        if self.missing is not None:
            rec = {k: None if v == self.missing else v for k, v in rec.items()}
        if isinstance(y, bool) or (y is not None and not isinstance(y, str | int | float)):
            raise RecordFormatError(f"{where}: the label {label!r} must be a string or number")
        return rec, y

    @staticmethod
    def _number(token: str, where: str) -> float:
        try:
            v = float(token)
        except ValueError:
            raise RecordFormatError(
                f"{where}: {token!r} is not a number (the model's config says numeric; "
                "see --missing for a missing-value token)"
            ) from None
        if not math.isfinite(v):
            raise RecordFormatError(f"{where}: value {token!r} is not finite")
        return v
