"""A numba scanner from the raw bytes of a dense ``POST /update`` body to a float64 matrix.

Reads exactly one shape of body::

    {"model": "adult", "examples": [{"x": [0.12345, -1.5, 3], "y": "s"}, {"x": [...], "y": 7}]}

and returns the model name, the ``(n, dim)`` matrix and the labels, bit for bit
what ``orjson.loads`` + ``np.array(xs, dtype=np.float64)`` would give. Anything
else (another key, a duplicate key, an escape in a string, a bool/null/float/empty
label, a number outside the exact fast path, ...) gives ``None`` and the caller
takes the orjson path, which also words the 4xx errors. The scanner never raises
on bad input.

Numbers are converted with Clinger's fast path only: the decimal significand ``w``
(at most 2**53) times or divided by an exact power of ten (at most 10**22), one
correctly rounded IEEE operation. Numbers needing more (over 15-16 significant
digits, like the ``repr`` of most random doubles, or exponents beyond +-22) send
the whole body to the slow path.

>>> r = scan_dense_examples(b'{"model": "m", "examples": [{"x": [1.5, -2], "y": "a"}]}', 2, 10)
>>> r.model, r.X.tolist(), r.labels
('m', [[1.5, -2.0]], ['a'])
>>> scan_dense_examples(b'{"model": "m", "examples": [{"x": [1.5], "y": "a"}]}', 2, 10) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["DenseExamples", "scan_dense_examples", "warmup"]


@dataclass(frozen=True, slots=True)
class DenseExamples:
    """A scanned body: ``X`` is float64, C-contiguous, shape ``(len(labels), dim)``."""

    model: str
    X: np.ndarray
    labels: list[str | int]


# 10**0 .. 10**22 are exact doubles (float() of an int rounds correctly).
_POW10 = np.array([float(10**k) for k in range(23)], dtype=np.float64)
_TWO53 = 2**53
# String labels compared against this many distinct earlier labels in the kernel;
# beyond that new labels are appended undeduplicated (the Python side still caches).
_MAX_DEDUP = 64

# key codes
_K_OTHER = 0
_K_MODEL = 1
_K_EXAMPLES = 2
_K_X = 3
_K_Y = 4


@numba.njit(cache=True, nogil=True)
def _ws(buf: np.ndarray, i: int, n: int) -> int:
    while i < n:
        c = buf[i]
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
        else:
            break
    return i


@numba.njit(cache=True, nogil=True)
def _string_end(buf: np.ndarray, i: int, n: int) -> int:
    """``buf[i]`` is just after an opening quote: the index of the closing quote,
    or -1 (end of input, a backslash escape or a control character)."""
    while i < n:
        c = buf[i]
        if c == 34:
            return i
        if c == 92 or c < 32:
            return -1
        i += 1
    return -1


@numba.njit(cache=True, nogil=True)
def _key(buf: np.ndarray, s: int, e: int) -> int:
    ln = e - s
    if ln == 1:
        if buf[s] == 120:  # x
            return _K_X
        if buf[s] == 121:  # y
            return _K_Y
        return _K_OTHER
    if ln == 5:  # model
        if (
            buf[s] == 109
            and buf[s + 1] == 111
            and buf[s + 2] == 100
            and buf[s + 3] == 101
            and buf[s + 4] == 108
        ):
            return _K_MODEL
        return _K_OTHER
    if (  # examples
        ln == 8
        and buf[s] == 101
        and buf[s + 1] == 120
        and buf[s + 2] == 97
        and buf[s + 3] == 109
        and buf[s + 4] == 112
        and buf[s + 5] == 108
        and buf[s + 6] == 101
        and buf[s + 7] == 115
    ):
        return _K_EXAMPLES
    return _K_OTHER


@numba.njit(cache=True, nogil=True)
def _number_checked(buf: np.ndarray, i: int, n: int) -> tuple[int, float]:
    """A strict JSON number at ``buf[i]``: (index after it, value), or (-1, 0.0)
    when it is malformed or outside the exact fast path. Digit by digit with an
    overflow check (for numbers of many digits; see :func:`_number`)."""
    pow10 = _POW10
    neg = False
    if i < n and buf[i] == 45:  # -
        neg = True
        i += 1
    if i >= n:
        return -1, 0.0
    c = buf[i]
    w = 0
    e = 0
    is_int = True
    if c == 48:  # 0: no more integer digits may follow
        i += 1
        if i < n and 48 <= buf[i] <= 57:
            return -1, 0.0
    elif 49 <= c <= 57:
        while i < n:
            c = buf[i]
            if c < 48 or c > 57:
                break
            w = w * 10 + (c - 48)
            if w > _TWO53:
                return -1, 0.0
            i += 1
    else:
        return -1, 0.0
    if i < n and buf[i] == 46:  # .
        is_int = False
        i += 1
        start = i
        while i < n:
            c = buf[i]
            if c < 48 or c > 57:
                break
            w = w * 10 + (c - 48)
            if w > _TWO53:
                return -1, 0.0
            e -= 1
            i += 1
        if i == start:
            return -1, 0.0
    if i < n and (buf[i] == 101 or buf[i] == 69):  # e E
        is_int = False
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        start = i
        x = 0
        while i < n:
            c = buf[i]
            if c < 48 or c > 57:
                break
            if x < 100000:
                x = x * 10 + (c - 48)
            i += 1
        if i == start:
            return -1, 0.0
        e = e - x if eneg else e + x
    if w == 0:
        # orjson reads "-0" as the int 0 (then 0.0); "-0.0", "-0e1" as -0.0
        return i, (-0.0 if (neg and not is_int) else 0.0)
    if e == 0:
        v = float(w)
    elif 0 < e <= 22:
        v = float(w) * pow10[e]
    elif -22 <= e < 0:
        v = float(w) / pow10[-e]
    elif e > 22:
        k = e - 22
        while k > 0:
            w *= 10
            if w > _TWO53:
                return -1, 0.0
            k -= 1
        v = float(w) * pow10[22]
    else:
        return -1, 0.0
    return i, (-v if neg else v)


@numba.njit(cache=True, nogil=True)
def _number(buf: np.ndarray, i: int, n: int) -> tuple[int, float]:
    """:func:`_number_checked` without a check per digit: up to 18 digits cannot
    overflow int64; longer numbers are read again by :func:`_number_checked`."""
    if i >= n:
        return -1, 0.0
    start = i
    neg = buf[i] == 45  # -
    if neg:
        i += 1
        if i >= n:
            return -1, 0.0
    c = int(buf[i]) - 48
    w = 0
    nd = 0
    if c == 0:
        i += 1
        if i < n and np.uint64(int(buf[i]) - 48) <= np.uint64(9):
            return -1, 0.0
    elif 0 < c <= 9:
        s = i
        while i < n:
            d = int(buf[i]) - 48
            if np.uint64(d) > np.uint64(9):
                break
            w = w * 10 + d
            i += 1
        nd = i - s
    else:
        return -1, 0.0
    e = 0
    is_int = True
    if i < n and buf[i] == 46:  # .
        is_int = False
        i += 1
        s = i
        while i < n:
            d = int(buf[i]) - 48
            if np.uint64(d) > np.uint64(9):
                break
            w = w * 10 + d
            i += 1
        e = s - i
        if e == 0:
            return -1, 0.0
        nd -= e
    if nd > 18:
        return _number_checked(buf, start, n)
    if i < n and (buf[i] == 101 or buf[i] == 69):  # e E
        is_int = False
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        s = i
        x = 0
        while i < n:
            d = int(buf[i]) - 48
            if np.uint64(d) > np.uint64(9):
                break
            if x < 100000:
                x = x * 10 + d
            i += 1
        if i == s:
            return -1, 0.0
        e = e - x if eneg else e + x
    if w == 0:
        # orjson reads "-0" as the int 0 (then 0.0); "-0.0", "-0e1" as -0.0
        return i, (-0.0 if (neg and not is_int) else 0.0)
    if w > _TWO53:
        return -1, 0.0
    if e == 0:
        v = float(w)
    elif 0 < e <= 22:
        v = float(w) * _POW10[e]
    elif -22 <= e < 0:
        v = float(w) / _POW10[-e]
    elif e > 22:
        k = e - 22
        while k > 0:
            w *= 10
            if w > _TWO53:
                return -1, 0.0
            k -= 1
        v = float(w) * _POW10[22]
    else:
        return -1, 0.0
    return i, (-v if neg else v)


@numba.njit(cache=True, nogil=True)
def _int_label(buf: np.ndarray, i: int, n: int) -> tuple[int, int]:
    """A JSON integer label within int64 at ``buf[i]``: (index after it, value),
    or (-1, 0) (malformed, a fraction/exponent, or out of range)."""
    neg = False
    if buf[i] == 45:
        neg = True
        i += 1
    if i >= n:
        return -1, 0
    c = buf[i]
    v = 0
    if c == 48:
        i += 1
    elif 49 <= c <= 57:
        nd = 0
        last = 0
        while i < n:
            c = buf[i]
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
    if not _int_end_ok(buf, i, n):
        return -1, 0
    return i, (-v if neg else v)


@numba.njit(cache=True, nogil=True)
def _int_end_ok(buf: np.ndarray, i: int, n: int) -> bool:
    # a fraction or exponent makes the label a float (refused); a digit after a
    # leading 0 is malformed
    if i < n:
        c = buf[i]
        if c == 46 or c == 101 or c == 69 or (48 <= c <= 57):
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _scan(
    buf: np.ndarray,
    dim: int,
    max_examples: int,
    X: np.ndarray,
    meta: np.ndarray,
    rcap: int,
) -> int:
    """Fill ``X`` (row-major) and ``meta``; return the number of examples, or 0 for
    "not the supported shape".

    ``meta``: [0:2] model name span, [2] number of distinct labels ``u``,
    [3:3+rcap] per-example index into the distinct labels,
    [3+rcap:3+rcap+3u] per distinct label (kind, a, b): kind 0 a string at
    ``raw[a:b]``, kind 1 the integer ``a``.
    """
    n = buf.shape[0]
    xcap = X.shape[0]
    codes0 = 3
    uniq0 = 3 + rcap
    nu = 0
    last = -1  # the distinct label of the previous example
    i = _ws(buf, 0, n)
    if i >= n or buf[i] != 123:
        return 0
    i += 1
    have_model = False
    have_examples = False
    rows = 0
    while True:
        i = _ws(buf, i, n)
        if i >= n or buf[i] != 34:
            return 0
        ke = _string_end(buf, i + 1, n)
        if ke < 0:
            return 0
        key = _key(buf, i + 1, ke)
        i = _ws(buf, ke + 1, n)
        if i >= n or buf[i] != 58:
            return 0
        i = _ws(buf, i + 1, n)
        if i >= n:
            return 0
        if key == _K_MODEL:
            if have_model or buf[i] != 34:
                return 0
            have_model = True
            se = _string_end(buf, i + 1, n)
            if se < 0:
                return 0
            meta[0] = i + 1
            meta[1] = se
            i = se + 1
        elif key == _K_EXAMPLES:
            if have_examples or buf[i] != 91:
                return 0
            have_examples = True
            i = _ws(buf, i + 1, n)
            if i >= n or buf[i] == 93:  # empty (or truncated)
                return 0
            while True:  # one example per iteration
                if rows >= max_examples or rows >= rcap or (rows + 1) * dim > xcap:
                    return 0
                if i >= n or buf[i] != 123:
                    return 0
                i += 1
                have_x = False
                have_y = False
                while True:  # one key per iteration
                    i = _ws(buf, i, n)
                    if i >= n or buf[i] != 34:
                        return 0
                    ke = _string_end(buf, i + 1, n)
                    if ke < 0:
                        return 0
                    key = _key(buf, i + 1, ke)
                    i = _ws(buf, ke + 1, n)
                    if i >= n or buf[i] != 58:
                        return 0
                    i = _ws(buf, i + 1, n)
                    if i >= n:
                        return 0
                    if key == _K_X:
                        if have_x or buf[i] != 91:
                            return 0
                        have_x = True
                        i = _ws(buf, i + 1, n)
                        base = rows * dim
                        if dim == 0 and (i >= n or buf[i] != 93):
                            return 0
                        for j in range(dim):
                            i, v = _number(buf, i, n)
                            if i < 0:
                                return 0
                            X[base + j] = v
                            i = _ws(buf, i, n)
                            if i >= n:
                                return 0
                            c = buf[i]
                            if j == dim - 1:
                                if c != 93:
                                    return 0
                            elif c != 44:
                                return 0
                            else:
                                i = _ws(buf, i + 1, n)
                        i += 1  # past ]
                    elif key == _K_Y:
                        if have_y:
                            return 0
                        have_y = True
                        c = buf[i]
                        if c == 34:
                            s = i + 1
                            se = _string_end(buf, s, n)
                            if se <= s:  # bad or empty
                                return 0
                            i = se + 1
                            ln = se - s
                            code = -1
                            # the previous example's label first, then the others
                            if last >= 0:
                                p = uniq0 + 3 * last
                                if meta[p] == 0 and meta[p + 2] - meta[p + 1] == ln:
                                    a = meta[p + 1]
                                    same = True
                                    for t in range(ln):
                                        if buf[a + t] != buf[s + t]:
                                            same = False
                                            break
                                    if same:
                                        code = last
                            if code < 0:
                                for u in range(min(nu, _MAX_DEDUP)):
                                    p = uniq0 + 3 * u
                                    if u == last or meta[p] != 0:
                                        continue
                                    if meta[p + 2] - meta[p + 1] != ln:
                                        continue
                                    a = meta[p + 1]
                                    same = True
                                    for t in range(ln):
                                        if buf[a + t] != buf[s + t]:
                                            same = False
                                            break
                                    if same:
                                        code = u
                                        break
                            if code < 0:
                                p = uniq0 + 3 * nu
                                meta[p] = 0
                                meta[p + 1] = s
                                meta[p + 2] = se
                                code = nu
                                nu += 1
                        elif c == 45 or (48 <= c <= 57):
                            i, val = _int_label(buf, i, n)
                            if i < 0:
                                return 0
                            code = -1
                            for u in range(min(nu, _MAX_DEDUP)):
                                p = uniq0 + 3 * u
                                if meta[p] == 1 and meta[p + 1] == val:
                                    code = u
                                    break
                            if code < 0:
                                p = uniq0 + 3 * nu
                                meta[p] = 1
                                meta[p + 1] = val
                                meta[p + 2] = 0
                                code = nu
                                nu += 1
                        else:
                            return 0
                        meta[codes0 + rows] = code
                        last = code
                    else:
                        return 0
                    i = _ws(buf, i, n)
                    if i >= n:
                        return 0
                    c = buf[i]
                    i += 1
                    if c == 125:  # }
                        break
                    if c != 44:
                        return 0
                if not (have_x and have_y):
                    return 0
                rows += 1
                i = _ws(buf, i, n)
                if i >= n:
                    return 0
                c = buf[i]
                if c == 93:  # ]
                    i += 1
                    break
                if c != 44:
                    return 0
                i = _ws(buf, i + 1, n)
        else:
            return 0
        i = _ws(buf, i, n)
        if i >= n:
            return 0
        c = buf[i]
        i += 1
        if c == 125:
            break
        if c != 44:
            return 0
    if not (have_model and have_examples):
        return 0
    if _ws(buf, i, n) != n:
        return 0
    meta[2] = nu
    return rows


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


def scan_dense_examples(raw: bytes, dim: int, max_examples: int) -> DenseExamples | None:
    """The body's model, ``(n, dim)`` float64 matrix and labels, or ``None`` when
    ``raw`` is not exactly the supported shape (see the module docstring)."""
    size = len(raw)
    if size < 20 or dim < 0 or max_examples < 1:
        return None
    # every value takes a digit and a separator, every example > 8 bytes
    xcap = min(max_examples * dim, size // 2 + 1)
    rcap = min(max_examples, size // 8 + 1)
    X = np.empty(xcap, np.float64)
    meta = np.empty(3 + 4 * rcap, np.int64)
    rows = _scan(np.frombuffer(raw, np.uint8), dim, max_examples, X, meta, rcap)
    if rows <= 0:
        return None
    model = _decode(raw[meta[0] : meta[1]])
    if model is None:
        return None
    nu = int(meta[2])
    u0 = 3 + rcap
    spec = meta[u0 : u0 + 3 * nu].tolist()
    uniq: list[str | int] = []
    for k in range(0, 3 * nu, 3):
        if spec[k] == 0:
            s = _decode(raw[spec[k + 1] : spec[k + 2]])
            if s is None:
                return None
            uniq.append(s)
        else:
            uniq.append(spec[k + 1])
    # one distinct label: no per-example lookup
    labels = uniq * rows if nu == 1 else list(map(uniq.__getitem__, meta[3 : 3 + rows].tolist()))
    return DenseExamples(model, X[: rows * dim].reshape(rows, dim), labels)


def warmup() -> None:
    """Compile (or load from numba's disk cache) the scanner before taking traffic."""
    body = b'{"model": "m", "examples": [{"x": [1.5, -2], "y": "a"}, {"y": 3, "x": [0, 1e3]}]}'
    scan_dense_examples(body, 2, 10)
