"""JSON strings for the records scanner (:mod:`service.models.fast_json_records`): a
string decoded to code points as orjson reads it (UTF-8 checked: no overlong forms, no
surrogates, nothing past U+10FFFF; every escape, surrogate pairs joined; a lone surrogate
or a control character refused), with its UTF-8 length.

Every helper returns -1 (as the index) for "not read here" and never raises; they are
inlined into the kernel at numba IR level (``_decode``, rarely needed, is called). numba's
on-disk cache of a kernel follows every module it inlines (``learners._kernel_cache``).
"""

from __future__ import annotations

import numpy as np

from service.models.json_scan_bytes import _at, _Buf, _inline, _kernel


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


@_kernel  # (compiled once, called: its callers are not hot on plain text)
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
