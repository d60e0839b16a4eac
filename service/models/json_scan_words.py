"""Eight bytes at a time for the records scanner (:mod:`service.models.fast_json_records`):
a record's key compared with the field name it most likely is, and a plain string's
bytes (printable ASCII, no escape) found, hashed and compared a word at a time. Byte
by byte, these loops ended at a different count for each key and string (a mispredicted
branch each) and chained a multiply per byte (the hash).

A word holds ``buf[i:i+8]``, the first byte lowest (:func:`_load8`). Loads stay inside
the array: a word that would cross its end is read from further back, or byte by byte.
Every helper is inlined into the kernel at numba IR level. numba's on-disk cache of a
kernel follows every module it inlines (``learners._kernel_cache``).
"""

from __future__ import annotations

import numpy as np

from service.models.json_scan_bytes import _at, _Buf, _inline
from service.models.json_scan_numbers import _load8

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U8 = np.uint64(8)
_U29 = np.uint64(29)
_U32 = np.uint64(32)
_U56 = np.uint64(56)
_UONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_UB01 = np.uint64(0x0101010101010101)
_UB7F = np.uint64(0x7F7F7F7F7F7F7F7F)
_UB80 = np.uint64(0x8080808080808080)
_UB60 = np.uint64(0x6060606060606060)  # 0x80 - 0x20: a byte's high bit set from 0x20 up
_UQUOTE = np.uint64(0x2222222222222222)
_UBSLASH = np.uint64(0x5C5C5C5C5C5C5C5C)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xFF51AFD7ED558CCD)


@_inline
def _low(k: int) -> np.uint64:
    """The low ``k`` bytes of a word set (0 <= k < 8)."""
    return (_U1 << np.uint64(8 * k)) - _U1


@_inline
def _first(m: np.uint64) -> int:
    """The index of the lowest byte with its high bit set in ``m`` (only high bits
    set, ``m`` != 0): the bytes below it, counted by a multiply."""
    return int(((((m & (~m + _U1)) - _U1) & _UB01) * _UB01) >> _U56) - 1


@_inline
def _zero_bytes(v: np.uint64) -> np.uint64:
    """The high bit of each zero byte of ``v`` (exact: no carry crosses a byte)."""
    return ~(((v & _UB7F) + _UB7F) | v) & _UB80


@_inline
def _special(x: np.uint64) -> np.uint64:
    """The high bit of each byte of ``x`` that ends a plain string: a quote, a
    backslash, a control character (< 0x20) or a byte from 0x80 up."""
    ctrl = ~(((x & _UB7F) + _UB60) | x) & _UB80
    return _zero_bytes(x ^ _UQUOTE) | _zero_bytes(x ^ _UBSLASH) | ctrl | (x & _UB80)


@_inline
def _part(arr: _Buf, i: int, k: int, end: int) -> np.uint64:
    """``arr[i:i+k]`` (0 < k < 8, ``i + k <= end``) as a word, its high bytes zero."""
    if i + 8 <= end:
        return _load8(arr, i) & _low(k)
    if i + k >= 8:  # the word that ends where the part ends
        return _load8(arr, i + k - 8) >> np.uint64(64 - 8 * k)
    x = _U0
    for t in range(k):
        x |= np.uint64(_at(arr, i + t)) << np.uint64(8 * t)
    return x


@_inline
def _same_part(a: _Buf, i: int, na: int, b: _Buf, j: int, nb: int, ln: int) -> bool:
    """``a[i:i+ln] == b[j:j+ln]`` (both within their arrays), a word at a time."""
    q = 0
    while q + 8 <= ln:
        if _load8(a, i + q) != _load8(b, j + q):
            return False
        q += 8
    r = ln - q
    return r == 0 or _part(a, i + q, r, na) == _part(b, j + q, r, nb)


@_inline
def _is_name(buf: _Buf, ks: int, n: int, names: np.ndarray, a: int, ln: int) -> bool:
    """The key whose first byte is ``buf[ks]`` is ``names[a:a+ln]``, closing quote
    included. (A name with a quote, backslash or control byte must not be tried: its
    raw bytes would read as a different key; the caller checks that once.)"""
    e = ks + ln
    return e < n and _at(buf, e) == 34 and _same_part(buf, ks, n, names, a, names.shape[0], ln)


@_inline
def _plain_names(names: np.ndarray) -> bool:
    """No field name holds a byte a JSON key cannot carry raw (see :func:`_is_name`)."""
    for t in range(names.shape[0]):
        c = names[t]
        if c == 34 or c == 92 or c < 32:
            return False
    return True


@_inline
def _plain_end(buf: _Buf, s: int, n: int, seed: np.uint64) -> tuple[int, bool, np.uint64]:
    """From ``buf[s]`` (just after an opening quote): (the index of the first byte that
    ends a plain string, whether it is the closing quote, a hash of the bytes before
    it). The index is ``n`` when the body ends first."""
    h = seed
    k = s
    while k + 8 <= n:
        x = _load8(buf, k)
        m = _special(x)
        if m == 0:
            h = (h ^ x) * _GOLD
            k += 8
            continue
        t = _first(m)
        k += t
        h = (h ^ (x & _low(t)) ^ np.uint64(t)) * _GOLD
        return k, _at(buf, k) == 34, _fold(h)
    while k < n:  # the last few bytes of the body
        c = _at(buf, k)
        if c == 34 or c == 92 or c < 32 or c >= 128:
            return k, c == 34, _fold(h)
        h = (h ^ np.uint64(c)) * _GOLD
        k += 1
    return k, False, _fold(h)


@_inline
def _fold(h: np.uint64) -> np.uint64:
    """Spread the high bits of ``h`` down (a table slot takes the low ones)."""
    h ^= h >> _U29
    h *= _MIX
    return h ^ (h >> _U32)


@_inline
def _ascii(buf: _Buf, s: int, ln: int, cps: np.ndarray, nc: int) -> int:
    """A plain string ``buf[s:s+ln]`` as code points into ``cps[nc:]``: the new ``nc``,
    or -1 when ``cps`` is full (as the decoder, which stops at the first code point that
    does not fit)."""
    if nc + ln > cps.shape[0]:
        return -1
    for t in range(ln):
        cps[nc + t] = _at(buf, s + t)
    return nc + ln
