"""The feature keys of a sparse or hashed body, for the numba scanner of
:mod:`service.models.fast_json_maps`: MurmurHash3 of a name (or of ``name=value``), as
``learners.features.murmurhash3_32`` computes it; UTF-8 validation as Python and
orjson read it; a sparse key's index; and the per-row table that finds a key repeated
within one ``x``.

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the kernels that use it.
"""

from __future__ import annotations

import numpy as np

from learners.records._hash_kernels import block, fmix, tail
from service.models.json_scan_bytes import _at, _Buf, _inline, _kernel, _same_bytes

__all__ = ["murmurhash3_32_nb"]

# ---------------------------------------------------------------- MurmurHash3
# x86 32-bit, seed 0: the rounds and the finaliser are the records kernels' (block, tail,
# fmix of learners.records._hash_kernels); here the bytes come from a name or
# name=value read in place in the body.
_U1 = np.uint64(1)
_U8 = np.uint64(8)
_U16 = np.uint64(16)
_U24 = np.uint64(24)
_U32 = np.uint64(32)
_U61 = np.uint64(61)  # "="


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
        h = block(h, k)
    t = length - 4 * nb
    if t > 0:
        j = 4 * nb
        k = np.uint64(0)
        if t >= 3:
            k ^= _cat(buf, a, la, sep, c, j + 2) << _U16
        if t >= 2:
            k ^= _cat(buf, a, la, sep, c, j + 1) << _U8
        k ^= _cat(buf, a, la, sep, c, j)
        h = tail(h, k)
    return fmix(h, length)


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


@_inline
def _text_ok(buf: _Buf, s: int, e: int) -> bool:
    """``buf[s:e]`` is valid UTF-8 (plain ASCII checked first, inlined)."""
    return _ascii(buf, s, e) or _utf8_ok(buf, s, e)


# ---------------------------------------------------------------- sparse keys


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


# ---------------------------------------------------------------- keys of one row

_GOLD = np.uint64(0x9E3779B97F4A7C15)
# probes of the per-row duplicate-key table before giving up (crafted colliding
# names would otherwise make one row quadratic; the orjson path has no such limit)
_MAX_PROBES = 64


@_inline
def _new_in_row(
    buf: _Buf,
    hashed: bool,
    h: np.uint64,
    ks: int,
    ke: int,
    k: int,
    stamp: int,
    rowkeys: np.ndarray,
    tstamp: np.ndarray,
    tpos: np.ndarray,
    tmask: np.uint64,
) -> bool:
    """Enter the row's feature ``k`` (key ``buf[ks:ke]``, its hash or sparse index ``h``)
    in the row's open-addressing table; False when the row already has that key (orjson
    keeps the last value, refused here) or after ``_MAX_PROBES`` probes.

    ``rowkeys``: 3 per feature of the row (key hash, key start, key end); ``tstamp``/
    ``tpos``: the table (a power of two in size, ``tmask`` its size - 1), entries of
    another row carry another ``stamp``."""
    slot = ((h * _GOLD) >> _U32) & tmask
    probes = 0
    while tstamp[slot] == stamp:
        p = 3 * tpos[slot]
        if np.uint64(rowkeys[p]) == h:
            if not hashed:
                return False
            kl = ke - ks
            a = rowkeys[p + 1]
            if rowkeys[p + 2] - a == kl and _same_bytes(buf, a, ks, kl):
                return False
        probes += 1
        if probes > _MAX_PROBES:
            return False
        slot = (slot + _U1) & tmask
    tstamp[slot] = stamp
    tpos[slot] = k
    rowkeys[3 * k] = np.int64(h)
    rowkeys[3 * k + 1] = ks
    rowkeys[3 * k + 2] = ke
    return True
