"""A numba scanner from the raw bytes of a dense ``POST /update`` body to a float64 matrix.

Reads exactly one shape of body::

    {"model": "adult", "examples": [{"x": [0.12345, -1.5, 3], "y": "s"}, {"x": [...], "y": 7}]}

and returns the model name, the ``(n, dim)`` matrix and the labels, bit for bit
what ``orjson.loads`` + ``np.array(xs, dtype=np.float64)`` would give (a label
written ``1.0`` as the integer ``1``, as ``learners.base.check_label`` reads it).
An example may also carry ``"weight"``: a number > 0 within the fast paths below, read
into ``DenseExamples.weights`` (a weight that is 0, negative, not a number or outside
the fast paths goes to the orjson path, which refuses or reads it).
Anything else (another key, a duplicate key, an escape in a string, a
bool/null/empty label, a float label other than a whole number written ``1.0``, a
number outside the exact fast path, ...) gives ``None`` and the caller takes the
orjson path, which also words the 4xx errors. The scanner never raises on bad
input.

Numbers are converted with Clinger's fast path when it applies (a decimal
significand ``w`` of at most 2**53 times or divided by an exact power of ten, at
most 10**22: one correctly rounded IEEE operation), else with Eisel-Lemire (``w``
of up to 19 digits times a 128-bit power of five; see :func:`_eisel_lemire`), so
the ``repr`` of any normal double takes the fast path. The whole body goes to the
slow path for a number of more than 19 significant digits, a subnormal or
non-finite result, or one of the rare products Eisel-Lemire leaves undecided.

>>> r = scan_dense_examples(b'{"model": "m", "examples": [{"x": [1.5, -2], "y": "a"}]}', 2, 10)
>>> r.model, r.X.tolist(), r.labels
('m', [[1.5, -2.0]], ['a'])
>>> scan_dense_examples(b'{"model": "m", "examples": [{"x": [1.5], "y": "a"}]}', 2, 10) is None
True
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numba
import numpy as np

__all__ = ["DenseExamples", "scan_dense_examples", "warmup"]


class DenseExamples(NamedTuple):
    """A scanned body: ``X`` is float64, C-contiguous, shape ``(len(labels), dim)``;
    ``weights`` one per example when any example has a ``weight`` (else ``None``)."""

    model: str
    X: np.ndarray
    labels: list[str | int]
    weights: list[float] | None = None


# Kernels allocate nothing, so they run without numba's reference counting (NRT):
# with it, every call of a helper increfs and decrefs the buffers (atomic
# operations, a good part of the time per number). The helpers are inlined into
# the kernel at numba IR level. ``_nrt`` is a private numba option (present from
# 0.59 to at least 0.68): where a numba lacks it, the kernels run with NRT, slower.
try:
    from numba.core.options import DefaultOptions

    _NO_NRT: dict[str, Any] = {"_nrt": False} if hasattr(DefaultOptions, "_nrt") else {}
except ImportError:  # pragma: no cover - a numba without the options module
    _NO_NRT = {}
_kernel: Any = numba.njit(cache=True, nogil=True, **_NO_NRT)
_inline: Any = numba.njit(cache=True, nogil=True, inline="always", **_NO_NRT)

# the kernels read a bytes object (the service) or a uint8 array (tests)
_Buf = np.ndarray | bytes

# 10**0 .. 10**22 are exact doubles (float() of an int rounds correctly).
_POW10 = np.array([float(10**k) for k in range(23)], dtype=np.float64)
# String labels compared against this many distinct earlier labels in the kernel;
# beyond that new labels are appended undeduplicated (the Python side still caches).
_MAX_DEDUP = 64

# key codes
_K_OTHER = 0
_K_MODEL = 1
_K_EXAMPLES = 2
_K_X = 3
_K_Y = 4
_K_WEIGHT = 6  # an example's optional importance weight (service.models.example_weights)


@_inline
def _at(buf: _Buf, i: int) -> int:
    """``buf[i]`` for ``0 <= i < len(buf)``: an unsigned index spares the test for
    a negative index (wraparound) that numba adds to every signed one."""
    return buf[np.uint64(i)]


@_inline
def _ws(buf: _Buf, i: int, n: int) -> int:
    while i < n:
        c = _at(buf, i)
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
        else:
            break
    return i


@_inline
def _string_end(buf: _Buf, i: int, n: int) -> int:
    """``_at(buf, i)`` is just after an opening quote: the index of the closing quote,
    or -1 (end of input, a backslash escape or a control character)."""
    while i < n:
        c = _at(buf, i)
        if c == 34:
            return i
        if c == 92 or c < 32:
            return -1
        i += 1
    return -1


@_inline
def _key(buf: _Buf, s: int, e: int) -> int:
    ln = e - s
    if ln == 1:
        if _at(buf, s) == 120:  # x
            return _K_X
        if _at(buf, s) == 121:  # y
            return _K_Y
        return _K_OTHER
    if (  # weight
        ln == 6
        and _at(buf, s) == 119
        and _at(buf, s + 1) == 101
        and _at(buf, s + 2) == 105
        and _at(buf, s + 3) == 103
        and _at(buf, s + 4) == 104
        and _at(buf, s + 5) == 116
    ):
        return _K_WEIGHT
    if ln == 5:  # model
        if (
            _at(buf, s) == 109
            and _at(buf, s + 1) == 111
            and _at(buf, s + 2) == 100
            and _at(buf, s + 3) == 101
            and _at(buf, s + 4) == 108
        ):
            return _K_MODEL
        return _K_OTHER
    if (  # examples
        ln == 8
        and _at(buf, s) == 101
        and _at(buf, s + 1) == 120
        and _at(buf, s + 2) == 97
        and _at(buf, s + 3) == 109
        and _at(buf, s + 4) == 112
        and _at(buf, s + 5) == 108
        and _at(buf, s + 6) == 101
        and _at(buf, s + 7) == 115
    ):
        return _K_EXAMPLES
    return _K_OTHER


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
_UMANT = np.uint64((1 << 52) - 1)


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


@_inline
def _same_bytes(buf: _Buf, a: int, b: int, ln: int) -> bool:
    for t in range(ln):  # noqa: SIM110 - a loop numba compiles well
        if _at(buf, a + t) != _at(buf, b + t):
            return False
    return True


@_inline
def _member(buf: _Buf, i: int, n: int) -> tuple[int, int]:
    """At an object member (after whitespace): (its key's code, the index of its value,
    past the colon and whitespace), or (0, -1) when malformed or cut short."""
    if i >= n or _at(buf, i) != 34:
        return 0, -1
    ke = _string_end(buf, i + 1, n)
    if ke < 0:
        return 0, -1
    key = _key(buf, i + 1, ke)
    i = _ws(buf, ke + 1, n)
    if i >= n or _at(buf, i) != 58:
        return 0, -1
    i = _ws(buf, i + 1, n)
    if i >= n:
        return 0, -1
    return key, i


@_inline
def _after_member(buf: _Buf, i: int, n: int) -> tuple[int, bool]:
    """After a member's value: (the index past the ``,`` or ``}``, whether it was the
    closing brace), or (-1, False)."""
    i = _ws(buf, i, n)
    if i >= n:
        return -1, False
    c = _at(buf, i)
    if c == 125:  # }
        return i + 1, True
    if c != 44:
        return -1, False
    return i + 1, False


@_inline
def _after_element(buf: _Buf, i: int, n: int) -> tuple[int, bool]:
    """After an array element: (the index of the next element, past the ``,`` and
    whitespace, or past the ``]``; whether it was the closing bracket), or (-1, False)."""
    i = _ws(buf, i, n)
    if i >= n:
        return -1, False
    c = _at(buf, i)
    if c == 93:  # ]
        return i + 1, True
    if c != 44:
        return -1, False
    return _ws(buf, i + 1, n), False


@_inline
def _label(
    buf: _Buf, i: int, n: int, meta: np.ndarray, uniq0: int, nu: int, last: int
) -> tuple[int, int, int]:
    """The label at ``buf[i]``: (the index after it or -1, its code in the table of
    distinct labels ``meta[uniq0:]`` (kind, a, b per label: kind 0 a string at
    ``buf[a:b]``, kind 1 the integer ``a``), the table's new size). The previous
    example's label (``last``) is tried first: labels come in runs."""
    c = _at(buf, i)
    if c == 34:
        s = i + 1
        se = _string_end(buf, s, n)
        if se <= s:  # bad or empty
            return -1, 0, nu
        ln = se - s
        if last >= 0:
            p = uniq0 + 3 * last
            if (
                meta[p] == 0
                and meta[p + 2] - meta[p + 1] == ln
                and _same_bytes(buf, meta[p + 1], s, ln)
            ):
                return se + 1, last, nu
        for u in range(min(nu, _MAX_DEDUP)):
            p = uniq0 + 3 * u
            if u == last or meta[p] != 0 or meta[p + 2] - meta[p + 1] != ln:
                continue
            if _same_bytes(buf, meta[p + 1], s, ln):
                return se + 1, u, nu
        p = uniq0 + 3 * nu
        meta[p] = 0
        meta[p + 1] = s
        meta[p + 2] = se
        return se + 1, nu, nu + 1
    if c == 45 or (48 <= c <= 57):
        i, val = _int_label(buf, i, n)
        if i < 0:
            return -1, 0, nu
        for u in range(min(nu, _MAX_DEDUP)):
            p = uniq0 + 3 * u
            if meta[p] == 1 and meta[p + 1] == val:
                return i, u, nu
        p = uniq0 + 3 * nu
        meta[p] = 1
        meta[p + 1] = val
        meta[p + 2] = 0
        return i, nu, nu + 1
    return -1, 0, nu


@_inline
def _weight(
    buf: _Buf, i: int, n: int, have_w: bool, W: np.ndarray, row: int, nw: int
) -> tuple[int, bool, int]:
    """An example's ``weight`` at ``buf[i]``: (index after it or -1, True, examples with a
    weight so far). -1 for a repeated key or a value that is not a finite number > 0
    (the general path then words the 422)."""
    if have_w:
        return -1, True, nw
    i, v = _number(buf, i, n)
    if i < 0 or not v > 0.0:  # _number gives finite values only
        return -1, True, nw
    W[row] = v
    return i, True, nw + 1


@_kernel
def _scan(
    buf: _Buf,
    dim: int,
    max_examples: int,
    xrows: int,
    X: np.ndarray,
    meta: np.ndarray,
    W: np.ndarray,
) -> tuple[int, int, int, int, int]:
    """Fill ``X`` (``xrows`` rows of ``dim``, row-major), ``meta`` and ``W`` (each
    example's ``weight``, 1.0 when absent); return (number of examples, start and end
    of the model name, number of distinct labels ``u``, number of examples with a
    weight), the number of examples 0 for "not the supported shape".

    ``meta``: [0:rcap] per-example index into the distinct labels,
    [rcap:rcap+3u] per distinct label (kind, a, b): kind 0 a string at
    ``raw[a:b]``, kind 1 the integer ``a``; ``rcap = len(meta) // 4``.
    """
    n = len(buf)
    rcap = meta.shape[0] // 4
    codes0 = 0
    uniq0 = rcap
    fail = (0, 0, 0, 0, 0)
    ms = 0
    me = 0
    nu = 0
    nw = 0
    last = -1  # the distinct label of the previous example
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
            if i >= n or _at(buf, i) == 93:  # empty (or truncated)
                return fail
            while True:  # one example per iteration
                if rows >= max_examples or rows >= rcap or rows >= xrows:
                    return fail
                if i >= n or _at(buf, i) != 123:
                    return fail
                i += 1
                have_x = False
                have_y = False
                have_w = False
                W[rows] = 1.0
                while True:  # one key per iteration
                    key, i = _member(buf, _ws(buf, i, n), n)
                    if i < 0:
                        return fail
                    if key == _K_X:
                        if have_x or _at(buf, i) != 91:
                            return fail
                        have_x = True
                        i = _ws(buf, i + 1, n)
                        base = rows * dim
                        if dim == 0 and (i >= n or _at(buf, i) != 93):
                            return fail
                        for j in range(dim):
                            i, v = _number(buf, i, n)
                            if i < 0:
                                return fail
                            X[base + j] = v
                            i = _ws(buf, i, n)
                            if i >= n:
                                return fail
                            c = _at(buf, i)
                            if j == dim - 1:
                                if c != 93:
                                    return fail
                            elif c != 44:
                                return fail
                            else:
                                i = _ws(buf, i + 1, n)
                        i += 1  # past ]
                    elif key == _K_Y:
                        if have_y:
                            return fail
                        have_y = True
                        i, code, nu = _label(buf, i, n, meta, uniq0, nu, last)
                        if i < 0:
                            return fail
                        meta[codes0 + rows] = code
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
    return rows, ms, me, nu, nw


_scratch = threading.local()
_new_dense = tuple.__new__  # DenseExamples without its keyword-parsing __new__

# raw label/model bytes -> str, shared by all requests (a few distinct labels)
_decoded: dict[bytes, str] = {}


def _decode(b: bytes) -> str | None:
    s = _decoded.get(b)
    if s is None:
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if len(_decoded) >= 4096:
            _decoded.clear()
        _decoded[b] = s
    return s


def label_scratch(rcap: int) -> np.ndarray:
    """The scanners' label table for up to ``rcap`` examples: a per-thread scratch array
    (read before the thread's next scan), fresh when too small or a very big body's."""
    meta = getattr(_scratch, "meta", None)
    if meta is None or len(meta) < 4 * rcap:
        meta = np.empty(4 * max(rcap, 64), np.int64)
        if rcap <= 4096:
            _scratch.meta = meta
    return meta


def weight_scratch(rcap: int) -> np.ndarray:
    """The scanners' per-example weights for up to ``rcap`` examples (per-thread scratch,
    read before the thread's next scan)."""
    W = getattr(_scratch, "weights", None)
    if W is None or len(W) < rcap:
        W = np.empty(max(rcap, 64), np.float64)
        if rcap <= 4096:
            _scratch.weights = W
    return W


def model_and_labels(
    raw: bytes, meta: np.ndarray, rows: int, ms: int, me: int, nu: int
) -> tuple[str, list[str | int]] | None:
    """The model name ``raw[ms:me]`` and the ``rows`` labels a scanner's table
    ``meta`` describes (see ``_scan``), decoded; ``None`` for invalid UTF-8."""
    b = raw[ms:me]
    model = _decoded.get(b) or _decode(b)
    if model is None:
        return None
    rcap = len(meta) // 4
    spec = meta[rcap : rcap + 3 * nu].tolist()
    uniq: list[str | int] = []
    for k in range(0, 3 * nu, 3):
        if spec[k] == 0:
            b = raw[spec[k + 1] : spec[k + 2]]
            y = _decoded.get(b) or _decode(b)
            if y is None:
                return None
            uniq.append(y)
        else:
            uniq.append(spec[k + 1])
    # one distinct label: no per-example lookup
    labels = uniq * rows if nu == 1 else list(map(uniq.__getitem__, meta[:rows].tolist()))
    return model, labels


def scan_dense_examples(raw: bytes, dim: int, max_examples: int) -> DenseExamples | None:
    """The body's model, ``(n, dim)`` float64 matrix and labels, or ``None`` when
    ``raw`` is not exactly the supported shape (see the module docstring)."""
    size = len(raw)
    if size < 20 or dim < 0 or max_examples < 1:
        return None
    # every example takes > 8 bytes, every value a digit and a separator
    rcap = min(max_examples, size // 8 + 1)
    xrows = min(rcap, size // (2 * dim) + 1) if dim else rcap
    X = np.empty(xrows * dim, np.float64)
    meta = label_scratch(rcap)
    W = weight_scratch(rcap)
    rows, ms, me, nu, nw = _scan(raw, dim, max_examples, xrows, X, meta, W)
    if rows <= 0:
        return None
    named = model_and_labels(raw, meta, rows, ms, me, nu)
    if named is None:
        return None
    model, labels = named
    weights = W[:rows].tolist() if nw else None
    return _new_dense(DenseExamples, (model, X[: rows * dim].reshape(rows, dim), labels, weights))


def warmup() -> None:
    """Compile (or load from numba's disk cache) the scanner before taking traffic."""
    body = (
        b'{"model": "m", "examples": [{"x": [1.5, -2], "y": "a"}, '
        b'{"y": 3, "weight": 2, "x": [0, 1e3]}]}'
    )
    scan_dense_examples(body, 2, 10)
