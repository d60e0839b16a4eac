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
rows in body order and canonicalises them with the very ``_canonical_rows`` the
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

from learners.features import Batch, _canonical_rows

# NOTE numba's on-disk cache: the kernel below inlines (or links) helpers of
# json_scan_bytes.py, json_scan_numbers.py and json_scan_envelope.py. numba keys this
# module's cache on this file only: after a change to one of those helpers, touch this
# file (or clear service/models/__pycache__/fast_json_maps*.nbi/.nbc) so the kernel is
# recompiled.
from service.models.json_scan_bytes import (
    _K_EXAMPLES,
    _K_MODEL,
    _K_WEIGHT,
    _K_X,
    _K_Y,
    _after_element,
    _after_member,
    _at,
    _inline,
    _kernel,
    _member,
    _same_bytes,
    _string_end,
    _ws,
)
from service.models.json_scan_envelope import (
    _label,
    _weight,
    label_scratch,
    model_and_labels,
    weight_scratch,
)
from service.models.json_scan_numbers import _U1, _U32, _UM32, _number

__all__ = ["murmurhash3_32_nb", "scan_hashed_examples", "scan_map_examples", "warmup"]

_Buf = np.ndarray | bytes

# ---------------------------------------------------------------- MurmurHash3
# x86 32-bit, seed 0, all arithmetic in uint64 masked to 32 bits (a mix of signed
# and unsigned integers would make numba compute in float64).
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_C3 = np.uint64(0xE6546B64)
_F1 = np.uint64(0x85EBCA6B)
_F2 = np.uint64(0xC2B2AE35)
_U5 = np.uint64(5)
_U8 = np.uint64(8)
_U13 = np.uint64(13)
_U15 = np.uint64(15)
_U16 = np.uint64(16)
_U17 = np.uint64(17)
_U19 = np.uint64(19)
_U24 = np.uint64(24)
_U61 = np.uint64(61)  # "="
_GOLD = np.uint64(0x9E3779B97F4A7C15)
# probes of the per-row duplicate-key table before giving up (crafted colliding
# names would otherwise make one row quadratic; the orjson path has no such limit)
_MAX_PROBES = 64


@_inline
def _cat(buf: _Buf, a: int, la: int, sep: bool, c: int, j: int) -> np.uint64:
    """Byte ``j`` of ``buf[a:a+la] + (b"=" if sep else b"") + buf[c:...]``."""
    if j < la:
        return np.uint64(_at(buf, a + j))
    if sep:
        if j == la:
            return _U61
        return np.uint64(_at(buf, c + j - la - 1))
    return np.uint64(_at(buf, c + j - la))


@_inline
def _murmur(buf: _Buf, a: int, b: int, sep: bool, c: int, d: int) -> np.uint64:
    """MurmurHash3 x86 32 (seed 0) of ``buf[a:b]``, then ``b"="`` if ``sep``, then
    ``buf[c:d]`` (``c == d`` for none): as learners.features.murmurhash3_32."""
    la = b - a
    length = la + (1 if sep else 0) + (d - c)
    h = np.uint64(0)
    nb = length // 4
    for blk in range(nb):
        j = 4 * blk
        if j + 4 <= la:  # within the first part: a plain little-endian load
            k = (
                np.uint64(_at(buf, a + j))
                | (np.uint64(_at(buf, a + j + 1)) << _U8)
                | (np.uint64(_at(buf, a + j + 2)) << _U16)
                | (np.uint64(_at(buf, a + j + 3)) << _U24)
            )
        else:
            k = (
                _cat(buf, a, la, sep, c, j)
                | (_cat(buf, a, la, sep, c, j + 1) << _U8)
                | (_cat(buf, a, la, sep, c, j + 2) << _U16)
                | (_cat(buf, a, la, sep, c, j + 3) << _U24)
            )
        k = (k * _C1) & _UM32
        k = ((k << _U15) | (k >> _U17)) & _UM32
        k = (k * _C2) & _UM32
        h ^= k
        h = ((h << _U13) | (h >> _U19)) & _UM32
        h = (h * _U5 + _C3) & _UM32
    t = length - 4 * nb
    if t > 0:
        j = 4 * nb
        k = np.uint64(0)
        if t >= 3:
            k ^= _cat(buf, a, la, sep, c, j + 2) << _U16
        if t >= 2:
            k ^= _cat(buf, a, la, sep, c, j + 1) << _U8
        k ^= _cat(buf, a, la, sep, c, j)
        k = (k * _C1) & _UM32
        k = ((k << _U15) | (k >> _U17)) & _UM32
        k = (k * _C2) & _UM32
        h ^= k
    h ^= np.uint64(length) & _UM32
    h ^= h >> _U16
    h = (h * _F1) & _UM32
    h ^= h >> _U13
    h = (h * _F2) & _UM32
    h ^= h >> _U16
    return h


@_kernel
def _murmur_of(buf: _Buf, a: int, b: int, sep: bool, c: int, d: int) -> np.uint64:
    """A callable (not inlined) :func:`_murmur`, for tests."""
    return _murmur(buf, a, b, sep, c, d)


def murmurhash3_32_nb(data: bytes) -> int:
    """``learners.features.murmurhash3_32(data)`` through the numba kernel (tests)."""
    if not data:
        return int(_murmur_of(b"=", 0, 0, False, 0, 0))
    return int(_murmur_of(data, 0, len(data), False, 0, 0))


# ---------------------------------------------------------------- UTF-8


@_inline
def _cont(buf: _Buf, i: int, e: int, lo: int, hi: int) -> bool:
    if i >= e:
        return False
    c = _at(buf, i)
    return lo <= c <= hi


@_kernel
def _utf8_ok(buf: _Buf, s: int, e: int) -> bool:
    """``buf[s:e]`` is valid UTF-8 as Python and orjson read it (no overlong forms,
    no surrogates, nothing past U+10FFFF)."""
    i = s
    while i < e:
        c = _at(buf, i)
        if c < 0x80:
            i += 1
        elif c < 0xC2:
            return False
        elif c < 0xE0:
            if not _cont(buf, i + 1, e, 0x80, 0xBF):
                return False
            i += 2
        elif c < 0xF0:
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
            if not (_cont(buf, i + 1, e, lo, hi) and _cont(buf, i + 2, e, 0x80, 0xBF)):
                return False
            i += 3
        elif c < 0xF5:
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
            if not (
                _cont(buf, i + 1, e, lo, hi)
                and _cont(buf, i + 2, e, 0x80, 0xBF)
                and _cont(buf, i + 3, e, 0x80, 0xBF)
            ):
                return False
            i += 4
        else:
            return False
    return True


@_inline
def _ascii(buf: _Buf, s: int, e: int) -> bool:
    for i in range(s, e):  # noqa: SIM110 - a loop numba compiles well
        if _at(buf, i) >= 0x80:
            return False
    return True


# ---------------------------------------------------------------- the kernel


@_inline
def _sparse_index(buf: _Buf, s: int, e: int, dim: int) -> int:
    """The index a sparse key ``buf[s:e]`` names: plain decimal digits, no leading
    zero but "0", below ``dim``; else -1."""
    ln = e - s
    if ln < 1 or ln > 10:  # dim <= 2**31: at most 10 digits
        return -1
    if ln > 1 and _at(buf, s) == 48:
        return -1
    v = 0
    for t in range(s, e):
        c = _at(buf, t)
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
    return v if v < dim else -1


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
    body order) and ``meta`` (the labels, as in fast_json._scan); return (rows, nnz,
    start and end of the model name, number of distinct labels), rows 0 for "not the
    supported shape"; the number of examples with a ``weight`` (in ``W``, 1.0 when
    absent) comes last.

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
    i = _ws(buf, 0, n)
    if i >= n or _at(buf, i) != 123:
        return fail
    i += 1
    have_model = False
    have_examples = False
    rows = 0
    while True:
        key, i = _member(buf, _ws(buf, i, n), n)
        if i < 0:
            return fail
        if key == _K_MODEL:
            if have_model or _at(buf, i) != 34:
                return fail
            have_model = True
            se = _string_end(buf, i + 1, n)
            if se < 0:
                return fail
            ms = i + 1
            me = se
            i = se + 1
        elif key == _K_EXAMPLES:
            if have_examples or _at(buf, i) != 91:
                return fail
            have_examples = True
            i = _ws(buf, i + 1, n)
            if i >= n or _at(buf, i) == 93:
                return fail
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
                                if not _ascii(buf, ks, ke) and not _utf8_ok(buf, ks, ke):
                                    return fail
                                h = _murmur(buf, ks, ke, False, ke, ke)
                            else:
                                j = _sparse_index(buf, ks, ke, dim)
                                if j < 0:
                                    return fail
                                h = np.uint64(j)
                            # a repeated key: orjson keeps the last value, refused here
                            slot = ((h * _GOLD) >> _U32) & tmask
                            probes = 0
                            while tstamp[slot] == stamp:
                                p = 3 * tpos[slot]
                                if np.uint64(rowkeys[p]) == h:
                                    if not hashed:
                                        return fail
                                    kl = ke - ks
                                    a = rowkeys[p + 1]
                                    if rowkeys[p + 2] - a == kl and _same_bytes(buf, a, ks, kl):
                                        return fail
                                probes += 1
                                if probes > _MAX_PROBES:
                                    return fail
                                slot = (slot + _U1) & tmask
                            tstamp[slot] = stamp
                            tpos[slot] = k
                            rowkeys[3 * k] = np.int64(h)
                            rowkeys[3 * k + 1] = ks
                            rowkeys[3 * k + 2] = ke
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
                                if not _ascii(buf, vs, ve) and not _utf8_ok(buf, vs, ve):
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
                        if have_y:
                            return fail
                        have_y = True
                        i, code, nu = _label(buf, i, n, meta, uniq0, nu, last)
                        if i < 0:
                            return fail
                        meta[rows] = code
                        last = code
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
    if not (have_model and have_examples):
        return fail
    if _ws(buf, i, n) != n:
        return fail
    return rows, nnz, ms, me, nu, nw


# ---------------------------------------------------------------- Python side

_scratch = threading.local()
_SCRATCH_MAX = 1 << 16  # scratch arrays up to this many entries are kept per thread


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
) -> tuple[str, Batch, list[str | int], list[float] | None] | None:
    """The body's model, batch, labels and weights (``None`` when no example has a
    ``weight``), or ``None`` when ``raw`` is not exactly the supported shape (see the
    module docstring). ``kind`` is ``"sparse"`` or ``"hashed"`` (then ``dim`` is a
    power of two)."""
    scanned = _scan_maps(raw, kind, dim, max_examples, max_features, False)
    return None if scanned is None else (*scanned[:3], scanned[4])


def scan_hashed_examples(
    raw: bytes, dim: int, max_examples: int, max_features: int
) -> tuple[str, Batch, list[str | int], np.ndarray, list[float] | None] | None:
    """``scan_map_examples(raw, "hashed", ...)`` plus the full 32-bit hash of every
    feature in body order (int64): which names a model may not know yet. The hashes
    are a view of a per-thread buffer, valid until this thread's next call."""
    return _scan_maps(raw, "hashed", dim, max_examples, max_features, True)


def _scan_maps(
    raw: bytes, kind: str, dim: int, max_examples: int, max_features: int, full: bool
) -> tuple[str, Batch, list[str | int], np.ndarray, list[float] | None] | None:
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
    rowcap = min(max_features, cap)
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
    ip, ix, vs = _canonical_rows(indptr[: rows + 1].copy(), indices[:nnz], values[:nnz])
    hashes = fullh[:nnz] if full else _NO_HASHES
    return model, Batch(ip, ix, vs, dim), labels, hashes, weights


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
