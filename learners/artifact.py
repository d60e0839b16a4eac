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
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "DEFAULT_MAX_MODEL_BYTES",
    "FORMAT_VERSION",
    "MAGIC",
    "Artifact",
    "ArtifactError",
    "ArtifactTooLarge",
    "dumps",
    "dumps_buffer",
    "load",
    "loads",
    "memory_budget",
    "read_header",
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
_MAX_JSON_DEPTH = 64  # params/meta are flat in practice; a deep nesting is an attack
_MAX_NDIM = 8
_MAX_DIM = 1 << 48
_JSON_NAMES = {str: "string", dict: "object", list: "array"}
# The loaders' memory limit when the caller gives none (the service's default max_model_bytes).
DEFAULT_MAX_MODEL_BYTES = 4 << 30
# The largest artifact a deploy accepts by default (the service's max_artifact_bytes).
DEFAULT_MAX_ARTIFACT_BYTES = 256 << 20


class ArtifactError(ValueError):
    """A model artifact that cannot be read (bad magic, version, checksum, truncation...)."""


class ArtifactTooLarge(ArtifactError):
    """Loading the artifact would take more memory than allowed (checked before allocating).

    ``what`` names the part of the artifact that asks for the memory (``"arrays"``,
    ``"meta.n_features"``...), ``need`` and ``limit`` are bytes.
    """

    def __init__(self, what: str, need: int, limit: int) -> None:
        super().__init__(
            f"{what}: loading needs {_gib(need)} of memory, more than the limit of "
            f"{_gib(limit)} (max_model_bytes)"
        )
        self.what, self.need, self.limit = what, need, limit


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n < 1 << 70 else f"2**{n.bit_length() - 1} bytes"


def memory_budget(what: str, need: int, max_bytes: int | None) -> None:
    """Refuse (:class:`ArtifactTooLarge`) when ``need`` bytes exceed ``max_bytes``;
    loaders call it with their derived allocations before making them."""
    limit = DEFAULT_MAX_MODEL_BYTES if max_bytes is None else max_bytes
    if need > limit:
        raise ArtifactTooLarge(what, need, limit)


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


def loads(
    blob: bytes | bytearray | memoryview,
    *,
    expected_kind: str | None = None,
    max_bytes: int | None = None,
) -> Artifact:
    """Read an artifact, refusing anything malformed with an :class:`ArtifactError`.

    ``max_bytes`` bounds the memory the arrays take once copied out; it is checked
    from the header, before anything is allocated (:class:`ArtifactTooLarge`).
    """
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
    header = _parse_header(bytes(mv[_PREFIX.size : _PREFIX.size + hlen]))
    kind, params, meta, entries = header["kind"], header["params"], header["meta"], header["arrays"]
    if expected_kind is not None and kind != expected_kind:
        raise ArtifactError(f"artifact holds a {kind!r} model, expected {expected_kind!r}")
    layout = [_check_entry(i, e, blen) for i, e in enumerate(entries)]
    names = [name for name, *_ in layout]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ArtifactError(f"artifact header is malformed: array {dup!r} appears twice")
    need = sum(nbytes for *_, nbytes in layout)
    if max_bytes is not None and need > max_bytes:
        raise ArtifactTooLarge("arrays", need, max_bytes)
    body = mv[_PREFIX.size + hlen : _PREFIX.size + hlen + blen]
    arrays: dict[str, np.ndarray] = {}
    for name, dt, shape, off, nbytes in layout:
        arr = np.frombuffer(body[off : off + nbytes], dtype=dt).reshape(shape)
        arrays[name] = arr.astype(dt.newbyteorder("="), copy=True)
    return Artifact(
        kind=kind,
        params=params,
        arrays=arrays,
        meta=meta,
        created_at=header["created_at"],
        format_version=version,
        checksum=digest.hex(),
    )


def read_header(blob: bytes | bytearray | memoryview) -> dict[str, Any]:
    """The JSON header of an artifact (``kind``, ``params``, ``meta``, ``created_at``,
    ``format_version``, ``arrays``) without reading or checking the arrays: for showing
    a model's training parameters and metadata cheaply. It checks the prefix and the
    header, not the checksum: use :func:`loads` to trust the artifact."""
    mv = memoryview(blob)
    if len(mv) < _PREFIX.size:
        raise ArtifactError(f"artifact is truncated: {len(mv)} bytes is shorter than the prefix")
    magic, version, hlen, _blen = _PREFIX.unpack_from(mv, 0)
    if magic != MAGIC:
        raise ArtifactError("not a learnserve artifact (wrong magic bytes)")
    if version != FORMAT_VERSION or hlen > _MAX_HEADER or len(mv) < _PREFIX.size + hlen:
        raise ArtifactError(f"unreadable artifact header (format version {version})")
    return {
        **_parse_header(bytes(mv[_PREFIX.size : _PREFIX.size + hlen])),
        "format_version": version,
    }


def _parse_header(raw: bytes) -> dict[str, Any]:
    """The JSON header, its fields type-checked (a deep nesting is refused, not a crash)."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ArtifactError("artifact header is malformed: JSON nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise ArtifactError(f"artifact header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ArtifactError("artifact header is malformed: not a JSON object")
    if _json_depth(header) > _MAX_JSON_DEPTH:
        raise ArtifactError(
            f"artifact header is malformed: JSON nested more than {_MAX_JSON_DEPTH} levels deep"
        )
    want = {"kind": str, "params": dict, "arrays": list}
    for key, typ in want.items():
        if not isinstance(header.get(key), typ):
            raise ArtifactError(
                f"artifact header is malformed: {key!r} must be a JSON {_JSON_NAMES[typ]}, "
                f"got {_short(header.get(key))}"
            )
    created = header.get("created_at")
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise ArtifactError(
            f"artifact header is malformed: 'created_at' must be a number, got {_short(created)}"
        )
    meta = header.get("meta", {})
    return {**header, "created_at": float(created), "meta": meta if isinstance(meta, dict) else {}}


def _json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON (up to just past the limit), walked without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        deepest = max(deepest, d)
        if d > _MAX_JSON_DEPTH:
            break
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)
    return deepest


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _check_entry(
    i: int, e: Any, body_len: int
) -> tuple[str, np.dtype[Any], tuple[int, ...], int, int]:
    """One ``arrays`` entry of the header as ``(name, dtype, shape, offset, nbytes)``,
    checked with exact integer arithmetic (an absurd shape cannot wrap around)."""
    where = f"arrays[{i}]"
    if not isinstance(e, dict):
        raise ArtifactError(f"artifact header: {where} must be a JSON object, got {_short(e)}")
    name = e.get("name")
    if not isinstance(name, str):
        raise ArtifactError(f"artifact header: {where}.name must be a string, got {_short(name)}")
    where = f"array {name!r}"
    dtype = e.get("dtype")
    if not isinstance(dtype, str) or dtype not in _ALLOWED_DTYPES:
        raise ArtifactError(f"{where} has unsupported dtype {_short(dtype)}")
    shape = e.get("shape")
    if not isinstance(shape, list) or len(shape) > _MAX_NDIM:
        raise ArtifactError(
            f"{where}: shape must be a list of at most {_MAX_NDIM} sizes, got {_short(shape)}"
        )
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < _MAX_DIM:
            raise ArtifactError(
                f"{where}: shape {_short(shape)} has a size that is not an integer "
                f"in [0, 2**48): {_short(s)}"
            )
    ints = {}
    for key in ("offset", "nbytes"):
        v = e.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ArtifactError(f"{where}: {key} must be a non-negative integer, got {_short(v)}")
        ints[key] = v
    off, nbytes = ints["offset"], ints["nbytes"]
    dt = np.dtype(dtype).newbyteorder("<")
    count, extent = 1, dt.itemsize
    for s in shape:
        count *= s  # Python ints: no overflow
        extent *= max(s, 1)
    if extent >= 1 << 62:  # numpy refuses such a shape even when a size is 0
        raise ArtifactError(f"{where}: shape {shape} is impossibly large")
    if count * dt.itemsize != nbytes:
        raise ArtifactError(
            f"{where}: shape {shape} of {dtype} is {count * dt.itemsize} bytes, "
            f"but the header says {nbytes}"
        )
    if off + nbytes > body_len:
        raise ArtifactError(
            f"{where} lies outside the artifact body (bytes {off}..{off + nbytes} of {body_len})"
        )
    return name, dt, tuple(shape), off, nbytes


def save(path: str | Path, blob: bytes) -> None:
    """Write bytes atomically (temporary file, then rename)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(blob)
    tmp.replace(p)


def load(
    path: str | Path, *, expected_kind: str | None = None, max_bytes: int | None = None
) -> Artifact:
    return loads(Path(path).read_bytes(), expected_kind=expected_kind, max_bytes=max_bytes)


def peek_kind(blob: bytes) -> str:
    """The model kind of a valid artifact (full validation included)."""
    return loads(blob).kind
