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

from learners.features import Batch

MAGIC = b"LSU1"
_HEAD = struct.Struct("<4sIII")


class PayloadError(ValueError):
    """A log entry that cannot be decoded (corrupt or from an unknown format)."""


def encode_payload(batch: Batch, labels: list[Any], **extra: Any) -> bytes:
    meta = orjson.dumps({"y": labels, **extra})
    n, nnz = batch.n_rows, batch.nnz
    return b"".join(
        (
            _HEAD.pack(MAGIC, n, nnz, len(meta)),
            meta,
            batch.indptr.astype("<u4", copy=False).tobytes(),
            batch.indices.astype("<u4", copy=False).tobytes(),
            batch.values.astype("<f8", copy=False).tobytes(),
        )
    )


def decode_payload(blob: bytes, dim: int) -> tuple[Batch, dict[str, Any]]:
    if len(blob) < _HEAD.size:
        raise PayloadError("log entry is truncated")
    magic, n, nnz, meta_len = _HEAD.unpack_from(blob, 0)
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
