"""Example files read as a stream, in constant memory: SVMlight/LIBSVM, CSV, JSON lines.

A ``.gz`` name is read through gzip. Each row becomes the ``x`` a model takes, from the
model's feature config (:class:`Target`):

- ``svmlight`` (``label idx:val ...``, ``# comments``): sparse models get
  ``{"idx": val}`` with the index moved from the file's base to the model's (a 1-based
  file into a 0-based model: ``idx - 1``), dense models a list of ``dim`` values,
  hashed models ``{"idx": val}`` as written (names). ``label qid:Q idx:val ...`` gives
  the row its query (rankers only: :mod:`service.client.query_files` groups the rows);
  a file read for any other model refuses ``qid:``.
- ``csv``: a header row; the label is the last column or the one named; sparse models
  get the non-zero columns by position (from the model's base), dense models the
  row as numbers, hashed models ``{column: value}`` (a non-numeric value is the
  categorical feature ``column=value``); an ``--id-column`` gives each row an ``id``.
- ``jsonl``: one object per line, sent as it is (``{"x", "y"}`` or ``{"id", "y"}``).
- ``records`` models (:mod:`service.client.record_files`): a CSV row is the record
  ``{column: value}``, numbers where the config says numeric, a ``missing`` token (and
  an empty cell) ``null``; a JSON line with the label column named is a flat record
  holding its label.

A CSV file without a header is read with ``columns`` (the names of its columns); its
cells are split at ``delimiter`` (one character: a tab for TSV, the default for a
``.tsv`` name; a tab-delimited file has no quoting, a quote is text).

Labels that are integers (``+1``, ``-1``, ``3``, ``1.0``) are sent as integers,
anything else as the string written.

>>> t = Target("sparse", 123, model_base=0, file_base=1)
>>> parse_svmlight_line("-1 3:1 11:0.5 # c", t, "f:1")
(-1, {'2': 1.0, '10': 0.5})
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from service.client.record_files import RecordColumns, RecordFormatError

FORMATS = ("svmlight", "csv", "jsonl")


class FileFormatError(ValueError):
    """A line the reader cannot turn into an example; the message names ``file:line``."""


@dataclass(frozen=True)
class Target:
    """What the rows become: the model's feature ``kind``, ``dim`` (dense/sparse) and
    index base, and the base of the file's indices (SVMlight; CSV columns count from
    the model's base)."""

    kind: str
    dim: int | None
    model_base: int = 0
    file_base: int = 0
    # SVMlight indices past the model's last feature: dropped instead of refused (a
    # tree model never tests them; `learnserve evaluate` ignores them the same way)
    ignore_beyond: bool = False
    records: RecordColumns | None = None  # a records model: how cells become a record
    numeric_labels: bool = False  # a regressor's: every label is a number (float)

    def label(self, token: str, where: str) -> str | int | float:
        """A label cell or token: a regressor's target as a finite float, else
        :func:`parse_label`'s label."""
        return _number(token, f"{where}: label") if self.numeric_labels else parse_label(token)

    @classmethod
    def of_model(
        cls,
        features: dict[str, Any],
        file_base: int | None,
        missing: str | None = None,
        numeric_labels: bool = False,
    ) -> Target:
        base = int(features.get("index_base", 0))
        kind = str(features.get("kind"))
        return cls(
            kind,
            features.get("dim"),
            base,
            base if file_base is None else file_base,
            records=RecordColumns.of_model(features, missing) if kind == "records" else None,
            numeric_labels=numeric_labels,
        )


@dataclass(frozen=True)
class Row:
    x: Any
    y: Any = None  # None: the file gives no label
    id: str | None = None
    where: str = ""  # file:line
    obj: dict[str, Any] | None = None  # JSON lines: the line's object as written
    qid: str | int | None = None  # SVMlight ``qid:`` (files read for a ranker)

    def example(self) -> dict[str, Any]:
        """The ``/update`` example: a JSON line as written, else ``{"x", "y"}``."""
        if self.obj is not None:
            return self.obj
        if self.y is None:
            raise FileFormatError(f"{self.where}: no label; a row without one cannot be learned")
        return {"x": self.x, "y": self.y}

    def instance(self) -> dict[str, Any]:
        """The ``/predict`` instance: ``{"x"}``, with the row's ``id`` when it has one."""
        if self.x is None:
            raise FileFormatError(f"{self.where}: no x to predict from")
        return {"x": self.x} if self.id is None else {"x": self.x, "id": self.id}


def guess_format(path: Path) -> str:
    """From the name: ``.csv`` or ``.tsv``, ``.jsonl``/``.ndjson`` (also under ``.gz``),
    else svmlight."""
    last = _last_suffix(path)
    if last in (".csv", ".tsv"):
        return "csv"
    if last in (".jsonl", ".ndjson"):
        return "jsonl"
    return "svmlight"


def _last_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    return suffixes[-1] if suffixes else ""


def guess_delimiter(path: Path) -> str:
    """A CSV file's delimiter by its name: a tab for ``.tsv`` (``.tsv.gz``), else ``,``."""
    return "\t" if _last_suffix(path) == ".tsv" else ","


def parse_label(token: str) -> str | int:
    """``"+1"`` -> 1, ``"1.0"`` -> 1, ``"cat"`` -> ``"cat"``."""
    try:
        return int(token)
    except ValueError:
        pass
    try:
        f = float(token)
    except ValueError:
        return token
    return int(f) if math.isfinite(f) and f.is_integer() else token


def _number(token: str, where: str) -> float:
    try:
        v = float(token)
    except ValueError:
        raise FileFormatError(f"{where}: {token!r} is not a number") from None
    if not math.isfinite(v):
        raise FileFormatError(f"{where}: value {token!r} is not finite")
    return v


def parse_svmlight_line(line: str, t: Target, where: str) -> tuple[str | int | float, Any] | None:
    """``(label, x)`` of one line, ``None`` for a blank or comment line."""
    parsed = parse_svmlight_row(line, t, where, queries=False)
    return None if parsed is None else parsed[:2]


def parse_svmlight_row(
    line: str, t: Target, where: str, queries: bool
) -> tuple[str | int | float, Any, str | int | None] | None:
    """``(label, x, qid)`` of one line (``qid`` from a ``qid:Q`` second token when
    ``queries``, else refused), ``None`` for a blank or comment line."""
    if "#" in line:
        line = line.split("#", 1)[0]
    parts = line.split()
    if not parts:
        return None
    qid = None
    tokens = parts[1:]
    if queries and tokens and tokens[0].startswith("qid:"):
        qid = parse_qid(tokens[0][4:], where)
        tokens = tokens[1:]
    idx, vals = _pairs(tokens, where)
    return t.label(parts[0], where), svmlight_x(idx, vals, t, where), qid


def parse_qid(token: str, where: str) -> str | int:
    """``qid:7`` -> 7 (an integer the service takes as JSON), anything else as written."""
    if not token:
        raise FileFormatError(f"{where}: qid: without a value")
    if token.isdigit() and int(token) < 2**53:
        return int(token)
    return token


def _pairs(tokens: list[str], where: str) -> tuple[list[int], list[float]]:
    """Indices and values of ``idx:val`` tokens: C-level passes over the whole line; any
    doubt (a malformed token, a non-finite value) goes to the checked loop, which names it."""
    try:
        split = [tok.split(":") for tok in tokens]
        keys = [k for k, _ in split]  # ValueError unless every token has one colon
        idx = list(map(int, keys))
        vals = list(map(float, [v for _, v in split]))
    except ValueError:
        return _pairs_checked(tokens, where)
    # int() also reads "+1", "1_0"; a sum is non-finite when a value is (or overflows)
    if not all(map(str.isdigit, keys)) or not math.isfinite(sum(vals)):
        return _pairs_checked(tokens, where)
    return idx, vals


def _pairs_checked(tokens: list[str], where: str) -> tuple[list[int], list[float]]:
    idx: list[int] = []
    vals: list[float] = []
    for tok in tokens:
        key, sep, value = tok.partition(":")
        if key == "qid":
            raise FileFormatError(
                f"{where}: qid: rows are ranking queries: only a ranker (ranksvm, lambdamart) "
                "takes them, and qid: must come right after the label"
            )
        if not sep or not key.isdigit():
            raise FileFormatError(f"{where}: {tok!r} is not index:value")
        idx.append(int(key))
        vals.append(_number(value, f"{where}: feature {key}"))
    return idx, vals


def svmlight_x(idx: list[int], vals: list[float], t: Target, where: str) -> Any:
    if t.kind == "hashed":
        return dict(zip(map(str, idx), vals, strict=True))
    assert t.dim is not None
    lo, hi = t.file_base, t.dim + t.file_base - 1
    if t.ignore_beyond and idx and max(idx) > hi:
        keep = [i for i, j in enumerate(idx) if j <= hi]
        idx, vals = [idx[i] for i in keep], [vals[i] for i in keep]
    if idx and (min(idx) < lo or max(idx) > hi):
        j = next(j for j in idx if not lo <= j <= hi)
        raise FileFormatError(
            f"{where}: feature index {j} is outside [{lo}, {hi}] (the model has "
            f"{t.dim} features; the file's indices are read as {t.file_base}-based: "
            "see --index-base)"
        )
    if t.kind == "dense":
        row = [0.0] * t.dim
        for j, v in zip(idx, vals, strict=True):
            row[j - t.file_base] = v
        return row
    shift = t.model_base - t.file_base
    keys = map(str, idx if shift == 0 else [j + shift for j in idx])
    return dict(zip(keys, vals, strict=True))


class ExampleFile:
    """The rows of a file, read lazily; ``position()`` is how many bytes of the file
    (compressed bytes for ``.gz``) were read so far, ``size`` the file's size."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        target: Target,
        *,
        label_column: str | None = "",
        id_column: str | None = None,
        queries: bool = False,
        columns: list[str] | None = None,
        delimiter: str = ",",
    ) -> None:
        """``label_column``: ``""`` the last column, a name, or ``None`` for no label
        (CSV; JSON lines of a records model: the field holding the label);
        ``queries``: SVMlight ``qid:`` tokens are read (a ranker's file); ``columns``:
        a CSV file has no header, these are its columns' names; ``delimiter``: the
        character between a CSV row's cells."""
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
        if len(delimiter) != 1 or delimiter in '"\r\n':
            raise ValueError(f"delimiter must be one character (not a quote), got {delimiter!r}")
        self.delimiter = delimiter
        self.path = path
        self.fmt = fmt
        self.target = target
        self.label_column = label_column
        self.id_column = id_column
        self.queries = queries
        self.columns = columns
        self.size = path.stat().st_size
        self._raw: IO[bytes] | None = None

    def position(self) -> int:
        raw = self._raw
        if raw is None or raw.closed:
            return self.size if raw is not None else 0
        return raw.tell()

    def __iter__(self) -> Iterator[Row]:
        with open(self.path, "rb") as raw:
            self._raw = raw
            text = self._text(raw)
            try:
                if self.fmt == "svmlight":
                    yield from self._svmlight(text)
                elif self.fmt == "csv":
                    yield from self._csv(text)
                else:
                    yield from self._jsonl(text)
            except UnicodeDecodeError as e:
                raise self._not_text(e) from None

    def _not_text(self, e: UnicodeDecodeError) -> FileFormatError:
        return FileFormatError(
            f"{self.path}: not a {self.fmt} text file (not UTF-8: {e.reason}); a binary "
            "file such as MNIST's idx is read only for the model kinds trained from it (llsvm)"
        )

    def _text(self, raw: IO[bytes]) -> IO[str]:
        stream: Any = gzip.GzipFile(fileobj=raw) if self.path.suffix == ".gz" else raw
        return io.TextIOWrapper(stream, encoding="utf-8", newline="")

    def count_rows(self) -> int:
        """The rows the file holds (a pass over its lines, nothing parsed): the lines that
        are not blank or comments (SVMlight), not blank (JSON lines), or the CSV records
        after the header."""
        with open(self.path, "rb") as raw:
            text = self._text(raw)
            try:
                if self.fmt == "csv":
                    rows = sum(1 for cells in self._reader(text) if cells)
                    return rows if self.columns else max(rows - 1, 0)
                if self.fmt == "svmlight":
                    return sum(1 for line in text if line.split("#", 1)[0].strip())
                return sum(1 for line in text if line.strip())
            except UnicodeDecodeError as e:
                raise self._not_text(e) from None

    def _reader(self, text: IO[str]) -> Iterator[list[str]]:
        """CSV rows; a tab-delimited file is TSV, without quoting (a quote is text: SMS
        messages start with one and have no closing one)."""
        if self.delimiter == "\t":
            return csv.reader(text, delimiter="\t", quoting=csv.QUOTE_NONE)
        return csv.reader(text, delimiter=self.delimiter)

    def _svmlight(self, text: IO[str]) -> Iterator[Row]:
        name = str(self.path)
        for lineno, line in enumerate(text, 1):
            where = f"{name}:{lineno}"
            parsed = parse_svmlight_row(line, self.target, where, self.queries)
            if parsed is not None:
                yield Row(parsed[1], parsed[0], where=where, qid=parsed[2])

    def _csv(self, text: IO[str]) -> Iterator[Row]:
        reader = self._reader(text)
        header = list(self.columns) if self.columns else next(reader, None)
        if not header:
            raise FileFormatError(f"{self.path}:1: a CSV file needs a header row")
        label_at = self._column(header, self.label_column, "label")
        id_at = self._column(header, self.id_column, "id") if self.id_column else None
        features = [i for i in range(len(header)) if i not in (label_at, id_at)]
        names = [header[i] for i in features]
        t = self.target
        if t.kind == "dense" and len(features) != t.dim:
            raise FileFormatError(
                f"{self.path}:1: {len(features)} feature columns, the model takes {t.dim}"
            )
        for lineno, cells in enumerate(reader, 1 if self.columns else 2):
            if not cells:
                continue
            where = f"{self.path}:{lineno}"
            if len(cells) != len(header):
                raise FileFormatError(f"{where}: {len(cells)} cells, the header has {len(header)}")
            y = t.label(cells[label_at], where) if label_at is not None else None
            ident = cells[id_at] if id_at is not None else None
            yield Row(self._csv_x([cells[i] for i in features], names, where), y, ident, where)

    def _column(self, header: list[str], name: str | None, what: str) -> int | None:
        if name is None:
            return None
        if name == "":
            return len(header) - 1
        if name not in header:
            raise FileFormatError(f"{self.path}:1: no {what} column {name!r} in {header}")
        return header.index(name)

    def _csv_x(self, cells: list[str], names: list[str], where: str) -> Any:
        t = self.target
        if t.records is not None:
            try:
                return t.records.record(cells, names, where)
            except RecordFormatError as e:
                raise FileFormatError(str(e)) from None
        if t.kind == "dense":
            return [_number(c, f"{where}: column {n!r}") for c, n in zip(cells, names, strict=True)]
        if t.kind == "sparse":
            assert t.dim is not None
            if len(cells) > t.dim:
                raise FileFormatError(
                    f"{where}: {len(cells)} feature columns, the model has {t.dim}"
                )
            out: dict[str, float] = {}
            for i, (c, n) in enumerate(zip(cells, names, strict=True)):
                if c.strip():
                    v = _number(c, f"{where}: column {n!r}")
                    if v != 0.0:
                        out[str(i + t.model_base)] = v
            return out
        named: dict[str, float | str] = {}
        for c, n in zip(cells, names, strict=True):
            c = c.strip()
            if not c:
                continue
            try:
                named[n] = _number(c, where)
            except FileFormatError:
                named[n] = c  # categorical: the service hashes "name=value"
        return named

    def _jsonl(self, text: IO[str]) -> Iterator[Row]:
        for lineno, line in enumerate(text, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise FileFormatError(f"{self.path}:{lineno}: not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise FileFormatError(f"{self.path}:{lineno}: a line must be a JSON object")
            ident = obj.get("id")
            records, label = self.target.records, self.label_column
            if records is not None and label:  # a flat record holding its label
                where = f"{self.path}:{lineno}"
                try:
                    x, y = records.json_record(obj, label, where)
                except RecordFormatError as e:
                    raise FileFormatError(str(e)) from None
                yield Row(x, self.target.label(y, where) if isinstance(y, str) else y, where=where)
                continue
            yield Row(
                obj.get("x"),
                obj.get("y"),
                ident if isinstance(ident, str) else None,
                f"{self.path}:{lineno}",
                obj,
            )
