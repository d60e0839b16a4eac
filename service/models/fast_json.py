"""A numba scanner from the raw bytes of a dense ``POST /update`` body to a float64 matrix.

Reads exactly one shape of body::

    {"model": "adult", "examples": [{"x": [0.12345, -1.5, 3], "y": "s"}, {"x": [...], "y": 7}]}

and returns the model name, the ``(n, dim)`` matrix and the labels, bit for bit
what ``orjson.loads`` + ``np.array(xs, dtype=np.float64)`` would give (a label
written ``1.0`` as the integer ``1``, as ``learners.base.check_label`` reads it; any
other number, ``1.5`` or ``1e3``, as the float orjson reads: a regressor's target,
which a classifier's adapter sends to the orjson path).
An example may also carry ``"weight"``: a number > 0 within the fast paths below, read
into ``DenseExamples.weights`` (a weight that is 0, negative, not a number or outside
the fast paths goes to the orjson path, which refuses or reads it).
Anything else (another key, a duplicate key, an escape in a string, a
bool/null/empty label, a number outside the exact fast path, ...) gives ``None`` and
the caller takes the orjson path, which also words the 4xx errors. The scanner never raises on bad
input.

Numbers are read by :mod:`service.models.json_scan_numbers` (Clinger's fast path, then
Eisel-Lemire, so the ``repr`` of any normal double takes the fast path; the whole body
goes to the slow path for a number of more than 19 significant digits, a subnormal or
non-finite result, or one of the rare products Eisel-Lemire leaves undecided), the body
around the ``x`` arrays by :mod:`service.models.json_scan_envelope`.

>>> r = scan_dense_examples(b'{"model": "m", "examples": [{"x": [1.5, -2], "y": "a"}]}', 2, 10)
>>> r.model, r.X.tolist(), r.labels
('m', [[1.5, -2.0]], ['a'])
>>> scan_dense_examples(b'{"model": "m", "examples": [{"x": [1.5], "y": "a"}]}', 2, 10) is None
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# The kernel below inlines (or links) helpers of json_scan_bytes.py, json_scan_numbers.py
# and json_scan_envelope.py; its on-disk cache follows them (learners._kernel_cache).
from service.models.json_scan_bytes import (
    _K_EXAMPLES,
    _K_MODEL,
    _K_WEIGHT,
    _K_X,
    _K_Y,
    _after_element,
    _after_member,
    _at,
    _Buf,
    _kernel,
    _member,
    _ws,
)
from service.models.json_scan_envelope import (
    _body_complete,
    _body_start,
    _dense_values,
    _example_label,
    _examples_start,
    _model_value,
    _weight,
    label_scratch,
    model_and_labels,
    weight_scratch,
)

__all__ = ["DenseExamples", "scan_dense_examples", "warmup"]


class DenseExamples(NamedTuple):
    """A scanned body: ``X`` is float64, C-contiguous, shape ``(len(labels), dim)``;
    ``weights`` one per example when any example has a ``weight`` (else ``None``)."""

    model: str
    X: np.ndarray
    labels: list[str | int | float]
    weights: list[float] | None = None


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
    uniq0 = rcap
    fail = (0, 0, 0, 0, 0)
    ms = 0
    me = 0
    nu = 0
    nw = 0
    last = -1  # the distinct label of the previous example
    i = _body_start(buf, n)
    if i < 0:
        return fail
    have_model = False
    have_examples = False
    rows = 0
    while True:
        key, i = _member(buf, _ws(buf, i, n), n)
        if i < 0:
            return fail
        if key == _K_MODEL:
            i, ms, me = _model_value(buf, i, n, have_model)
            if i < 0:
                return fail
            have_model = True
        elif key == _K_EXAMPLES:
            i = _examples_start(buf, i, n, have_examples)
            if i < 0:
                return fail
            have_examples = True
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
                        if have_x:
                            return fail
                        have_x = True
                        i = _dense_values(buf, i, n, X, rows * dim, dim)
                        if i < 0:
                            return fail
                    elif key == _K_Y:
                        i, last, nu = _example_label(buf, i, n, have_y, meta, rows, uniq0, nu, last)
                        if i < 0:
                            return fail
                        have_y = True
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
    if not _body_complete(buf, i, n, have_model, have_examples):
        return fail
    return rows, ms, me, nu, nw


_new_dense = tuple.__new__  # DenseExamples without its keyword-parsing __new__


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
