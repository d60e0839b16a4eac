"""One versioned, pickle-free container for every model kind.

Layout (all integers little-endian)::

    magic      8 bytes   b"LSRNART\\x00"
    version    u16       FORMAT_VERSION
    header_len u32       length of the JSON header
    body_len   u64       length of the array body
    header     JSON      {"kind", "format_version", "created_at", "params", "meta",
                          "arrays": [{"name", "dtype", "shape", "offset", "nbytes"}]}
    body       bytes     the arrays, C order, little-endian, 8-byte aligned
    checksum   32 bytes  SHA-256 of everything before it

Only plain numeric dtypes are stored; labels and other small values go in the
JSON ``params``/``meta`` (JSON keeps ``"+1"`` and ``1`` apart). A wrong magic, an
unknown version, a bad checksum, a truncated body or an inconsistent header is an
:class:`ArtifactError` with a message that says which.

>>> import numpy as np
>>> blob = dumps("demo", {"c": 1.0}, {"w": np.arange(3.0)})
>>> art = loads(blob)
>>> art.kind, art.params, art.arrays["w"].tolist()
('demo', {'c': 1.0}, [0.0, 1.0, 2.0])
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "Artifact",
    "ArtifactError",
    "dumps",
    "dumps_buffer",
    "load",
    "loads",
    "save",
]

MAGIC = b"LSRNART\x00"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sHIQ")  # magic, version, header_len, body_len
_DIGEST = 32
_ALLOWED_DTYPES = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}
    | {"float32", "float64"}
)
_MAX_HEADER = 64 << 20


class ArtifactError(ValueError):
    """A model artifact that cannot be read (bad magic, version, checksum, truncation...)."""


@dataclass(frozen=True)
class Artifact:
    kind: str
    params: dict[str, Any]
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    format_version: int = FORMAT_VERSION
    checksum: str = ""

    def array(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise ArtifactError(f"artifact of kind {self.kind!r} has no array {name!r}") from None


def _plan(
    kind: str,
    params: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None,
    created_at: float | None,
) -> tuple[bytes, list[tuple[np.ndarray, np.dtype[Any], int, int]], int]:
    """The artifact's prefix + JSON header, and where each array goes in the body:
    ``(array, little-endian dtype, offset, nbytes)``; plus the body length."""
    entries = []
    parts: list[tuple[np.ndarray, np.dtype[Any], int, int]] = []
    offset = 0
    for name, arr in arrays.items():
        a = np.asarray(arr)
        if a.dtype.name not in _ALLOWED_DTYPES:
            raise ArtifactError(f"array {name!r} has unsupported dtype {a.dtype}")
        if a.ndim == 0:
            a = a.reshape(1)  # stored with shape [1], as np.ascontiguousarray gives
        le = a.dtype.newbyteorder("<")
        nbytes = a.size * a.dtype.itemsize
        entries.append(
            {
                "name": name,
                "dtype": a.dtype.name,
                "shape": list(a.shape),
                "offset": offset,
                "nbytes": nbytes,
            }
        )
        parts.append((a, le, offset, nbytes))
        offset += nbytes + (-nbytes) % 8
    header = {
        "kind": kind,
        "format_version": FORMAT_VERSION,
        "created_at": time.time() if created_at is None else float(created_at),
        "params": dict(params),
        "meta": dict(meta or {}),
        "arrays": entries,
    }
    try:
        hbytes = json.dumps(header, sort_keys=True, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise ArtifactError(f"params/meta are not JSON-serialisable: {exc}") from None
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(hbytes), offset) + hbytes, parts, offset


def dumps(
    kind: str,
    params: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None = None,
    *,
    created_at: float | None = None,
) -> bytes:
    """Serialise a model to bytes (see :func:`dumps_buffer` for big models off-loop)."""
    # The arrays are referenced, not copied, until the single join at the end.
    head, parts, _ = _plan(kind, params, arrays, meta, created_at)
    chunks: list[memoryview | bytes] = [head]
    for a, le, _off, nbytes in parts:
        c = np.ascontiguousarray(a, dtype=le)
        chunks.append(memoryview(c.reshape(-1).view(np.uint8)))  # type: ignore[arg-type]
        pad = (-nbytes) % 8
        if pad:
            chunks.append(b"\x00" * pad)
    h = hashlib.sha256()
    for part in chunks:
        h.update(part)  # hashlib releases the GIL on large buffers
    return b"".join([*chunks, h.digest()])


def dumps_buffer(
    kind: str,
    params: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None = None,
    *,
    created_at: float | None = None,
) -> memoryview:
    """:func:`dumps` into a fresh buffer (the same bytes), holding the GIL only briefly.

    Meant for a worker thread serialising a big model while the event loop runs:
    the arrays (contiguous or not, e.g. the columns of an interleaved state) are
    copied straight into place with ``np.copyto`` and hashed with hashlib, both of
    which release the GIL; a ``b"".join`` of tens of MB would hold it throughout
    (about 10 ms for 16 MB, page faults included), stalling the loop thread.
    """
    head, parts, body_len = _plan(kind, params, arrays, meta, created_at)
    start = len(head)
    total = start + body_len + _DIGEST
    out = np.empty(total, dtype=np.uint8)
    out[:start] = np.frombuffer(head, dtype=np.uint8)
    for a, le, off, nbytes in parts:
        lo = start + off
        np.copyto(out[lo : lo + nbytes].view(le).reshape(a.shape), a, casting="equiv")
        out[lo + nbytes : lo + nbytes + (-nbytes) % 8] = 0
    mv = memoryview(out)  # type: ignore[arg-type]
    h = hashlib.sha256()
    h.update(mv[: total - _DIGEST])  # one big update: the GIL is released while hashing
    out[total - _DIGEST :] = np.frombuffer(h.digest(), dtype=np.uint8)
    return mv


def loads(blob: bytes | bytearray | memoryview, *, expected_kind: str | None = None) -> Artifact:
    """Read an artifact, refusing anything malformed with an :class:`ArtifactError`."""
    mv = memoryview(blob)
    if len(mv) < _PREFIX.size:
        raise ArtifactError(f"artifact is truncated: {len(mv)} bytes is shorter than the prefix")
    magic, version, hlen, blen = _PREFIX.unpack_from(mv, 0)
    if magic != MAGIC:
        raise ArtifactError("not a learnserve artifact (wrong magic bytes)")
    if version != FORMAT_VERSION:
        raise ArtifactError(
            f"unsupported artifact format version {version} (this build reads {FORMAT_VERSION})"
        )
    if hlen > _MAX_HEADER:
        raise ArtifactError(f"artifact header of {hlen} bytes is implausibly large")
    total = _PREFIX.size + hlen + blen + _DIGEST
    if len(mv) < total:
        raise ArtifactError(f"artifact is truncated: {len(mv)} of {total} bytes")
    if len(mv) > total:
        raise ArtifactError(f"artifact has {len(mv) - total} unexpected trailing bytes")
    digest = hashlib.sha256(mv[: total - _DIGEST]).digest()
    if digest != bytes(mv[total - _DIGEST :]):
        raise ArtifactError("artifact checksum mismatch: the file is corrupted")
    try:
        header = json.loads(bytes(mv[_PREFIX.size : _PREFIX.size + hlen]).decode("utf-8"))
        kind = header["kind"]
        entries = header["arrays"]
        params = header["params"]
        meta = header.get("meta", {})
        created_at = float(header["created_at"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"artifact header is malformed: {exc}") from None
    if not isinstance(kind, str) or not isinstance(params, dict) or not isinstance(entries, list):
        raise ArtifactError("artifact header is malformed: wrong field types")
    if expected_kind is not None and kind != expected_kind:
        raise ArtifactError(f"artifact holds a {kind!r} model, expected {expected_kind!r}")
    body = mv[_PREFIX.size + hlen : _PREFIX.size + hlen + blen]
    arrays: dict[str, np.ndarray] = {}
    for e in entries:
        try:
            name, dtype, shape = e["name"], e["dtype"], tuple(int(s) for s in e["shape"])
            off, nbytes = int(e["offset"]), int(e["nbytes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"artifact array entry is malformed: {exc}") from None
        if dtype not in _ALLOWED_DTYPES:
            raise ArtifactError(f"array {name!r} has unsupported dtype {dtype!r}")
        dt = np.dtype(dtype).newbyteorder("<")
        if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) * dt.itemsize != nbytes:
            raise ArtifactError(f"array {name!r}: shape {shape} does not match {nbytes} bytes")
        if off < 0 or off + nbytes > blen:
            raise ArtifactError(f"array {name!r} lies outside the artifact body")
        arr = np.frombuffer(body[off : off + nbytes], dtype=dt).reshape(shape)
        arrays[name] = arr.astype(dt.newbyteorder("="), copy=True)
    return Artifact(
        kind=kind,
        params=params,
        arrays=arrays,
        meta=meta if isinstance(meta, dict) else {},
        created_at=created_at,
        format_version=version,
        checksum=digest.hex(),
    )


def save(path: str | Path, blob: bytes) -> None:
    """Write bytes atomically (temporary file, then rename)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(blob)
    tmp.replace(p)


def load(path: str | Path, *, expected_kind: str | None = None) -> Artifact:
    return loads(Path(path).read_bytes(), expected_kind=expected_kind)


def peek_kind(blob: bytes) -> str:
    """The model kind of a valid artifact (full validation included)."""
    return loads(blob).kind
