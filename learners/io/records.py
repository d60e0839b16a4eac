"""Readers of raw records for :class:`learners.records.RecordEncoder`: a CSV file with a
header (UCI Adult's form) as ``{column: value}`` records, and a labelled text file
(``label<TAB>text``, the SMS Spam Collection's form).

>>> import io
>>> recs, y = read_csv_records(io.StringIO("age,job,class\\n39, clerk,>50K\\n\\n50,?,<=50K\\n"),
...                            label="class", numeric=["age"], missing="?")
>>> recs, y
([{'age': 39.0, 'job': 'clerk'}, {'age': 50.0, 'job': None}], ['>50K', '<=50K'])
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from typing import IO, Any

__all__ = ["read_csv_records", "read_labeled_text"]


def _open(source: str | os.PathLike[str] | IO[str]) -> IO[str]:
    if isinstance(source, str | os.PathLike):
        return open(source, encoding="utf-8", newline="")
    return source


def read_csv_records(
    source: str | os.PathLike[str] | IO[str],
    *,
    label: str,
    numeric: Iterable[str] = (),
    missing: str | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, labels) of a CSV file with a header line. Cells are stripped of spaces;
    ``numeric`` columns become floats; a cell equal to ``missing`` becomes None; empty
    lines are skipped; the ``label`` column is taken out of the records."""
    nums = set(numeric)
    records: list[dict[str, Any]] = []
    labels: list[str] = []
    f = _open(source)
    try:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader)]
        if label not in header:
            raise ValueError(f"label column {label!r} is not in the header {header}")
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise ValueError(f"line {line_no}: {len(row)} cells, the header has {len(header)}")
            rec: dict[str, Any] = {}
            for name, cell in zip(header, row, strict=True):
                v = cell.strip()
                if name == label:
                    labels.append(v)
                elif missing is not None and v == missing:
                    rec[name] = None
                else:
                    rec[name] = float(v) if name in nums else v
            records.append(rec)
    finally:
        if f is not source:
            f.close()
    return records, labels


def read_labeled_text(
    source: str | os.PathLike[str] | IO[str], *, header: bool = True
) -> tuple[list[str], list[str]]:
    """(texts, labels) of ``label<TAB>text`` lines (the first skipped when ``header``)."""
    texts: list[str] = []
    labels: list[str] = []
    f = _open(source)
    try:
        for line_no, line in enumerate(f, start=1):
            if header and line_no == 1:
                continue
            line = line.rstrip("\r\n")
            if not line:
                continue
            lab, sep, text = line.partition("\t")
            if not sep:
                raise ValueError(f"line {line_no}: no tab between label and text")
            labels.append(lab)
            texts.append(text)
    finally:
        if f is not source:
            f.close()
    return texts, labels
