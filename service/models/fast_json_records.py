"""A numba scanner from the raw bytes of a records model's ``POST /update`` (or
``/predict``) body to the atoms the records row kernel reads, then that kernel: bytes in,
the CSR batch out, with no Python object per record (issue 22).

Reads exactly one shape of body::

    {"model": "adult", "examples": [{"x": {"age": 39, "job": "clerk"}, "y": "+1"}, ...]}

(``"instances": [{"x": {...}}, ...]`` for ``/predict``), with the envelope rules of the
other scanners (:mod:`service.models.json_scan_envelope`: ``model`` and the list once,
each example's ``x`` and ``y`` once, ``weight`` at most once and > 0). Each record's keys
are matched against the config's field names and the values read as the field says
(:mod:`learners.records._scan_tables`): numbers exactly as orjson reads them
(:mod:`service.models.json_scan_numbers`), then binned / ``log1p`` (the C library's, as
Python's ``math``) / as they are, zero left out; strings decoded to code points (every
JSON escape, UTF-8 checked); a categorical list's distinct strings in order; ``null`` is
an absent field. The atoms go to :meth:`RecordEncoder.encode_atoms`, the very kernel
:meth:`RecordEncoder.encode` runs, so the batch (and the new feature names) are the
general path's bit for bit.

Anything else gives ``None`` and the caller takes the general path (orjson, the encoder),
which also words the 4xx errors: a config with ``standardize`` or ``idf`` (their records
go to the log raw, read at apply time), a key with an escape, a key repeated within a
record, an unknown field (refused: a 422 naming it; ignored: the general path lists it in
the ``/update`` answer and refuses a record with no known field), a value of the wrong
type (a bool, a string for a number, a number for a string, a list holding a
non-string), a number outside the exact fast paths
or not finite, a lone surrogate, a text over ``max_text_bytes``, a record over
``max_features_per_record``. The scanner never raises on bad input.

>>> from learners.records import RecordEncoder
>>> enc = RecordEncoder({"kind": "records", "bits": 10, "fields": {
...     "age": {"type": "numeric"}, "job": {"type": "categorical"}}})
>>> body = b'{"model": "m", "examples": [{"x": {"job": "clerk", "age": 39}, "y": 1}]}'
>>> model, batch, labels, weights, names = scan_records_examples(body, enc, 100)
>>> model, labels, weights, batch.indptr.tolist() == enc.encode([{"age": 39, "job": "clerk"}
...     ]).indptr.tolist()
('m', [1], None, True)
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from learners.csr_batch import Batch, FeatureError
from learners.records._scan_tables import (
    ScannedAtoms,
    ScanTables,
)
from learners.records.encoder import RecordEncoder

# The kernel below inlines helpers of json_scan_bytes.py, json_scan_numbers.py,
# json_scan_envelope.py, json_scan_records.py, json_scan_strings.py and json_scan_words.py;
# its on-disk cache follows them (learners._kernel_cache).
from service.models.json_scan_bytes import (
    _K_MODEL,
    _K_WEIGHT,
    _K_X,
    _K_Y,
    _after_element,
    _after_member,
    _at,
    _Buf,
    _kernel,
    _member,
    _string_end,
    _ws,
)
from service.models.json_scan_envelope import (
    _body_complete,
    _body_start,
    _example_label,
    _examples_start,
    _model_value,
    _weight,
    label_scratch,
    model_and_labels,
    weight_scratch,
)
from service.models.json_scan_records import _record
from service.models.json_scan_words import _plain_names

__all__ = ["scan_records_examples", "scan_records_instances", "warmup_scanner"]

_INSTANCES = np.frombuffer(b"instances", dtype=np.uint8)


# The envelope's per-example readers, compiled once and called here (once an example:
# the record is the cost), not inlined into the scanner (each inlined copy of the number
# reader is typed and optimised again, inside the one large function).
@_kernel
def _label_call(
    buf: _Buf, i: int, n: int, have_y: bool, meta: np.ndarray, row: int, uniq0: int,
    nu: int, last: int,
) -> tuple[int, int, int]:  # fmt: skip
    return _example_label(buf, i, n, have_y, meta, row, uniq0, nu, last)


@_kernel
def _weight_call(
    buf: _Buf, i: int, n: int, have_w: bool, W: np.ndarray, row: int, nw: int
) -> tuple[int, bool, int]:
    return _weight(buf, i, n, have_w, W, row, nw)


@_kernel
def _model_call(buf: _Buf, i: int, n: int, have_model: bool) -> tuple[int, int, int]:
    return _model_value(buf, i, n, have_model)


@_kernel
def _scan(
    buf: _Buf,
    examples: bool,
    max_rows: int,
    word: np.ndarray,
    t_names: np.ndarray,
    t_off: np.ndarray,
    t_kind: np.ndarray,
    t_base: np.ndarray,
    t_edges: np.ndarray,
    t_eoff: np.ndarray,
    refuse: bool,
    max_text: int,
    n_const: int,
    cps: np.ndarray,
    s_off: np.ndarray,
    s_field: np.ndarray,
    s_raw: np.ndarray,
    table: np.ndarray,
    seen: np.ndarray,
    follow: np.ndarray,
    a_row: np.ndarray,
    a_field: np.ndarray,
    a_sidx: np.ndarray,
    a_val: np.ndarray,
    meta: np.ndarray,
    W: np.ndarray,
) -> tuple[int, int, int, int, int, int, int]:
    """(rows, atoms, strings, start and end of the model name, distinct labels, examples
    with a weight); rows 0 for "not the supported shape". ``examples``: an /update body
    (``x``, ``y``, ``weight``), else a /predict body (``instances`` of ``x`` alone);
    ``word`` is the list's key. The first ``n_const`` strings are already in place."""
    n = len(buf)
    rcap = min(meta.shape[0] // 4, W.shape[0])
    fail = (0, 0, 0, 0, 0, 0, 0)
    uniq0 = rcap
    ms = 0
    me = 0
    nu = 0
    nw = 0
    last = -1
    na = 0
    ns = n_const
    rows = 0
    i = _body_start(buf, n)
    if i < 0:
        return fail
    have_model = False
    have_list = False
    plain_keys = _plain_names(t_names)
    while True:
        i = _ws(buf, i, n)
        if i >= n or _at(buf, i) != 34:
            return fail
        ks = i + 1
        ke = _string_end(buf, ks, n)
        if ke < 0:
            return fail
        is_list = ke - ks == word.shape[0]
        for t in range(word.shape[0]):
            if is_list and _at(buf, ks + t) != word[t]:
                is_list = False
        key, i = _member(buf, i, n)
        if i < 0:
            return fail
        if key == _K_MODEL:
            i, ms, me = _model_call(buf, i, n, have_model)
            if i < 0:
                return fail
            have_model = True
        elif is_list:
            i = _examples_start(buf, i, n, have_list)
            if i < 0:
                return fail
            have_list = True
            while True:  # one example per iteration
                if rows >= max_rows or rows >= rcap or i >= n or _at(buf, i) != 123:
                    return fail
                i += 1
                have_x = False
                have_y = not examples
                have_w = False
                W[rows] = 1.0
                while True:  # one key of the example per iteration
                    key, i = _member(buf, _ws(buf, i, n), n)
                    if i < 0:
                        return fail
                    if key == _K_X:
                        if have_x or _at(buf, i) != 123:
                            return fail
                        have_x = True
                        i, na, ns = _record(
                            buf, i, n, rows, t_names, t_off, t_kind, t_base, t_edges, t_eoff,
                            refuse, max_text, plain_keys, cps, s_off, s_field, s_raw, table, seen,
                            follow, a_row, a_field, a_sidx, a_val, na, ns,
                        )  # fmt: skip
                        if i < 0:
                            return fail
                    elif key == _K_Y and examples:
                        i, last, nu = _label_call(buf, i, n, have_y, meta, rows, uniq0, nu, last)
                        if i < 0:
                            return fail
                        have_y = True
                    elif key == _K_WEIGHT and examples:
                        i, have_w, nw = _weight_call(buf, i, n, have_w, W, rows, nw)
                        if i < 0:
                            return fail
                    else:
                        return fail
                    i, closed = _after_member(buf, i, n)
                    if i < 0:
                        return fail
                    if closed:
                        break
                if not (have_x and have_y):
                    return fail
                rows += 1
                i, closed = _after_element(buf, i, n)
                if i < 0:
                    return fail
                if closed:
                    break
        else:
            return fail
        i, closed = _after_member(buf, i, n)
        if i < 0:
            return fail
        if closed:
            break
    if not _body_complete(buf, i, n, have_model, have_list):
        return fail
    return rows, na, ns, ms, me, nu, nw


# ---------------------------------------------------------------- Python side

_scratch = threading.local()
_EXAMPLES = np.frombuffer(b"examples", dtype=np.uint8)


def _scan_body(
    raw: bytes, enc: RecordEncoder, examples: bool, max_rows: int
) -> tuple[ScannedAtoms, np.ndarray, int, int, int, int] | None:
    t: ScanTables = enc.scan_tables()
    size = len(raw)
    if not t.stateless or size < 20 or max_rows < 1:
        return None
    rcap = min(max_rows, size // 8 + 1)
    # a string or an atom takes at least 2 bytes of the body ("" or 0,); a code point 1
    scap = t.n_const + size // 2 + 1
    acap = size // 2 + 1
    cps = np.empty(t.const_cps.shape[0] + size, np.uint32)
    cps[: t.const_cps.shape[0]] = t.const_cps
    s_off = np.empty(scap + 1, np.int64)
    s_off[: t.n_const + 1] = t.const_off
    s_field = np.empty(scap, np.int64)  # set for each string the intern table holds
    s_field[: t.n_const] = -1
    s_raw = np.empty(2 * scap, np.int64)  # a plain string's bytes in the body: start, length
    # the intern table stays small (in cache): half full, it takes no more strings
    table = np.full(1 << max(6, min(12, (2 * scap).bit_length())), -1, np.int64)
    seen = np.full(t.kinds.shape[0], -1, np.int64)
    follow = np.zeros(t.kinds.shape[0] + 1, np.int64)
    a_row = np.empty(acap, np.int64)
    a_field = np.empty(acap, np.int64)
    a_sidx = np.empty(acap, np.int64)
    a_val = np.empty(acap, np.float64)
    meta = label_scratch(rcap)
    W = weight_scratch(rcap)
    rows, na, ns, ms, me, nu, nw = _scan(
        raw, examples, max_rows, _EXAMPLES if examples else _INSTANCES,
        t.names, t.offsets, t.kinds, t.const_base, t.edges, t.edge_off,
        True, t.max_text_bytes, t.n_const,  # (an unknown field: the general path, below)
        cps, s_off, s_field, s_raw, table, seen, follow, a_row, a_field, a_sidx, a_val, meta, W,
    )  # fmt: skip
    if rows <= 0:
        return None
    atoms = ScannedAtoms(
        rows, cps[: s_off[ns]], s_off[: ns + 1], a_row[:na], a_field[:na], a_sidx[:na],
        a_val[:na],
    )  # fmt: skip
    return atoms, meta, ms, me, nu, nw


def scan_records_examples(
    raw: bytes,
    enc: RecordEncoder,
    max_examples: int,
    new: Any = None,
) -> tuple[str, Batch, list[str | int | float], list[float] | None, list[str] | None] | None:
    """An /update body's model, batch, labels, weights (``None`` when no example has a
    ``weight``) and, with ``new`` (as :meth:`RecordEncoder.encode_named` takes it), the
    names of its features ``new`` keeps (else ``None``); or ``None`` when the body is
    not the shape this reads (see the module docstring)."""
    scanned = _scan_body(raw, enc, True, max_examples)
    if scanned is None:
        return None
    atoms, meta, ms, me, nu, nw = scanned
    named = model_and_labels(raw, meta, atoms.n_rows, ms, me, nu)
    if named is None:
        return None
    try:  # a record over the limits: the general path words the error
        batch, names = enc.encode_atoms(atoms, new)
    except FeatureError:
        return None
    weights = meta_weights(nw, atoms.n_rows)
    return named[0], batch, named[1], weights, names


def meta_weights(nw: int, rows: int) -> list[float] | None:
    return weight_scratch(rows)[:rows].tolist() if nw else None


def scan_records_instances(raw: bytes, enc: RecordEncoder, max_rows: int) -> Batch | None:
    """A /predict body's batch (``{"model": ..., "instances": [{"x": {...}}, ...]}``,
    nothing else), or ``None``."""
    scanned = _scan_body(raw, enc, False, max_rows)
    if scanned is None:
        return None
    try:
        return enc.encode_atoms(scanned[0])[0]
    except FeatureError:
        return None


def warmup_scanner() -> None:
    """Compile (or load) the scanner alone, not the encoder's row kernel it hands the
    atoms to (``learnserve warmup`` compiles the two side by side)."""
    enc = RecordEncoder({"kind": "records", "bits": 8, "fields": {
        "a": {"type": "numeric"}, "b": {"type": "numeric", "transform": "log1p"},
        "c": {"type": "numeric", "transform": {"bins": [1, 2]}}, "d": {"type": "categorical"},
        "t": {"type": "text", "chars": {"ngrams": [2, 3]}}}})  # fmt: skip
    body = (
        b'{"model": "m", "examples": [{"x": {"a": 1.5, "b": -2, "c": 1, "d": ["x", "y"], '
        rb'"t": "some w\u00f6rds"}, "y": "a"}, {"y": 3, "weight": 0.5, "x": {}}]}'
    )
    scanned = _scan_body(body, enc, True, 10)
    assert scanned is not None
    atoms, meta, ms, me, nu, _ = scanned
    model_and_labels(body, meta, atoms.n_rows, ms, me, nu)
    _scan_body(b'{"model": "m", "instances": [{"x": {"a": 1}}]}', enc, False, 10)
