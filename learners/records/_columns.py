"""Reading a batch of records one configured field at a time (a column): type checks
that name ``examples[i].x.<field>``, the numeric transforms, and the "atoms" the row
kernel reads (a row, a field, a string of ``strs`` and a value).

A column is read with C-speed passes where its values are all of the expected type
(the common case); a value of the wrong type is then found by a Python loop that
names it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np

from learners.csr_batch import FeatureError
from learners.records.config import CategoricalField, NumericField, TextField
from learners.records.state import standardize

_NUMBER = frozenset({int, float})
_STD_LIMIT = 1e100  # beyond, squared deviations overflow a double


class Atoms:
    """The atoms of one batch, appended field by field (rows ascending within a field),
    in Python lists: a batch of one record is the common /update, and small numpy
    arrays per field would cost more than the encoding."""

    def __init__(self, constants: list[str]) -> None:
        self.strs: list[str] = list(constants)
        self.rows: list[int] = []
        self.fields: list[int] = []
        self.sidx: list[int] = []
        self.vals: list[float] = []

    def add(self, field: int, rows: list[int], sidx: list[int], vals: list[float]) -> None:
        self.rows += rows
        self.fields += [field] * len(rows)
        self.sidx += sidx
        self.vals += vals

    def add_strings(self, field: int, rows: list[int], strs: list[str], val: float = 1.0) -> None:
        """Atoms of the strings ``strs`` (one per row of ``rows``); each distinct string
        is stored once, so the kernel hashes a repeated category once per batch."""
        distinct = dict.fromkeys(strs)
        base = len(self.strs)
        index = {v: base + k for k, v in enumerate(distinct)}
        self.strs += distinct
        self.add(field, rows, list(map(index.__getitem__, strs)), [val] * len(strs))

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(row, field, string index, value), ordered by row then field (a stable sort
        of the field-major lists)."""
        rows = np.array(self.rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        return (
            rows[order],
            np.array(self.fields, dtype=np.int64)[order],
            np.array(self.sidx, dtype=np.int64)[order],
            np.array(self.vals, dtype=np.float64)[order],
        )


def field_loc(where: str, i: int, field: str, name: str) -> str:
    return (
        f"{where}[{i}].{field}.{name}" if name.isidentifier() else f'{where}[{i}].{field}["{name}"]'
    )


def present(records: Sequence[Any], name: str, all_dicts: bool) -> tuple[list[int], list[Any]]:
    """The rows where ``name`` is present and not null, and their values."""
    if all_dicts:  # dict.get unbound: twice as fast as a comprehension calling r.get
        col = list(map(dict.get, records, repeat(name)))
    else:
        col = [r.get(name) for r in records]
    if None not in col:
        return list(range(len(col))), col
    rows = [i for i, v in enumerate(col) if v is not None]
    return rows, [col[i] for i in rows]


def _bad(what: str, v: Any) -> str:
    got = "a boolean" if isinstance(v, bool) else type(v).__name__
    return f"must be {what}, got {got}"


def read_numeric(
    f: NumericField,
    rows: list[int],
    vals: list[Any],
    welford: tuple[int, float, float],
    update: bool,
    loc: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, tuple[int, float, float]]:
    """(rows, values, bin indices or None, Welford state after) of a numeric column;
    zero values are dropped (a zero feature changes nothing)."""
    if not set(map(type, vals)) <= _NUMBER:
        for i, v in zip(rows, vals, strict=True):
            if type(v) not in _NUMBER:
                raise FeatureError(loc(i), _bad("a number", v))
    try:
        x = np.array(vals, dtype=np.float64)
    except OverflowError:
        x = np.array([_to_float(v, loc(i)) for i, v in zip(rows, vals, strict=True)])
    r = np.asarray(rows, dtype=np.int64)
    if not np.isfinite(x).all():
        k = int(np.flatnonzero(~np.isfinite(x))[0])
        raise FeatureError(loc(rows[k]), "value is NaN" if x[k] != x[k] else "value is infinite")
    if f.transform == "bins":
        return r, np.ones(x.shape[0]), np.searchsorted(np.array(f.edges), x, side="right"), welford
    if f.transform == "log1p":
        # math (the C library), not numpy: numpy may use SIMD code whose last bit differs
        x = np.array([math.copysign(math.log1p(abs(v)), v) for v in x.tolist()])
    elif f.transform == "standardize":
        big = np.flatnonzero(np.abs(x) > _STD_LIMIT)
        if big.size:
            raise FeatureError(
                loc(rows[int(big[0])]), f"|value| > {_STD_LIMIT:g} cannot be standardized"
            )
        x, welford = standardize(x, *welford, update)
    keep = x != 0.0
    return r[keep], x[keep], None, welford


def _to_float(v: Any, loc: str) -> float:
    try:
        return float(v)
    except OverflowError:
        raise FeatureError(loc, "value is infinite (too large for a double)") from None


def read_categorical(
    f: CategoricalField, rows: list[int], vals: list[Any], loc: Any
) -> tuple[list[int], list[str]]:
    """(rows, values): one per distinct string of a value or a list (the kernel names
    each ``field=value``)."""
    if set(map(type, vals)) == {str}:
        return rows, vals
    out_rows: list[int] = []
    out: list[str] = []
    for i, v in zip(rows, vals, strict=True):
        if type(v) is str:
            out_rows.append(i)
            out.append(v)
        elif type(v) is list:
            for j, s in enumerate(v):
                if type(s) is not str:
                    raise FeatureError(f"{loc(i)}[{j}]", _bad("a string", s))
            for s in dict.fromkeys(v):  # one-hot: a value listed twice is one feature
                out_rows.append(i)
                out.append(s)
        else:
            raise FeatureError(loc(i), _bad("a string or a list of strings", v))
    return out_rows, out


def read_text(f: TextField, rows: list[int], vals: list[Any], max_bytes: int, loc: Any) -> None:
    """Check a text column: strings of at most ``max_bytes`` UTF-8 bytes."""
    del f
    for i, v in zip(rows, vals, strict=True):
        if type(v) is not str:
            raise FeatureError(loc(i), _bad("a string", v))
        if 4 * len(v) > max_bytes:  # only then can its UTF-8 form be too long
            n = len(v.encode("utf-8", "surrogatepass"))
            if n > max_bytes:
                raise FeatureError(
                    loc(i), f"text of {n} UTF-8 bytes exceeds the limit of {max_bytes}"
                )


def code_points(
    atoms: Atoms, a_row: np.ndarray, a_field: np.ndarray, a_sidx: np.ndarray, loc: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(code points of all strings, offsets: string k is ``cps[off[k]:off[k+1]]``); a
    lone surrogate (not Unicode text) is a FeatureError naming its field."""
    lens = np.fromiter(map(len, atoms.strs), np.int64, len(atoms.strs))
    offsets = np.zeros(len(atoms.strs) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    joined = "".join(atoms.strs)
    try:
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    except UnicodeEncodeError as exc:
        s = int(np.searchsorted(offsets, exc.start, side="right") - 1)
        k = int(np.flatnonzero(a_sidx == s)[0])
        problem = "not valid Unicode text (a lone surrogate)"
        raise FeatureError(loc(int(a_row[k]), int(a_field[k])), problem) from None
    return cps, offsets
