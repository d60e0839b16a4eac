"""Strict JSON numbers for the numba JSON scanners, read from raw bytes exactly as
orjson reads them: :func:`_number` (a feature value or weight, a double bit for bit) and
:func:`_int_label` (an integer label, or a whole float written ``1.0``).

Numbers are converted with Clinger's fast path when it applies (a decimal significand
``w`` of at most 2**53 times or divided by an exact power of ten, at most 10**22: one
correctly rounded IEEE operation), else with Eisel-Lemire (``w`` of up to 19 digits times
a 128-bit power of five; see :func:`_eisel_lemire`), so the ``repr`` of any normal double
takes the fast path. A number of more than 19 significant digits, a subnormal or
non-finite result, or one of the rare products Eisel-Lemire leaves undecided gives "no
answer" and the scanner's caller takes the orjson path.

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the kernels that use it.
"""

from __future__ import annotations

import numpy as np

from service.models.json_scan_bytes import _at, _Buf, _inline, _kernel

# 10**0 .. 10**22 are exact doubles (float() of an int rounds correctly).
_POW10 = np.array([float(10**k) for k in range(23)], dtype=np.float64)

# ---------------------------------------------------------------- Eisel-Lemire
#
# Numbers outside Clinger's exact window (a significand over 2**53, like the 16-17
# digits of ``repr`` of a computed double, or an exponent beyond +-22) are converted
# by the Eisel-Lemire algorithm, as in Go's ``strconv.eiselLemire64`` (Lemire 2021,
# "Number parsing at a gigabyte per second"): normalize the significand ``w``
# (< 2**64) and multiply it by a 128-bit truncation of 5**q (a table); the top 54
# bits of the product give the correctly rounded double unless the truncation
# leaves the rounding undecided (then "no answer", and the body takes the slow
# path). Results in the subnormal range or beyond the largest double also give no
# answer; below 10**-342 the value rounds to zero for any 19-digit significand.

_EL_MIN_Q = -342
_EL_MAX_Q = 308


def _pow5_128(q: int) -> int:
    """5**q (q may be negative) as a 128-bit integer with its top bit set: the
    truncated value for q >= 0, the reciprocal rounded up for q < 0 (the table of
    fast_float / Go's strconv, computed with Python integers, no floating point)."""
    if q >= 0:
        p = 5**q
        while p < 1 << 127:
            p <<= 1
        while p >= 1 << 128:
            p >>= 1
        return p
    p = 5**-q
    z = p.bit_length()  # the least z with 2**z >= p (p is not a power of two)
    if q >= -27:
        return (1 << (z + 127)) // p + 1
    c = (1 << (2 * z + 128)) // p + 1
    while c >= 1 << 128:
        c >>= 1
    return c


_M64 = (1 << 64) - 1
_POW5_HI = np.array([_pow5_128(q) >> 64 for q in range(_EL_MIN_Q, _EL_MAX_Q + 1)], np.uint64)
_POW5_LO = np.array([_pow5_128(q) & _M64 for q in range(_EL_MIN_Q, _EL_MAX_Q + 1)], np.uint64)
# 2.0**(k - 1075) for a biased exponent k in 1..2046: float(53-bit mantissa) * this
# is the double (exact: every factor and the product are representable).
_POW2 = np.array([0.0] + [2.0 ** (k - 1075) for k in range(1, 2047)], np.float64)

_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U9 = np.uint64(9)
_U10 = np.uint64(10)
_U32 = np.uint64(32)
_U48 = np.uint64(48)
_U53 = np.uint64(53)
_U63 = np.uint64(63)
_U0x1FF = np.uint64(0x1FF)
_UM32 = np.uint64(0xFFFFFFFF)
_UMAX = np.uint64(_M64)
_UTWO53 = np.uint64(2**53)


@_kernel
def _mul64(a: np.uint64, b: np.uint64) -> tuple[np.uint64, np.uint64]:
    """The 128-bit product of two uint64: (high, low), from 32-bit halves."""
    a0 = a & _UM32
    a1 = a >> _U32
    b0 = b & _UM32
    b1 = b >> _U32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> _U32) + (p01 & _UM32) + (p10 & _UM32)
    lo = (mid << _U32) | (p00 & _UM32)
    hi = p11 + (p01 >> _U32) + (p10 >> _U32) + (mid >> _U32)
    return hi, lo


@_kernel
def _clz64(x: np.uint64) -> int:
    """Leading zero bits of a nonzero uint64."""
    n = 0
    if x >> _U32 == 0:
        n += 32
        x <<= _U32
    if x >> np.uint64(48) == 0:
        n += 16
        x <<= np.uint64(16)
    if x >> np.uint64(56) == 0:
        n += 8
        x <<= np.uint64(8)
    if x >> np.uint64(60) == 0:
        n += 4
        x <<= np.uint64(4)
    if x >> np.uint64(62) == 0:
        n += 2
        x <<= np.uint64(2)
    if x >> _U63 == 0:
        n += 1
    return n


@_kernel
def _eisel_lemire(w: np.uint64, q: int) -> float:
    """The double nearest to ``w * 10**q`` (``w`` > 0), or NaN when it cannot be
    decided cheaply, is subnormal or overflows (the caller then gives up).
    Go's ``eiselLemire64``, plus fast_float's exact ties for 0 <= q <= 23."""
    if q < _EL_MIN_Q:
        return 0.0
    if q > _EL_MAX_Q:
        return np.nan
    clz = _clz64(w)
    w = w << np.uint64(clz)
    exp2 = ((217706 * q) >> 16) + 64 + 1023 - clz
    k = q - _EL_MIN_Q
    xhi, xlo = _mul64(w, _POW5_HI[k])
    if (xhi & _U0x1FF) == _U0x1FF and xlo + w < w:
        yhi, ylo = _mul64(w, _POW5_LO[k])
        mlo = xlo + yhi
        mhi = xhi
        if mlo < xlo:
            mhi += _U1
        if (mhi & _U0x1FF) == _U0x1FF and mlo == _UMAX and ylo + w < w:
            return np.nan
        xhi = mhi
        xlo = mlo
    msb = xhi >> _U63
    mant = xhi >> (msb + _U9)
    if msb == 0:
        exp2 -= 1
    if xlo == 0 and (xhi & _U0x1FF) == 0 and (mant & _U3) == _U1:
        # halfway between two doubles as far as the truncated product tells
        if 0 <= q <= 23 and (mant << (msb + _U9)) == xhi:
            # 5**q < 2**54 is exact in the table and w * 5**q in the product: a
            # true tie, rounded to even (down: the bit above the round bit is 0)
            mant ^= _U1
        else:
            return np.nan  # undecided
    mant = (mant + (mant & _U1)) >> _U1
    if mant >> _U53 != 0:
        mant >>= _U1
        exp2 += 1
    if exp2 < 1 or exp2 > 2046:
        return np.nan
    return float(mant) * _POW2[exp2]


# SWAR: eight bytes at a time in a uint64 (first byte lowest), as in fast_float
_U8 = np.uint64(8)
_UB30 = np.uint64(0x3030303030303030)
_UB7F = np.uint64(0x7F7F7F7F7F7F7F7F)
_UB76 = np.uint64(0x7676767676767676)
_UB80 = np.uint64(0x8080808080808080)
_UB01 = np.uint64(0x0101010101010101)
_UD1 = np.uint64(0x000000FF000000FF)
_UDM1 = np.uint64(0x000F424000000064)  # 100 + (1000000 << 32)
_UDM2 = np.uint64(0x0000271000000001)  # 1 + (10000 << 32)
_U16 = np.uint64(16)
_U56 = np.uint64(56)
_UPOW10 = np.array([10**k for k in range(9)], np.uint64)


@_inline
def _load8(buf: _Buf, i: int) -> np.uint64:
    j = np.uint64(i)  # an unsigned index: no wraparound test, one 8-byte load
    return (
        np.uint64(buf[j])
        | (np.uint64(buf[j + _U1]) << np.uint64(8))
        | (np.uint64(buf[j + np.uint64(2)]) << np.uint64(16))
        | (np.uint64(buf[j + np.uint64(3)]) << np.uint64(24))
        | (np.uint64(buf[j + np.uint64(4)]) << np.uint64(32))
        | (np.uint64(buf[j + np.uint64(5)]) << np.uint64(40))
        | (np.uint64(buf[j + np.uint64(6)]) << np.uint64(48))
        | (np.uint64(buf[j + np.uint64(7)]) << np.uint64(56))
    )


@_inline
def _eight_digits(x: np.uint64) -> np.uint64:
    """The number written by eight digit values (0..9) in the bytes of ``x``, the
    first (most significant) in the lowest byte: fast_float's
    ``parse_eight_digits_unrolled``."""
    x = x * _U10 + (x >> _U8)
    return (((x & _UD1) * _UDM1) + (((x >> _U16) & _UD1) * _UDM2)) >> _U32


@_inline
def _digits(buf: _Buf, i: int, n: int, w: np.uint64) -> tuple[int, np.uint64]:
    """Read the decimal digits at ``_at(buf, i)`` into ``w`` (``w * 10**k + digits``,
    wrapping around past 19 digits): (index after them, w)."""
    while i + 8 <= n:
        x = _load8(buf, i) ^ _UB30  # digit bytes become their values 0..9
        # high bit of each byte that is not a digit (x >= 10), no carry between bytes
        m = (((x & _UB7F) + _UB76) | x) & _UB80
        if m == 0:
            w = w * _UPOW10[8] + _eight_digits(x)
            i += 8
            continue
        # digits before the first non-digit byte: the bytes below its high bit
        k = int(((((m & (~m + _U1)) - _U1) & _UB01) * _UB01) >> _U56) - 1
        if k > 0:
            w = w * _UPOW10[k] + _eight_digits(x << np.uint64(64 - 8 * k))
        return i + k, w
    while i < n:
        d = np.uint64(_at(buf, i)) - _U48
        if d > _U9:
            break
        w = w * _U10 + d
        i += 1
    return i, w


@_inline
def _number(buf: _Buf, i: int, n: int) -> tuple[int, float]:
    """A strict JSON number at ``_at(buf, i)``: (index after it, value), or (-1, 0.0)
    when it is malformed, has more than 19 significant digits or its value is not
    decided by the fast paths (Clinger, then Eisel-Lemire)."""
    if i >= n:
        return -1, 0.0
    neg = _at(buf, i) == 45  # -
    if neg:
        i += 1
        if i >= n:
            return -1, 0.0
    c = _at(buf, i)
    w = np.uint64(0)
    nd = 0  # significant digits (no leading zeros) in w
    if c == 48:  # 0: no more integer digits may follow
        i += 1
        if i < n and np.uint64(_at(buf, i)) - _U48 <= _U9:
            return -1, 0.0
    elif 49 <= c <= 57:
        s = i
        i, w = _digits(buf, i, n, w)
        nd = i - s
    else:
        return -1, 0.0
    e = 0
    is_int = True
    if i < n and _at(buf, i) == 46:  # .
        is_int = False
        i += 1
        s = i
        if nd == 0:  # 0.000ddd: the zeros are not significant
            while i < n and _at(buf, i) == 48:
                i += 1
        z = i
        i, w = _digits(buf, i, n, w)
        if i == s:
            return -1, 0.0
        e = s - i
        nd += i - z
    if i < n and (_at(buf, i) == 101 or _at(buf, i) == 69):  # e E
        is_int = False
        i += 1
        eneg = False
        if i < n and (_at(buf, i) == 43 or _at(buf, i) == 45):
            eneg = _at(buf, i) == 45
            i += 1
        s = i
        x = 0
        while i < n:
            d = np.uint64(_at(buf, i)) - _U48
            if d > _U9:
                break
            x = x * 10 + int(d)
            if x >= 100000:
                # orjson reads it exactly (the fraction's leading zeros may offset it):
                # an exponent this long goes to the slow path, never saturated here
                return -1, 0.0
            i += 1
        if i == s:
            return -1, 0.0
        e = e - x if eneg else e + x
    if w == 0:
        if nd == 0:
            # orjson reads "-0" as the int 0 (then 0.0); "-0.0", "-0e1" as -0.0
            return i, (-0.0 if (neg and not is_int) else 0.0)
        return -1, 0.0  # 20+ digits that wrapped around to 0
    if nd > 19:  # w wrapped around
        return -1, 0.0
    if w <= _UTWO53 and -22 <= e <= 22:
        # Clinger: one correctly rounded operation on exact operands
        if e == 0:
            v = float(w)
        elif e > 0:
            v = float(w) * _POW10[e]
        else:
            v = float(w) / _POW10[-e]
    else:
        v = _eisel_lemire(w, e)
        if v != v:
            return -1, 0.0
    return i, (-v if neg else v)


_TWO53 = 2**53


@_inline
def _int_label(buf: _Buf, i: int, n: int) -> tuple[int, int]:
    """A JSON integer label within int64 at ``_at(buf, i)``, or a whole float below 2**53
    written with a fraction of zeros only (``1.0``): (index after it, value), or (-1, 0)
    (malformed, another fraction, an exponent, or out of range)."""
    neg = False
    if _at(buf, i) == 45:
        neg = True
        i += 1
    if i >= n:
        return -1, 0
    c = _at(buf, i)
    v = 0
    if c == 48:
        i += 1
    elif 49 <= c <= 57:
        nd = 0
        last = 0
        while i < n:
            c = _at(buf, i)
            if c < 48 or c > 57:
                break
            nd += 1
            if nd <= 18:
                v = v * 10 + (c - 48)
            elif nd == 19:
                last = c - 48
            else:
                return -1, 0
            i += 1
        if nd == 19:
            # v holds the first 18 digits; int64 is [-9223372036854775808, 9223372036854775807]
            if v > 922337203685477580 or (v == 922337203685477580 and last > (8 if neg else 7)):
                return -1, 0
            if neg:
                return i if _int_end_ok(buf, i, n) else -1, -(v * 10) - last
            return i if _int_end_ok(buf, i, n) else -1, v * 10 + last
    else:
        return -1, 0
    if i < n and _at(buf, i) == 46:
        # "1.0", "-3.00": a whole float below 2**53 is that integer (as check_label
        # reads orjson's float); "1.5", "1.0e0", "1.05" end at _int_end_ok below
        if v >= _TWO53:
            return -1, 0
        j = i + 1
        while j < n and _at(buf, j) == 48:
            j += 1
        if j == i + 1:  # "1." is not JSON
            return -1, 0
        i = j
    if not _int_end_ok(buf, i, n):
        return -1, 0
    return i, (-v if neg else v)


@_inline
def _int_end_ok(buf: _Buf, i: int, n: int) -> bool:
    # a fraction or exponent makes the label a float (refused); a digit after a
    # leading 0 is malformed
    if i < n:
        c = _at(buf, i)
        if c == 46 or c == 101 or c == 69 or (48 <= c <= 57):
            return False
    return True
