"""A numba scanner from the raw bytes of a sparse or hashed ``POST /update`` body to
the CSR batch ``FeatureSpec.encode`` would build.

Reads exactly one shape of body::

    {"model": "adult", "examples": [{"x": {"age": 39, "job": "clerk"}, "y": "+1"}, ...]}

(``kind="hashed"``: keys are feature names, a string value ``v`` of key ``k`` is the
feature ``"k=v"`` with value 1.0, a number the feature ``k`` with that value, hashed
with MurmurHash3 x86 32 of the UTF-8 bytes, masked to ``dim``) or
``{"x": {"12": 1.0, "40": -2}}`` (``kind="sparse"``: keys are decimal indices in
``[0, dim)``), and returns the model name, the batch (the arrays of
``FeatureSpec.encode(xs, max_features=...)`` bit for bit: the scanner lays out the
rows in body order and canonicalises them with the very ``canonical_rows`` the
encoder uses) and the labels as orjson reads them.

Anything else gives ``None`` and the caller takes the orjson path, which also words
the 4xx errors: the dense scanner's shape rules (keys ``model``/``examples`` and
``x``/``y`` exactly once, ``weight`` at most once and > 0, ``y`` a non-empty
escape-free string, an int64 integer or a whole float below 2**53 written ``1.0``,
numbers within its exact fast paths),
plus: ``x`` not an object (``{}``, no features, is the zero vector: taken), more
than ``max_features`` entries, a key with an escape, a control character or invalid
UTF-8, a key repeated within one ``x`` (orjson keeps the last value), a value that
is not a finite number or (hashed only) an escape-free string (``true``, ``null``,
arrays, objects), a sparse key that is not a canonical decimal integer in
``[0, dim)`` (no sign, whitespace, underscore or leading zero: the general path
refuses those with a 422). The scanner never raises on bad input.

>>> r = scan_map_examples(b'{"model": "m", "examples": [{"x": {"3": 1.5, "1": -2}, "y": "a"}]}',
...                       "sparse", 4, 10, 10)
>>> r[0], r[1].indices.tolist(), r[1].values.tolist(), r[2], r[3]
('m', [1, 3], [-2.0, 1.5], ['a'], None)
"""

from __future__ import annotations

import threading

import numpy as np

from learners.csr_batch import Batch, canonical_rows

# The kernel below inlines (or links) helpers of json_scan_bytes.py, json_scan_numbers.py,
# json_scan_envelope.py and json_scan_keys.py; its on-disk cache follows them
# (learners._kernel_cache).
from service.models.json_scan_bytes import (
    _K_EXAMPLES,
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
from service.models.json_scan_keys import _murmur, _new_in_row, _sparse_index, _text_ok
from service.models.json_scan_numbers import _number

__all__ = ["scan_hashed_examples", "scan_map_examples", "warmup"]


@_kernel
def _scan(
    buf: _Buf,
    hashed: bool,
    dim: int,
    max_examples: int,
    max_features: int,
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    meta: np.ndarray,
    rowkeys: np.ndarray,
    tstamp: np.ndarray,
    tpos: np.ndarray,
    stamp0: int,
    fullh: np.ndarray,
    W: np.ndarray,
) -> tuple[int, int, int, int, int, int]:
    """Fill ``indptr`` (``rows + 1``), ``indices``/``values`` (``nnz``, each row in
    body order) and ``meta`` (the labels, as ``json_scan_envelope.model_and_labels``
    reads them); return (rows, nnz, start and end of the model name, number of distinct
    labels), rows 0 for "not the supported shape"; the number of examples with a
    ``weight`` (in ``W``, 1.0 when absent) comes last.

    ``rowkeys`` (3 per feature of the current row: key hash, key start, key end) and
    the open-addressing table ``tstamp``/``tpos`` (a power of two in size, entries of
    another row have another stamp; stamps from ``stamp0``) find repeated keys.
    ``fullh`` (hashed, when as long as ``indices``): each feature's full 32-bit hash,
    before masking (for the names map, :mod:`learners.feature_names`)."""
    n = len(buf)
    rcap = meta.shape[0] // 4
    cap = indices.shape[0]
    rowcap = rowkeys.shape[0] // 3
    tmask = np.uint64(tstamp.shape[0] - 1)
    mask = np.uint64(dim - 1)
    want_full = hashed and fullh.shape[0] == cap
    uniq0 = rcap
    fail = (0, 0, 0, 0, 0, 0)
    ms = 0
    me = 0
    nu = 0
    nw = 0
    last = -1
    nnz = 0
    indptr[0] = 0
    i = _body_start(buf, n)
    if i < 0:
        return fail
    have_model = False
    have_examples = False
    rows = 0
    while True:
        key, i = _member(buf, _ws(buf, i, n), n)
        if i < 0:
            return fail
        if key == _K_MODEL:
            i, ms, me = _model_value(buf, i, n, have_model)
            if i < 0:
                return fail
            have_model = True
        elif key == _K_EXAMPLES:
            i = _examples_start(buf, i, n, have_examples)
            if i < 0:
                return fail
            have_examples = True
            while True:  # one example per iteration
                if rows >= max_examples or rows >= rcap:
                    return fail
                if i >= n or _at(buf, i) != 123:
                    return fail
                i += 1
                have_x = False
                have_y = False
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
                        i = _ws(buf, i + 1, n)
                        empty = i < n and _at(buf, i) == 125  # {}: the zero vector
                        if empty:
                            i += 1
                        stamp = stamp0 + rows
                        k = 0  # features of this row so far
                        while not empty:  # one feature per iteration (left by break)
                            if i >= n or _at(buf, i) != 34:
                                return fail
                            if k >= max_features or k >= rowcap or nnz >= cap:
                                return fail
                            ks = i + 1
                            ke = _string_end(buf, ks, n)
                            if ke < 0:
                                return fail
                            if hashed:
                                if not _text_ok(buf, ks, ke):
                                    return fail
                                h = _murmur(buf, ks, ke, False, ke, ke)
                            else:
                                j = _sparse_index(buf, ks, ke, dim)
                                if j < 0:
                                    return fail
                                h = np.uint64(j)
                            # a repeated key: orjson keeps the last value, refused here
                            if not _new_in_row(
                                buf, hashed, h, ks, ke, k, stamp, rowkeys, tstamp, tpos, tmask
                            ):
                                return fail
                            i = _ws(buf, ke + 1, n)
                            if i >= n or _at(buf, i) != 58:
                                return fail
                            i = _ws(buf, i + 1, n)
                            if i >= n:
                                return fail
                            c = _at(buf, i)
                            if c == 34:  # a string value: hashed "key=value", 1.0
                                if not hashed:
                                    return fail
                                vs = i + 1
                                ve = _string_end(buf, vs, n)
                                if ve < 0:
                                    return fail
                                if not _text_ok(buf, vs, ve):
                                    return fail
                                hv = _murmur(buf, ks, ke, True, vs, ve)
                                indices[nnz] = np.int64(hv & mask)
                                values[nnz] = 1.0
                                if want_full:
                                    fullh[nnz] = np.int64(hv)
                                i = ve + 1
                            elif c == 45 or (48 <= c <= 57):
                                i, v = _number(buf, i, n)
                                if i < 0:
                                    return fail
                                indices[nnz] = np.int64(h & mask) if hashed else np.int64(h)
                                values[nnz] = v
                                if want_full:
                                    fullh[nnz] = np.int64(h)
                            else:
                                return fail
                            nnz += 1
                            k += 1
                            i = _ws(buf, i, n)
                            if i >= n:
                                return fail
                            c = _at(buf, i)
                            i += 1
                            if c == 125:  # }
                                break
                            if c != 44:
                                return fail
                            i = _ws(buf, i, n)
                        indptr[rows + 1] = nnz
                    elif key == _K_Y:
                        i, last, nu = _example_label(buf, i, n, have_y, meta, rows, uniq0, nu, last)
                        if i < 0:
                            return fail
                        have_y = True
                    elif key == _K_WEIGHT:
                        i, have_w, nw = _weight(buf, i, n, have_w, W, rows, nw)
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
    if not _body_complete(buf, i, n, have_model, have_examples):
        return fail
    return rows, nnz, ms, me, nu, nw


# ---------------------------------------------------------------- Python side

_scratch = threading.local()
_SCRATCH_MAX = 1 << 16  # scratch arrays up to this many entries are kept per thread
# Features of one row the scanner takes (a longer row goes the general way): the per-row
# duplicate table stays a reused scratch instead of megabytes zeroed per body.
_ROW_CAP = 1 << 13


def _table(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per-thread scratch for ``size`` features per row: (rowkeys, tstamp, tpos, the
    first stamp of this call). Stamps only grow, so the table needs no clearing."""
    tsize = 1 << max(4, (2 * size - 1).bit_length())
    t = getattr(_scratch, "table", None)
    if t is None or t[1].shape[0] < tsize or t[0].shape[0] < 3 * size:
        t = (np.empty(3 * size, np.int64), np.zeros(tsize, np.int64), np.empty(tsize, np.int64))
        if tsize <= _SCRATCH_MAX:
            _scratch.table = t
            _scratch.stamp = 1
        stamp = 1
    else:
        stamp = _scratch.stamp
    return t[0], t[1], t[2], stamp


_NO_HASHES = np.empty(0, np.int64)


def _hash_scratch(cap: int) -> np.ndarray:
    """A per-thread buffer of exactly ``cap`` int64 (a view of a reused one up to
    ``_SCRATCH_MAX * 4`` entries: a fresh 300 KB array costs its page faults per body)."""
    buf = getattr(_scratch, "hashes", None)
    if buf is None or buf.shape[0] < cap:
        buf = np.empty(max(cap, 4096), np.int64)
        if cap <= 4 * _SCRATCH_MAX:
            _scratch.hashes = buf
    return buf[:cap]


def scan_map_examples(
    raw: bytes, kind: str, dim: int, max_examples: int, max_features: int
) -> tuple[str, Batch, list[str | int | float], list[float] | None] | None:
    """The body's model, batch, labels and weights (``None`` when no example has a
    ``weight``), or ``None`` when ``raw`` is not exactly the supported shape (see the
    module docstring). ``kind`` is ``"sparse"`` or ``"hashed"`` (then ``dim`` is a
    power of two)."""
    scanned = _scan_maps(raw, kind, dim, max_examples, max_features, False)
    return None if scanned is None else (*scanned[:3], scanned[4])


def scan_hashed_examples(
    raw: bytes, dim: int, max_examples: int, max_features: int
) -> tuple[str, Batch, list[str | int | float], np.ndarray, list[float] | None] | None:
    """``scan_map_examples(raw, "hashed", ...)`` plus the full 32-bit hash of every
    feature in body order (int64): which names a model may not know yet. The hashes
    are a view of a per-thread buffer, valid until this thread's next call."""
    return _scan_maps(raw, "hashed", dim, max_examples, max_features, True)


def _scan_maps(
    raw: bytes, kind: str, dim: int, max_examples: int, max_features: int, full: bool
) -> tuple[str, Batch, list[str | int | float], np.ndarray, list[float] | None] | None:
    if kind == "hashed":
        hashed = True
        if dim < 2 or dim & (dim - 1):
            return None
    elif kind == "sparse":
        hashed = False
    else:
        return None
    size = len(raw)
    if size < 20 or dim < 1 or dim > 1 << 31 or max_examples < 1 or max_features < 1:
        return None
    # an example takes > 8 bytes, a feature ("":0 and a separator) >= 5
    rcap = min(max_examples, size // 8 + 1)
    cap = size // 5 + 1
    rowcap = min(max_features, cap, _ROW_CAP)
    indptr = np.empty(rcap + 1, np.int64)
    indices = np.empty(cap, np.int64)
    values = np.empty(cap, np.float64)
    meta = label_scratch(rcap)
    rowkeys, tstamp, tpos, stamp0 = _table(rowcap)
    fullh = _hash_scratch(cap) if full and hashed else _NO_HASHES
    W = weight_scratch(rcap)
    rows, nnz, ms, me, nu, nw = _scan(
        raw, hashed, dim, max_examples, max_features,
        indptr, indices, values, meta, rowkeys, tstamp, tpos, stamp0, fullh, W,
    )  # fmt: skip
    if getattr(_scratch, "table", None) is not None and _scratch.table[1] is tstamp:
        _scratch.stamp = stamp0 + rcap + 1
    if rows <= 0:
        return None
    named = model_and_labels(raw, meta, rows, ms, me, nu)
    if named is None:
        return None
    model, labels = named
    weights = W[:rows].tolist() if nw else None
    ip, ix, vs = indptr[: rows + 1], indices[:nnz], values[:nnz]
    if _in_order(ip, ix):  # (the usual body: canonical_rows' sort is most of a small one)
        ip, ix, vs = ip.copy(), ix.copy(), vs.copy()
    else:  # keys out of order, or hashed names that collide: sorted and summed
        ip, ix, vs = canonical_rows(ip.copy(), ix, vs)
    hashes = fullh[:nnz] if full else _NO_HASHES
    return model, Batch(ip, ix, vs, dim), labels, hashes, weights


def _in_order(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Whether every row's indices strictly increase (what ``canonical_rows`` returns
    unchanged: sorted, no index twice)."""
    if indices.shape[0] < 2:
        return True
    up = indices[1:] > indices[:-1]
    starts = indptr[1:-1]  # a row's first entry may be below the previous row's last
    up[starts[(starts > 0) & (starts < indices.shape[0])] - 1] = True
    return bool(up.all())


def warmup() -> None:
    """Compile (or load from numba's disk cache) the scanner before taking traffic."""
    body = (
        b'{"model": "m", "examples": [{"x": {"a": 1.5, "b": "c"}, "y": "a"}, '
        b'{"y": 3, "weight": 0.5, "x": {"d": -2}}]}'
    )
    scan_map_examples(body, "hashed", 16, 10, 10)
    scan_hashed_examples(body, 16, 10, 10)
    body = b'{"model": "m", "examples": [{"x": {"1": 1.5, "0": 2}, "y": "a"}]}'
    scan_map_examples(body, "sparse", 4, 10, 10)
    from service.models import fast_json_instances  # batch models' sparse /predict bodies

    fast_json_instances.warmup()
