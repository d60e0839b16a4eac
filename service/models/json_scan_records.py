"""The value readers of the records scanner (:mod:`service.models.fast_json_records`): a
JSON string decoded to code points (UTF-8 checked as orjson checks it, every escape,
surrogate pairs joined), a value skipped (an ignored field), a key matched against the
config's field names, and a string value put in the batch's string table (a repeated
plain string of a field stored once, so the row kernel hashes a repeated category once
per batch, as the encoder's own string table does).

Every helper returns -1 (as the index) for "not read here" and never raises; they are
inlined into the kernel at numba IR level. numba keys a kernel's on-disk cache on the
kernel's own source file: after a change here, touch fast_json_records.py (or clear its
``__pycache__/*.nbi``/``.nbc``) so its kernel is recompiled.
"""

from __future__ import annotations

import numpy as np

from service.models.json_scan_bytes import _at, _Buf, _inline, _same_bytes
from service.models.json_scan_keys import _text_ok
from service.models.json_scan_numbers import _number

_FNV = np.uint64(0x100000001B3)
_FNV0 = np.uint64(0xCBF29CE484222325)


@_inline
def _hex4(buf: _Buf, i: int, n: int) -> int:
    """The 4 hex digits at ``buf[i:i+4]``, or -1."""
    if i + 4 > n:
        return -1
    v = 0
    for t in range(4):
        c = _at(buf, i + t)
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return -1
        v = v * 16 + d
    return v


@_inline
def _cont_byte(buf: _Buf, i: int, n: int, lo: int, hi: int) -> int:
    """The payload of a continuation byte ``buf[i]`` in ``[lo, hi]``, or -1."""
    if i >= n:
        return -1
    c = _at(buf, i)
    if c < lo or c > hi:
        return -1
    return c & 0x3F


@_inline
def _escape(buf: _Buf, i: int, n: int) -> tuple[int, int]:
    """The escape at ``buf[i]`` (a backslash): (index after it, code point), or (-1, 0)
    for a malformed one or a lone surrogate (not text: the general path refuses it)."""
    if i + 1 >= n:
        return -1, 0
    e = _at(buf, i + 1)
    if e == 34 or e == 92 or e == 47:  # " \ /
        return i + 2, e
    if e == 110:
        return i + 2, 10
    if e == 116:
        return i + 2, 9
    if e == 114:
        return i + 2, 13
    if e == 98:
        return i + 2, 8
    if e == 102:
        return i + 2, 12
    if e != 117:  # u
        return -1, 0
    u = _hex4(buf, i + 2, n)
    i += 6
    if u < 0 or 0xDC00 <= u < 0xE000:
        return -1, 0
    if 0xD800 <= u < 0xDC00:  # a high surrogate: its low half must follow
        if i + 1 >= n or _at(buf, i) != 92 or _at(buf, i + 1) != 117:
            return -1, 0
        lo = _hex4(buf, i + 2, n)
        if lo < 0xDC00 or lo >= 0xE000:
            return -1, 0
        return i + 6, 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
    return i, u


@_inline
def _decode(buf: _Buf, i: int, n: int, cps: np.ndarray, nc: int) -> tuple[int, int, int]:
    """The string whose opening quote is just before ``buf[i]``, decoded into
    ``cps[nc:]``: (index after the closing quote, new ``nc``, its UTF-8 length), or
    (-1, nc, 0) (invalid, cut short, or ``cps`` full)."""
    cap = cps.shape[0]
    nbytes = 0
    while i < n:
        c = _at(buf, i)
        if c == 34:
            return i + 1, nc, nbytes
        if nc >= cap:
            return -1, nc, 0
        if c < 0x80:
            if c < 32:
                return -1, nc, 0
            if c == 92:
                i, cp = _escape(buf, i, n)
                if i < 0:
                    return -1, nc, 0
            else:
                cp = c
                i += 1
        elif c < 0xC2:
            return -1, nc, 0
        elif c < 0xE0:
            b1 = _cont_byte(buf, i + 1, n, 0x80, 0xBF)
            if b1 < 0:
                return -1, nc, 0
            cp = ((c & 0x1F) << 6) | b1
            i += 2
        elif c < 0xF0:
            b1 = _cont_byte(buf, i + 1, n, 0xA0 if c == 0xE0 else 0x80, 0x9F if c == 0xED else 0xBF)
            b2 = _cont_byte(buf, i + 2, n, 0x80, 0xBF)
            if b1 < 0 or b2 < 0:
                return -1, nc, 0
            cp = ((c & 0x0F) << 12) | (b1 << 6) | b2
            i += 3
        elif c < 0xF5:
            b1 = _cont_byte(buf, i + 1, n, 0x90 if c == 0xF0 else 0x80, 0x8F if c == 0xF4 else 0xBF)
            b2 = _cont_byte(buf, i + 2, n, 0x80, 0xBF)
            b3 = _cont_byte(buf, i + 3, n, 0x80, 0xBF)
            if b1 < 0 or b2 < 0 or b3 < 0:
                return -1, nc, 0
            cp = ((c & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3
            i += 4
        else:
            return -1, nc, 0
        cps[nc] = cp
        nc += 1
        nbytes += 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    return -1, nc, 0


@_inline
def _skip_value(buf: _Buf, i: int, n: int, cps: np.ndarray, nc: int) -> int:
    """Past the value at ``buf[i]`` of a field the config ignores: a string, a number,
    true, false or null (anything else, an object or array, gives -1: the general path
    reads it). The string is decoded into ``cps[nc:]`` only to check it."""
    c = _at(buf, i)
    if c == 34:
        return _decode(buf, i + 1, n, cps, nc)[0]
    if c == 45 or 48 <= c <= 57:
        return _number(buf, i, n)[0]
    if c == 116 and i + 4 <= n and _at(buf, i + 1) == 114 and _at(buf, i + 2) == 117:
        return i + 4 if _at(buf, i + 3) == 101 else -1  # true
    if c == 102 and i + 5 <= n and _at(buf, i + 1) == 97 and _at(buf, i + 2) == 108:
        return i + 5 if _at(buf, i + 3) == 115 and _at(buf, i + 4) == 101 else -1  # false
    if _null(buf, i, n):
        return i + 4
    return -1


@_inline
def _null(buf: _Buf, i: int, n: int) -> bool:
    return (
        i + 4 <= n
        and _at(buf, i) == 110
        and _at(buf, i + 1) == 117
        and _at(buf, i + 2) == 108
        and _at(buf, i + 3) == 108
    )


@_inline
def _field_of(
    buf: _Buf, ks: int, ke: int, names: np.ndarray, offsets: np.ndarray, hint: int
) -> int:
    """The field whose name is the key ``buf[ks:ke]`` (escape-free), tried from field
    ``hint`` on, or -1; -2 for a key that is not valid UTF-8."""
    nf = offsets.shape[0] - 1
    ln = ke - ks
    for t in range(nf):
        j = hint + t
        if j >= nf:
            j -= nf
        a = offsets[j]
        if offsets[j + 1] - a != ln:
            continue
        same = True
        for q in range(ln):
            if _at(buf, ks + q) != names[a + q]:
                same = False
                break
        if same:
            return j
    return -1 if _text_ok(buf, ks, ke) else -2


@_inline
def _string(
    buf: _Buf,
    i: int,
    n: int,
    field: int,
    cps: np.ndarray,
    s_off: np.ndarray,
    s_field: np.ndarray,
    s_raw: np.ndarray,
    table: np.ndarray,
    ns: int,
) -> tuple[int, int, int, int]:
    """The string whose opening quote is at ``buf[i]``, as a string of the batch's table:
    (index after it, its string index, the new string count, its UTF-8 length), or
    (-1, 0, ns, 0). A plain string (printable ASCII, no escape) equal to an earlier one
    of the same field is that one, found by its bytes and not decoded again (``table``,
    a power of two, -1 empty, maps a hash to a string index; half full, it takes no
    more); any other is decoded into a new string. (A string stored twice changes no
    feature: the row kernel hashes each string index once.)"""
    s = i + 1
    h = _FNV0 ^ np.uint64(field)
    k = s
    plain = True
    while k < n:
        c = _at(buf, k)
        if c == 34:
            break
        if c == 92 or c < 32 or c >= 128:
            plain = False
            break
        h = (h ^ np.uint64(c)) * _FNV
        k += 1
    if k >= n:
        return -1, 0, ns, 0
    size = table.shape[0]
    tmask = np.uint64(size - 1)
    free = -1
    ln = k - s
    if plain:
        slot = h & tmask
        for _probe in range(size):
            sid = table[slot]
            if sid < 0:
                free = np.int64(slot)  # type: ignore[assignment]  # (numba: one int64)
                break
            if (
                s_field[sid] == field
                and s_raw[2 * sid + 1] == ln
                and _same_bytes(buf, s_raw[2 * sid], s, ln)
            ):
                return k + 1, sid, ns, ln
            slot = (slot + np.uint64(1)) & tmask
    e, nc, nbytes = _decode(buf, s, n, cps, s_off[ns])
    if e < 0:
        return -1, 0, ns, 0
    s_off[ns + 1] = nc
    s_field[ns] = field
    s_raw[2 * ns] = s
    s_raw[2 * ns + 1] = ln
    if free >= 0 and 2 * (ns + 1) < size:
        table[free] = ns
    return e, ns, ns + 1, nbytes
