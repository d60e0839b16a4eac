"""A numba scanner from the raw bytes of a dense ``POST /predict`` body to a float64 matrix.

Reads exactly one shape of body::

    {"model": "higgs", "instances": [{"x": [0.12345, -1.5, 3]}, {"x": [...]}]}

(members in either order; ``model`` may be left out, as ``/models/{name}/predict``
allows) and returns the model name and the ``(n, dim)`` matrix, bit
for bit what ``orjson.loads`` + ``np.array(xs, dtype=np.float64)`` would give. Anything
else (another member such as ``min_version``, ``k`` or an instance's ``id``, a
duplicate key, an escape in the model name, a row of another length, a number outside
the exact fast path of :mod:`service.models.json_scan_numbers`, a bool, a null, an empty
list, ...) gives ``None``: the caller takes the general path, which reads those or
refuses them naming the field. The scanner never raises on bad input.

A one-instance ``/predict`` of a dense model spent ~5 us (of ~32 in the application)
in ``orjson.loads``, the body's checks and ``np.array`` + ``isfinite`` of its rows.

>>> model, X = scan_dense_instances(b'{"model": "m", "instances": [{"x": [1.5, -2]}]}', 2, 10)
>>> model, X.tolist()
('m', [[1.5, -2.0]])
>>> scan_dense_instances(b'{"model": "m", "instances": [{"x": [1.5]}]}', 2, 10) is None
True
"""

from __future__ import annotations

import numpy as np

# The kernel's on-disk cache follows the json_scan_*.py and fast_json_instances.py helpers
# it inlines (learners._kernel_cache).
from service.models.fast_json_instances import _INSTANCES, _instances_array, _is_instances
from service.models.json_scan_bytes import (
    _K_X,
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
    _model_member,
)

__all__ = ["scan_dense_instances", "warmup"]


@_kernel
def _scan(
    buf: _Buf, dim: int, max_rows: int, X: np.ndarray, word: np.ndarray
) -> tuple[int, int, int]:
    """Fill ``X`` (row-major, ``len(X) // dim`` rows at most); return (rows, start and
    end of the model name, start -1 when the body has none), rows 0 for "not the
    shape"."""
    n = len(buf)
    xrows = X.shape[0] // dim
    fail = (0, 0, 0)
    ms = 0
    me = 0
    rows = 0
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
            while True:  # one instance per iteration: {"x": [...]} and nothing else
                if rows >= max_rows or rows >= xrows:
                    return fail
                if i >= n or _at(buf, i) != 123:
                    return fail
                key, i = _member(buf, _ws(buf, i + 1, n), n)
                if i < 0 or key != _K_X:
                    return fail
                i = _dense_values(buf, i, n, X, rows * dim, dim)
                if i < 0:
                    return fail
                i = _ws(buf, i, n)
                if i >= n or _at(buf, i) != 125:  # "x" was the instance's only member
                    return fail
                rows += 1
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
    if not _body_complete(buf, i, n, True, have_instances):  # the model may be left out
        return fail
    if not have_model:
        ms = -1
    return rows, ms, me


def scan_dense_instances(
    raw: bytes, dim: int, max_rows: int
) -> tuple[str | None, np.ndarray] | None:
    """The body's model (``None`` when it has no ``model``: the one in the path of
    ``/models/{name}/predict``) and ``(n, dim)`` float64 matrix (C-contiguous), or
    ``None`` when ``raw`` is not exactly the supported shape (module docstring)."""
    size = len(raw)
    if size < 30 or dim < 1 or max_rows < 1:
        return None
    # a value takes >= 2 bytes (a digit and a separator)
    xrows = min(max_rows, size // (2 * dim) + 1)
    X = np.empty(xrows * dim, np.float64)
    rows, ms, me = _scan(raw, dim, max_rows, X, _INSTANCES)
    if rows <= 0:
        return None
    model = None
    if ms >= 0:
        try:
            model = raw[ms:me].decode("utf-8")
        except UnicodeDecodeError:
            return None
    return model, X[: rows * dim].reshape(rows, dim)


def warmup() -> None:
    """Compile (or load from numba's disk cache) the scanner before taking traffic."""
    scan_dense_instances(b'{"model": "m", "instances": [{"x": [1.5, -2]}, {"x": [0, 1e3]}]}', 2, 10)
