"""What the numba JSON scanners read around an example's features, the same for dense
(:mod:`service.models.fast_json`) and sparse/hashed (:mod:`service.models.fast_json_maps`)
bodies: the body object with its ``model`` name and ``examples`` array, and each example's
``y`` and optional ``weight``; then, in Python, the model name and labels decoded from the
table the kernels leave, and the per-thread scratch arrays they fill.

The kernel helpers return -1 (as the index) for "not the supported shape" and never raise;
they are inlined into the kernels at numba IR level. numba's on-disk cache of a kernel
follows every module it inlines (``learners._kernel_cache``).
"""

from __future__ import annotations

import threading

import numpy as np

from service.models.json_scan_bytes import (
    _K_MODEL,
    _at,
    _Buf,
    _inline,
    _kernel,
    _member,
    _same_bytes,
    _string_end,
    _ws,
)
from service.models.json_scan_numbers import _int_label, _number

# String labels compared against this many distinct earlier labels in the kernel;
# beyond that new labels are appended undeduplicated (the Python side still caches).
_MAX_DEDUP = 64


@_inline
def _body_start(buf: _Buf, n: int) -> int:
    """The index just past the body's opening brace, or -1."""
    i = _ws(buf, 0, n)
    if i >= n or _at(buf, i) != 123:
        return -1
    return i + 1


@_inline
def _model_value(buf: _Buf, i: int, n: int, have_model: bool) -> tuple[int, int, int]:
    """The ``model`` member's value at ``buf[i]``: (the index after it, the start and end
    of the name), or (-1, 0, 0) for a repeated member or a value that is not an
    escape-free string."""
    if have_model or _at(buf, i) != 34:
        return -1, 0, 0
    se = _string_end(buf, i + 1, n)
    if se < 0:
        return -1, 0, 0
    return se + 1, i + 1, se


@_inline
def _examples_start(buf: _Buf, i: int, n: int, have_examples: bool) -> int:
    """The ``examples`` member's value at ``buf[i]``: the index of its first element, or
    -1 for a repeated member, a value that is not an array, an empty array or a body cut
    short."""
    if have_examples or _at(buf, i) != 91:
        return -1
    i = _ws(buf, i + 1, n)
    if i >= n or _at(buf, i) == 93:  # empty (or truncated)
        return -1
    return i


@_inline
def _example_label(
    buf: _Buf,
    i: int,
    n: int,
    have_y: bool,
    meta: np.ndarray,
    row: int,
    uniq0: int,
    nu: int,
    last: int,
) -> tuple[int, int, int]:
    """Example ``row``'s ``y`` at ``buf[i]``, its code stored in ``meta[row]``: as
    :func:`_label`, and -1 for a repeated ``y``."""
    if have_y:
        return -1, last, nu
    i, code, nu = _label(buf, i, n, meta, uniq0, nu, last)
    if i >= 0:
        meta[row] = code
    return i, code, nu


@_inline
def _label(
    buf: _Buf, i: int, n: int, meta: np.ndarray, uniq0: int, nu: int, last: int
) -> tuple[int, int, int]:
    """The label at ``buf[i]``: (the index after it or -1, its code in the table of
    distinct labels ``meta[uniq0:]`` (kind, a, b per label: kind 0 a string at
    ``buf[a:b]``, kind 1 the integer ``a``, kind 2 another JSON number written at
    ``buf[a:b]``, not deduplicated), the table's new size). The previous example's label
    (``last``) is tried first: labels come in runs."""
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
        j, val = _int_label(buf, i, n)
        if j < 0:
            # another number (a fraction, an exponent): kept as its text, kind 2, for
            # the Python side to read (a regressor's target; a classifier's general path)
            j = _number_end(buf, i, n)
            if j < 0:
                return -1, 0, nu
            p = uniq0 + 3 * nu
            meta[p] = 2
            meta[p + 1] = i
            meta[p + 2] = j
            return j, nu, nu + 1
        i = j
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


@_kernel
def _number_end(buf: _Buf, i: int, n: int) -> int:
    """The index after the JSON number at ``buf[i]``, or -1: compiled once and called
    (a label that is no int64 is rare; inlined into every scanner's label reader it
    added about 170 MB to each scanner family's compile)."""
    return _number(buf, i, n)[0]


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


@_inline
def _model_member(buf: _Buf, i: int, n: int, have_model: bool) -> tuple[int, int, int]:
    """A member at ``buf[i]`` that must be ``"model"``: (the index past its value, start
    and end of the name), or (-1, 0, 0) for another key or anything ``_model_value``
    refuses (the instance scanners' only member besides ``instances``)."""
    key, i = _member(buf, i, n)
    if i < 0 or key != _K_MODEL:
        return -1, 0, 0
    return _model_value(buf, i, n, have_model)


@_inline
def _dense_values(buf: _Buf, i: int, n: int, X: np.ndarray, base: int, dim: int) -> int:
    """The ``dim`` numbers of a dense row's array, its ``[`` at ``buf[i]``, into
    ``X[base : base + dim]``: the index past its ``]``, or -1 for anything else (another
    length, a value the exact number path does not take, a body cut short)."""
    if i >= n or _at(buf, i) != 91:
        return -1
    i = _ws(buf, i + 1, n)
    if dim == 0:
        return i + 1 if i < n and _at(buf, i) == 93 else -1
    for j in range(dim):
        i, v = _number(buf, i, n)
        if i < 0:
            return -1
        X[base + j] = v
        i = _ws(buf, i, n)
        if i >= n:
            return -1
        c = _at(buf, i)
        if j == dim - 1:
            if c != 93:
                return -1
        elif c != 44:
            return -1
        else:
            i = _ws(buf, i + 1, n)
    return i + 1


@_inline
def _body_complete(buf: _Buf, i: int, n: int, have_model: bool, have_examples: bool) -> bool:
    """At ``buf[i]``, just past the body's closing brace: it had both members and only
    whitespace follows."""
    return have_model and have_examples and _ws(buf, i, n) == n


# ---------------------------------------------------------------- Python side

_scratch = threading.local()

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
) -> tuple[str, list[str | int | float]] | None:
    """The model name ``raw[ms:me]`` and the ``rows`` labels a scanner's table
    ``meta`` describes, decoded; ``None`` for invalid UTF-8. ``meta[:rcap]`` holds each
    example's code, ``meta[rcap:rcap+3*nu]`` the distinct labels as :func:`_label` stores
    them (``rcap = len(meta) // 4``)."""
    b = raw[ms:me]
    model = _decoded.get(b) or _decode(b)
    if model is None:
        return None
    rcap = len(meta) // 4
    spec = meta[rcap : rcap + 3 * nu].tolist()
    uniq: list[str | int | float] = []
    for k in range(0, 3 * nu, 3):
        if spec[k] == 0:
            b = raw[spec[k + 1] : spec[k + 2]]
            y = _decoded.get(b) or _decode(b)
            if y is None:
                return None
            uniq.append(y)
        elif spec[k] == 2:  # a number's text: float() reads it as orjson does
            uniq.append(float(raw[spec[k + 1] : spec[k + 2]]))
        else:
            uniq.append(spec[k + 1])
    # one distinct label: no per-example lookup
    labels = uniq * rows if nu == 1 else list(map(uniq.__getitem__, meta[:rows].tolist()))
    return model, labels
