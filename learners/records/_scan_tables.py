"""A records config as flat arrays, for a compiled reader of raw JSON records (the
service's body scanner, :mod:`service.models.fast_json_records`), and the atoms such a
reader hands back to :meth:`~learners.records.encoder.RecordEncoder.encode_atoms`.

A reader matches each key of a record against the field names (UTF-8 bytes,
``names[offsets[j]:offsets[j+1]]``), reads the value as the field's kind says and makes
the atoms :mod:`learners.records._columns` would make of the same record: a numeric
value is the constant string ``const_base[j]`` (``+ bin`` for bins: the number of edges
``<= x``) with its (transformed) value, left out when zero; a categorical string or
each distinct string of a list is a string of its own; a text is one string (value 0).
Strings ``0 .. n_const`` are the numeric features' names (``const_cps`` /
``const_off``), as the encoder numbers them.

>>> from learners.records import RecordEncoder
>>> t = RecordEncoder({"kind": "records", "fields": {
...     "age": {"type": "numeric", "transform": {"bins": [30]}},
...     "job": {"type": "categorical"}}}).scan_tables()
>>> t.kinds.tolist(), t.const_base.tolist(), t.n_const
([2, 3], [0, -1], 2)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from learners.records.config import CategoricalField, NumericField, RecordsConfig, TextField

# field kinds, as a reader dispatches on them
NUM_NONE, NUM_LOG1P, NUM_BINS, CATEGORICAL, TEXT, NUM_STANDARDIZE = range(6)


class ScanTables(NamedTuple):
    names: np.ndarray  # uint8: the field names' UTF-8 bytes back to back
    offsets: np.ndarray  # int64, n_fields + 1
    kinds: np.ndarray  # int64 per field (NUM_NONE ... NUM_STANDARDIZE)
    const_base: np.ndarray  # int64 per field: its first constant string (numeric), else -1
    edges: np.ndarray  # float64: the bins fields' edges back to back
    edge_off: np.ndarray  # int64, n_fields + 1
    const_cps: np.ndarray  # uint32: the constants' code points
    const_off: np.ndarray  # int64, n_const + 1
    n_const: int
    refuse_unknown: bool
    max_text_bytes: int
    stateless: bool  # no standardize / idf: the atoms do not depend on earlier records


class ScannedAtoms(NamedTuple):
    """What a reader made of a batch: ``n_rows`` records, the code points of every
    string (``cps[s_off[k]:s_off[k+1]]``, the constants first) and the atoms, ordered
    by row, then field index, then order of appearance."""

    n_rows: int
    cps: np.ndarray  # uint32
    s_off: np.ndarray  # int64
    a_row: np.ndarray  # int64
    a_field: np.ndarray  # int64
    a_sidx: np.ndarray  # int64
    a_val: np.ndarray  # float64


def scan_tables(cfg: RecordsConfig, constants: list[str], const_of: dict[int, int]) -> ScanTables:
    names = bytearray()
    offsets = [0]
    kinds: list[int] = []
    bases: list[int] = []
    edges: list[float] = []
    edge_off = [0]
    stateless = True
    for j, f in enumerate(cfg.fields):
        names += f.name.encode("utf-8")
        offsets.append(len(names))
        bases.append(const_of.get(j, -1))
        if isinstance(f, NumericField):
            kind = {"none": NUM_NONE, "log1p": NUM_LOG1P, "bins": NUM_BINS}.get(
                f.transform, NUM_STANDARDIZE
            )
            stateless = stateless and kind != NUM_STANDARDIZE
            edges.extend(f.edges if kind == NUM_BINS else ())
        elif isinstance(f, TextField):
            kind = TEXT
            stateless = stateless and not f.idf
        else:
            assert isinstance(f, CategoricalField)
            kind = CATEGORICAL
        kinds.append(kind)
        edge_off.append(len(edges))
    lens = [len(c) for c in constants]
    return ScanTables(
        np.frombuffer(bytes(names), np.uint8),
        np.array(offsets, np.int64),
        np.array(kinds, np.int64),
        np.array(bases, np.int64),
        np.array(edges, np.float64),
        np.array(edge_off, np.int64),
        np.frombuffer("".join(constants).encode("utf-32-le"), np.uint32),
        np.concatenate([[0], np.cumsum(lens, dtype=np.int64)]).astype(np.int64),
        len(constants),
        cfg.unknown_fields == "refuse",
        cfg.max_text_bytes,
        stateless,
    )
