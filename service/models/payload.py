"""The compact, pickle-free binary form of one update-log entry.

An entry holds an already-encoded batch (CSR arrays) plus its targets, so replay
never re-parses JSON or re-hashes feature names::

    magic   4 bytes  b"LSU1"
    n       u32      rows
    nnz     u32      stored values
    meta    u32      length of the JSON part
    JSON    {"y": [labels...], ...adapter extras (e.g. "qid")}
    indptr  u32[n+1] (nnz < 2**32 always holds for a request within the body limit)
    indices u32[nnz] (dim <= 2**31)
    values  f64[nnz] little-endian — the exact doubles, so every replica applies
                     bit-identical input.

Batches of a dense model (``dense=True``) are stored as the ``n × dim`` matrix
instead when that is smaller (up to a third smaller than CSR when most values are
non-zero) (magic ``b"LSD1"``,
header ``n, dim, meta``, then ``f64[n*dim]``); replay rebuilds the batch with
``dense_batch`` (``Batch.from_dense``'s arrays), exactly as the request's encoder did.

>>> import numpy as np
>>> from learners.features import Batch
>>> b = Batch.from_dense(np.array([[1.0, 0.0], [0.0, 2.5]]))
>>> blob = encode_payload(b, ["+1", 2])
>>> batch, meta = decode_payload(blob, dim=2)
>>> meta["y"], batch.values.tolist()
(['+1', 2], [1.0, 2.5])
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import orjson

from learners.csr_kernels import dense_to_csr
from learners.features import Batch

MAGIC = b"LSU1"
DENSE_MAGIC = b"LSD1"
_HEAD = struct.Struct("<4sIII")


CONTROL_MAGIC = b"LSC1"  # a control entry: JSON after the magic, no examples


def encode_control(what: dict[str, Any]) -> bytes:
    """A control entry of a model's log (``{"serving": name}``: a promotion, see
    ``service.engine.followers``): applied in log order like an update, learned by none."""
    return CONTROL_MAGIC + orjson.dumps(what)


def decode_control(payload: bytes) -> dict[str, Any] | None:
    """The control entry's content; None for an update (or anything else)."""
    if payload[:4] != CONTROL_MAGIC:
        return None
    try:
        out = orjson.loads(payload[4:])
    except orjson.JSONDecodeError:
        return None
    return out if isinstance(out, dict) else None


class PayloadError(ValueError):
    """A log entry that cannot be decoded (corrupt or from an unknown format)."""


# A group entry (service.engine.group_commit): the entries of requests that waited for
# the store together, one log entry, applied in their order, each on its own:
#   magic b"LSG1", count u32, then per request: length u32 + its entry's bytes.
GROUP_MAGIC = b"LSG1"
_COUNT = struct.Struct("<I")


def encode_group(entries: list[bytes]) -> bytes:
    parts = [GROUP_MAGIC, _COUNT.pack(len(entries))]
    for e in entries:
        parts += (_COUNT.pack(len(e)), e)
    return b"".join(parts)


def split_group(blob: bytes) -> list[bytes]:
    """The entries of a group entry, in their order (``PayloadError`` if it is torn)."""
    if blob[:4] != GROUP_MAGIC or len(blob) < 8:
        raise PayloadError("not a group entry")
    (count,) = _COUNT.unpack_from(blob, 4)
    out, off = [], 8
    for _ in range(count):
        if off + 4 > len(blob):
            raise PayloadError("group entry is truncated")
        (size,) = _COUNT.unpack_from(blob, off)
        off += 4
        if off + size > len(blob):
            raise PayloadError("group entry is truncated")
        out.append(bytes(blob[off : off + size]))
        off += size
    if off != len(blob):
        raise PayloadError(f"group entry has {len(blob) - off} bytes past its last entry")
    return out


def encode_payload(
    batch: Batch,
    labels: list[Any],
    dense: bool = False,
    matrix: np.ndarray | None = None,
    **extra: Any,
) -> bytes:
    """``matrix``: the dense ``X`` the batch was built from, if at hand (saves a copy)."""
    meta = orjson.dumps({"y": labels, **extra})
    n, nnz = batch.n_rows, batch.nnz
    if dense and _matrix_is_smaller(n, batch.dim, nnz):
        return _matrix_entry(matrix if matrix is not None else batch.to_dense(), meta)
    return b"".join(
        (
            _HEAD.pack(MAGIC, n, nnz, len(meta)),
            meta,
            batch.indptr.astype("<u4", copy=False).tobytes(),
            batch.indices.astype("<u4", copy=False).tobytes(),
            batch.values.astype("<f8", copy=False).tobytes(),
        )
    )


def encode_dense_payload(X: np.ndarray, labels: list[Any], **extra: Any) -> bytes:
    """``encode_payload(dense_batch(X), labels, dense=True, matrix=X)`` without building
    the CSR arrays when the matrix form is the one stored (the usual case)."""
    n, dim = X.shape
    if _matrix_is_smaller(n, dim, int(np.count_nonzero(X))):
        return _matrix_entry(X, orjson.dumps({"y": labels, **extra}))
    return encode_payload(dense_batch(X), labels, **extra)


def _matrix_is_smaller(n: int, dim: int, nnz: int) -> bool:
    # The matrix form only where it is the smaller one (mostly non-zero rows).
    return 8 * n * dim <= 12 * nnz + 4 * (n + 1)


def _matrix_entry(X: np.ndarray, meta: bytes) -> bytes:
    n, dim = X.shape
    head = _HEAD.pack(DENSE_MAGIC, n, dim, len(meta))
    return b"".join((head, meta, X.astype("<f8", copy=False).tobytes()))


def decode_payload(blob: bytes, dim: int) -> tuple[Batch, dict[str, Any]]:
    if len(blob) < _HEAD.size:
        raise PayloadError("log entry is truncated")
    magic, n, nnz, meta_len = _HEAD.unpack_from(blob, 0)
    if magic == DENSE_MAGIC:
        return _decode_dense(blob, n, nnz, meta_len, dim)
    if magic != MAGIC:
        raise PayloadError(f"log entry has unknown format {magic!r}")
    off = _HEAD.size
    expected = off + meta_len + 4 * (n + 1) + 4 * nnz + 8 * nnz
    if len(blob) != expected:
        raise PayloadError(f"log entry has {len(blob)} bytes, expected {expected}")
    meta = orjson.loads(blob[off : off + meta_len])
    off += meta_len
    indptr = np.frombuffer(blob, "<u4", n + 1, off).astype(np.int64)
    off += 4 * (n + 1)
    indices = np.frombuffer(blob, "<u4", nnz, off).astype(np.int64)
    off += 4 * nnz
    values = np.frombuffer(blob, "<f8", nnz, off).astype(np.float64)
    return Batch(indptr, indices, values, dim), meta


def _decode_dense(
    blob: bytes, n: int, width: int, meta_len: int, dim: int
) -> tuple[Batch, dict[str, Any]]:
    if width != dim:
        raise PayloadError(f"log entry has {width} columns, the model {dim}")
    off = _HEAD.size
    expected = off + meta_len + 8 * n * width
    if len(blob) != expected:
        raise PayloadError(f"log entry has {len(blob)} bytes, expected {expected}")
    meta = orjson.loads(blob[off : off + meta_len])
    X = np.frombuffer(blob, "<f8", n * width, off + meta_len).reshape(n, width)
    return dense_batch(X), meta


def dense_batch(X: np.ndarray) -> Batch:
    """``Batch.from_dense(X)`` for a finite float64 matrix in one compiled pass (it is
    most of a one-instance /predict and of replaying a dense entry): the same arrays,
    bit for bit (tested)."""
    indptr, indices, values = dense_to_csr(X)
    return Batch(indptr, indices, values, X.shape[1])


def warmup() -> None:
    """Compile ``dense_to_csr`` for the matrices the service passes it: writable (a
    request's) and read-only (a log entry's, a view of the stored bytes)."""
    X = np.zeros((1, 2))
    dense_batch(X)
    X.flags.writeable = False
    dense_batch(X)
