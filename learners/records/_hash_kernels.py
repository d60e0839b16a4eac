"""numba helpers of the records kernels: MurmurHash3 x86 32-bit (seed 0) of a byte
range, exactly as :func:`learners.feature_keys.murmurhash3_32` computes it (tested),
the same hash streamed byte by byte (:func:`feed`, :func:`finish`), UTF-8 encoding of a
code point, and growing a buffer.

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the kernels that call these.

>>> import numpy as np
>>> int(murmur3(np.frombuffer(b"hello", np.uint8), 0, 5))
613153351
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

# All arithmetic in uint64 masked to 32 bits: a mix of signed and unsigned integers
# would make numba compute in float64.
_M32 = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_C3 = np.uint64(0xE6546B64)
_F1 = np.uint64(0x85EBCA6B)
_F2 = np.uint64(0xC2B2AE35)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U5 = np.uint64(5)
_U8 = np.uint64(8)
_U13 = np.uint64(13)
_U15 = np.uint64(15)
_U16 = np.uint64(16)
_U17 = np.uint64(17)
_U19 = np.uint64(19)
_U24 = np.uint64(24)
_U32 = np.uint64(32)


@numba.njit(cache=True, inline="always")
def _mix(k: Any) -> Any:
    k = (k * _C1) & _M32
    k = ((k << _U15) | (k >> _U17)) & _M32
    return (k * _C2) & _M32


@numba.njit(cache=True, inline="always")
def block(h: Any, k: Any) -> Any:
    """The state after one whole 4-byte block ``k`` (uint64, little-endian bytes)."""
    h ^= _mix(k)
    h = ((h << _U13) | (h >> _U19)) & _M32
    return (h * _U5 + _C3) & _M32


@numba.njit(cache=True, inline="always")
def tail(h: Any, k: Any) -> Any:
    """The state after the last 1-3 bytes ``k`` (uint64, little-endian)."""
    return h ^ _mix(k)


@numba.njit(cache=True, inline="always")
def fmix(h: Any, length: int) -> Any:
    """The hash (uint64 in [0, 2**32)) of ``length`` bytes from the state ``h``."""
    h ^= np.uint64(length) & _M32
    h ^= h >> _U16
    h = (h * _F1) & _M32
    h ^= h >> _U13
    h = (h * _F2) & _M32
    h ^= h >> _U16
    return h


@numba.njit(cache=True, inline="always")
def murmur3(buf: np.ndarray, s: int, e: int) -> Any:
    """MurmurHash3 x86 32 (seed 0) of ``buf[s:e]`` (uint8), as an int64 in [0, 2**32)."""
    length = e - s
    h = np.uint64(0)
    nb = length // 4
    for blk in range(nb):
        j = s + 4 * blk
        k = (
            np.uint64(buf[j])
            | (np.uint64(buf[j + 1]) << _U8)
            | (np.uint64(buf[j + 2]) << _U16)
            | (np.uint64(buf[j + 3]) << _U24)
        )
        h = block(h, k)
    t = length - 4 * nb
    if t > 0:
        j = s + 4 * nb
        k = np.uint64(0)
        if t >= 3:
            k ^= np.uint64(buf[j + 2]) << _U16
        if t >= 2:
            k ^= np.uint64(buf[j + 1]) << _U8
        k ^= np.uint64(buf[j])
        h = tail(h, k)
    return np.int64(fmix(h, length))


@numba.njit(cache=True, inline="always")
def take(h: Any, k: Any, cn: int, w: Any, r: int) -> Any:
    """Append the ``r`` (0..4) bytes ``w`` (little-endian) to the pending ``cn`` bytes
    of ``k``, hashing a block when four are there: selects, not a branch (which
    bytes complete a block depends on the token lengths: a branch there mispredicts)."""
    k |= w << np.uint64(8 * cn)
    cn += r
    full = cn >= 4
    hb = block(h, k & _M32)
    h = hb if full else h
    k = (k >> _U32) if full else k
    cn = cn - 4 if full else cn
    return h, k, cn


@numba.njit(cache=True, inline="always")
def feed(h: Any, k: Any, cn: int, b: Any) -> Any:
    """One more byte ``b`` of a streamed MurmurHash3: state ``h``, and ``cn`` (0..3) bytes
    pending in ``k``; returns the new (h, k, cn). Streaming the pieces of a name gives
    :func:`murmur3` of the name's bytes (tested) without building them."""
    return take(h, k, cn, np.uint64(b), 1)


@numba.njit(cache=True, inline="always")
def feed_span(h: Any, k: Any, cn: int, buf: np.ndarray, a: int, z: int) -> Any:
    """:func:`feed` of the bytes ``buf[a:z]``, up to four per step (one load of four
    bytes, the ones past ``z`` masked off; byte by byte near the end of ``buf``)."""
    end = buf.shape[0]
    while a < z:
        r = min(4, z - a)
        if a + 4 <= end:  # (an unsigned index: no wraparound test, one 4-byte load)
            j = np.uint64(a)
            w = (
                np.uint64(buf[j])
                | (np.uint64(buf[j + _U1]) << _U8)
                | (np.uint64(buf[j + _U2]) << _U16)
                | (np.uint64(buf[j + _U3]) << _U24)
            ) & ((np.uint64(1) << np.uint64(8 * r)) - np.uint64(1))
        else:
            w = np.uint64(0)
            for t in range(r):
                w |= np.uint64(buf[a + t]) << np.uint64(8 * t)
        h, k, cn = take(h, k, cn, w, r)
        a += r
    return h, k, cn


@numba.njit(cache=True, inline="always")
def finish(h: Any, k: Any, cn: int, length: int) -> Any:
    """The hash of a stream of ``length`` bytes fed with :func:`feed`, as :func:`murmur3`."""
    if cn > 0:
        h = tail(h, k)
    return np.int64(fmix(h, length))


@numba.njit(cache=True, inline="always")
def put_utf8(buf: np.ndarray, pos: int, cp: int) -> int:
    """Write code point ``cp`` as UTF-8 at ``buf[pos:]`` (room for 4 bytes is the
    caller's part); returns the position after it."""
    if cp < 0x80:
        buf[pos] = cp
        return pos + 1
    if cp < 0x800:
        buf[pos] = 0xC0 | (cp >> 6)
        buf[pos + 1] = 0x80 | (cp & 0x3F)
        return pos + 2
    if cp < 0x10000:
        buf[pos] = 0xE0 | (cp >> 12)
        buf[pos + 1] = 0x80 | ((cp >> 6) & 0x3F)
        buf[pos + 2] = 0x80 | (cp & 0x3F)
        return pos + 3
    buf[pos] = 0xF0 | (cp >> 18)
    buf[pos + 1] = 0x80 | ((cp >> 12) & 0x3F)
    buf[pos + 2] = 0x80 | ((cp >> 6) & 0x3F)
    buf[pos + 3] = 0x80 | (cp & 0x3F)
    return pos + 4


@numba.njit(cache=True)
def grow(buf: np.ndarray, need: int) -> np.ndarray:
    """``buf``, or a copy of its dtype at least twice as long when it is shorter than
    ``need`` (numba compiles one version per dtype)."""
    if need <= buf.shape[0]:
        return buf
    out = np.empty(max(need, 2 * buf.shape[0]), dtype=buf.dtype)
    for i in range(buf.shape[0]):  # (a slice assignment compiles numba's shape-mismatch
        out[i] = buf[i]  # error with its string formatting: ~2 s of the family's compile)
    return out
