"""A numba scanner from the raw bytes of a batch model's sparse ``POST /predict`` body
to the CSR batch its adapter would build (issue 21: a 1,000-document body was ~8 ms of
orjson and a Python dict per document before the model scored it in <1 ms).

Reads exactly one shape of body::

    {"model": "lm", "instances": [{"x": {"1": 0.25, "17": -3}}, ...]}

``model`` and ``instances`` once each, in either order, nothing else; every instance an
object with one member, ``x``, a non-empty object of sparse features: keys canonical
decimal integers (no sign, whitespace or leading zero) in ``[base, dim + base)``, shifted
by ``-base`` (LambdaMART's ``index_base``), each at most once per row, values numbers
within the exact fast paths of :mod:`service.models.json_scan_numbers` (so every value
is the double orjson reads). At most ``max_rows`` instances of at most ``max_features``
features. Anything else (``k``, ``min_version``, ``queries``, ``id``, dense rows, an
empty row, a key out of range, a value that is not a plain number, ...) gives ``None``,
and the caller takes the general path, which also words the 4xx errors. Each row comes
out sorted by index, the canonical form the encoders give (its keys are distinct, so
the batch is theirs bit for bit).

>>> r = scan_sparse_instances(
...     b'{"model": "m", "instances": [{"x": {"3": 1.5, "1": -2}}, {"x": {"4": 1}}]}',
...     4, 1, 10, 10)
>>> r[0], r[1].indptr.tolist(), r[1].indices.tolist(), r[1].values.tolist(), r[1].dim
('m', [0, 2, 3], [0, 2, 3], [-2.0, 1.5, 1.0], 4)
"""

from __future__ import annotations

import threading

import numpy as np

from learners.csr_batch import Batch, canonical_rows
from service.models.json_scan_bytes import (
    _K_X,
    _after_element,
    _after_member,
    _at,
    _Buf,
    _inline,
    _kernel,
    _member,
    _string_end,
    _ws,
)
from service.models.json_scan_envelope import _body_complete, _body_start, _model_member
from service.models.json_scan_keys import _new_in_row, _sparse_index
from service.models.json_scan_numbers import _number

__all__ = ["scan_sparse_instances", "warmup"]

_INSTANCES = np.frombuffer(b'"instances"', dtype=np.uint8)
# Features of one row the scanner takes (a longer row goes the general way), as in
# fast_json_maps: the per-row duplicate table stays a small reused scratch.
_ROW_CAP = 1 << 13
_scratch = threading.local()


def _table(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per-thread scratch for ``size`` (<= _ROW_CAP) features per row: (rowkeys, tstamp,
    tpos, the first stamp of this call). Stamps only grow: the table needs no clearing."""
    tsize = 1 << max(4, (2 * size - 1).bit_length())
    t = getattr(_scratch, "table", None)
    if t is None or t[1].shape[0] < tsize or t[0].shape[0] < 3 * size:
        t = _scratch.table = (
            np.empty(3 * size, np.int64), np.zeros(tsize, np.int64), np.empty(tsize, np.int64)
        )  # fmt: skip
        _scratch.stamp = 1
    return t[0], t[1], t[2], _scratch.stamp


@_inline
def _is_instances(buf: _Buf, i: int, n: int, word: np.ndarray) -> bool:
    """``buf[i:]`` starts with the key ``"instances"`` (quotes included)."""
    m = word.shape[0]
    if i + m > n:
        return False
    for t in range(m):  # noqa: SIM110 -- numba: no generator in a kernel
        if _at(buf, i + t) != word[t]:
            return False
    return True


@_inline
def _instances_array(buf: _Buf, i: int, n: int, word: np.ndarray) -> int:
    """At the key ``"instances"`` (``buf[i:]`` starts with it): the index of its array's
    first element, or -1 for a value that is not an array, an empty array (the general
    path says so) or a body cut short."""
    i = _ws(buf, i + word.shape[0], n)
    if i >= n or _at(buf, i) != 58:
        return -1
    i = _ws(buf, i + 1, n)
    if i >= n or _at(buf, i) != 91:
        return -1
    i = _ws(buf, i + 1, n)
    if i >= n or _at(buf, i) == 93:
        return -1
    return i


@_kernel
def _scan(
    buf: _Buf,
    dim: int,
    base: int,
    max_rows: int,
    max_features: int,
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    rowkeys: np.ndarray,
    tstamp: np.ndarray,
    tpos: np.ndarray,
    stamp0: int,
    word: np.ndarray,
) -> tuple[int, int, int, int, bool]:
    """Fill ``indptr`` (``rows + 1``), ``indices``/``values`` (``nnz``, each row in body
    order); return (rows, nnz, start and end of the model name, whether some row is not
    in increasing order), rows 0 for "not the shape"."""
    n = len(buf)
    rcap = indptr.shape[0] - 1
    cap = indices.shape[0]
    rowcap = rowkeys.shape[0] // 3
    tmask = np.uint64(tstamp.shape[0] - 1)
    fail = (0, 0, 0, 0, False)
    unsorted = False
    ms = 0
    me = 0
    nnz = 0
    rows = 0
    indptr[0] = 0
    i = _body_start(buf, n)
    if i < 0:
        return fail
    have_model = False
    have_instances = False
    while True:
        i = _ws(buf, i, n)
        if i < n and _is_instances(buf, i, n, word):
            if have_instances:
                return fail
            have_instances = True
            i = _instances_array(buf, i, n, word)
            if i < 0:
                return fail
            while True:  # one instance per iteration
                if rows >= max_rows or rows >= rcap:
                    return fail
                if i >= n or _at(buf, i) != 123:
                    return fail
                key, i = _member(buf, _ws(buf, i + 1, n), n)
                if i < 0 or key != _K_X or _at(buf, i) != 123:
                    return fail
                i = _ws(buf, i + 1, n)
                if i >= n or _at(buf, i) == 125:  # {}: the general path decides
                    return fail
                stamp = stamp0 + rows
                prev = -1
                k = 0
                while True:  # one feature per iteration
                    if i >= n or _at(buf, i) != 34:
                        return fail
                    if k >= max_features or k >= rowcap or nnz >= cap:
                        return fail
                    ks = i + 1
                    ke = _string_end(buf, ks, n)
                    if ke < 0:
                        return fail
                    j = _sparse_index(buf, ks, ke, dim + base)
                    if j < base:  # -1 (not canonical, too large) or below the base
                        return fail
                    h = np.uint64(j)
                    if not _new_in_row(
                        buf, False, h, ks, ke, k, stamp, rowkeys, tstamp, tpos, tmask
                    ):
                        return fail
                    i = _ws(buf, ke + 1, n)
                    if i >= n or _at(buf, i) != 58:
                        return fail
                    i = _ws(buf, i + 1, n)
                    if i >= n:
                        return fail
                    c = _at(buf, i)
                    if not (c == 45 or (48 <= c <= 57)):
                        return fail
                    i, v = _number(buf, i, n)
                    if i < 0:
                        return fail
                    indices[nnz] = j - base
                    values[nnz] = v
                    if j < prev:
                        unsorted = True
                    prev = j
                    nnz += 1
                    k += 1
                    i = _ws(buf, i, n)
                    if i >= n:
                        return fail
                    c = _at(buf, i)
                    i = _ws(buf, i + 1, n)
                    if c == 125:  # } of x
                        break
                    if c != 44:
                        return fail
                rows += 1
                indptr[rows] = nnz
                # the instance's closing brace: "x" was its only member
                if i >= n or _at(buf, i) != 125:
                    return fail
                i, closed = _after_element(buf, i + 1, n)
                if i < 0:
                    return fail
                if closed:
                    break
        else:
            i, ms, me = _model_member(buf, i, n, have_model)
            if i < 0:
                return fail
            have_model = True
        i, closed = _after_member(buf, i, n)
        if i < 0:
            return fail
        if closed:
            break
    if not _body_complete(buf, i, n, have_model, have_instances):
        return fail
    return rows, nnz, ms, me, unsorted


def scan_sparse_instances(
    raw: bytes, dim: int, base: int, max_rows: int, max_features: int
) -> tuple[str, Batch] | None:
    """The body's model and batch (``dim`` columns, keys shifted by ``-base``), or
    ``None`` when ``raw`` is not exactly the supported shape (module docstring)."""
    size = len(raw)
    if size < 30 or dim < 1 or base < 0 or dim + base > 1 << 31 or max_rows < 1:
        return None
    if max_features < 1:
        return None
    rcap = min(max_rows, size // 12 + 1)  # an instance takes >= 12 bytes ({"x":{"0":0}})
    cap = size // 5 + 1  # a feature ("0":0 and a separator) >= 5
    rowcap = min(max_features, cap, _ROW_CAP)
    indptr = np.empty(rcap + 1, np.int64)
    indices = np.empty(cap, np.int64)
    values = np.empty(cap, np.float64)
    rowkeys, tstamp, tpos, stamp0 = _table(rowcap)
    rows, nnz, ms, me, unsorted = _scan(
        raw, dim, base, max_rows, max_features,
        indptr, indices, values, rowkeys, tstamp, tpos, stamp0, _INSTANCES,
    )  # fmt: skip
    _scratch.stamp = stamp0 + rcap + 1
    if rows <= 0:
        return None
    try:
        model = raw[ms:me].decode("utf-8")
    except UnicodeDecodeError:
        return None
    ip, ix, vs = indptr[: rows + 1], indices[:nnz], values[:nnz]
    if unsorted:  # keys sent out of order: sorted as the encoders sort them
        ip, ix, vs = canonical_rows(ip.copy(), ix, vs)
    return model, Batch(ip, ix.copy(), vs.copy(), dim)


def warmup() -> None:
    """Compile (or load from numba's disk cache) the scanner before taking traffic."""
    scan_sparse_instances(
        b'{"model": "m", "instances": [{"x": {"2": 1.5, "0": -2}}, {"x": {"1": 3}}]}',
        4, 0, 10, 10,
    )  # fmt: skip
