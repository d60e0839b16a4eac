"""Tensors of the Open Inference Protocol (KServe v2 REST): reading an inference
request into a feature matrix, writing predictions as output tensors.

A request is a JSON object, optionally followed by binary tensor data (the binary
tensor data extension: the ``Inference-Header-Content-Length`` header gives the
JSON's length; an input with ``parameters.binary_data_size`` takes that many bytes,
little-endian, row-major, in the order of the inputs). Errors are :class:`ApiError`
400 (413 for a batch over the limit) naming the part, e.g. ``inputs[0].shape``; a
field of the wrong JSON type (a ``datatype`` that is an array, ``parameters`` that
are not an object...) is one of them.

>>> X = input_matrix({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2],
...                               "data": [1, 2.5, 3, 4]}]}, b"", 2, 10)
>>> X.tolist(), X.dtype.name
([[1.0, 2.5], [3.0, 4.0]], 'float64')
>>> try:
...     input_matrix({"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 3],
...                               "data": [[1, True, 3]]}]}, b"", 3, 10)
... except ApiError as e:
...     print(e.status, e.message)
400 inputs[0].data[0][1]: must be a number, got boolean
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import orjson

from service.api.errors import ApiError
from service.api.request_bodies import parse_json_object, too_large, type_name

INPUT = "x"  # the one input of every model served: a batch of dense feature rows
NUMERIC = {
    "FP16": "<f2",
    "FP32": "<f4",
    "FP64": "<f8",
    "INT8": "i1",
    "INT16": "<i2",
    "INT32": "<i4",
    "INT64": "<i8",
    "UINT8": "u1",
    "UINT16": "<u2",
    "UINT32": "<u4",
    "UINT64": "<u8",
}


# A length as HTTP writes one, canonical: ASCII digits, no sign, space, '_' or leading 0.
_LENGTH = re.compile(r"[1-9][0-9]{0,18}")


def bad(message: str, field: str) -> ApiError:
    return ApiError(400, "invalid_input", f"{field}: {message}", field)


def _object(value: Any, field: str) -> dict[str, Any]:
    """An optional JSON object (``{}`` when absent); 400 for any other type."""
    if value is None:
        return {}
    if type(value) is not dict:
        raise bad(f"must be an object, got {type_name(value)}", field)
    return value


def _flag(params: dict[str, Any], key: str, field: str) -> bool | None:
    """An optional boolean parameter; 400 for any other type."""
    v = params.get(key)
    if v is not None and type(v) is not bool:
        raise bad(f"must be true or false, got {type_name(v)}", f"{field}.{key}")
    return v


# The members of the protocol's inference request object.
REQUEST_MEMBERS = ("id", "parameters", "inputs", "outputs")


def split_request(raw: bytes, header_length: str | None) -> tuple[dict[str, Any], bytes]:
    """The JSON request object and the binary data after it (``b""`` without any);
    400 naming a member the protocol's request object does not have (a typo such as
    ``output`` would otherwise be ignored)."""
    if header_length is None:
        req, binary = parse_json_object(raw), b""
    else:
        n = int(header_length) if _LENGTH.fullmatch(header_length) else -1
        if not 0 < n <= len(raw):
            raise bad(
                f"{header_length[:40]!r} is not a length within the {len(raw)}-byte body",
                "Inference-Header-Content-Length",
            )
        req, binary = parse_json_object(raw[:n]), raw[n:]
    for member in req:
        if member not in REQUEST_MEMBERS:
            shown = member if len(member) <= 80 else member[:80] + "..."
            raise bad(f"unknown field (a request has only {', '.join(REQUEST_MEMBERS)})", shown)
    return req, binary


def input_matrix(req: dict[str, Any], binary: bytes, width: int, max_rows: int) -> np.ndarray:
    """The request's one input as a finite float64 ``(rows, width)`` matrix."""
    inputs = req.get("inputs")
    if type(inputs) is not list or len(inputs) != 1 or type(inputs[0]) is not dict:
        got = f"{len(inputs)} inputs" if type(inputs) is list else type_name(inputs)
        raise bad(f"must be an array of one input tensor {INPUT!r}, got {got}", "inputs")
    t = inputs[0]
    name = t.get("name")
    if type(name) is not str:
        raise bad(f"must be a string, got {type_name(name)}", "inputs[0].name")
    if name != INPUT:
        raise bad(f"is {name!r:.80}; the model's one input is named {INPUT!r}", "inputs[0].name")
    datatype = t.get("datatype")
    if type(datatype) is not str:
        raise bad(
            f"must be a string, one of {', '.join(NUMERIC)}; got {type_name(datatype)}",
            "inputs[0].datatype",
        )
    if datatype not in NUMERIC:
        raise bad(
            f"{datatype!r:.40} is not a number type the model reads ({', '.join(NUMERIC)})",
            "inputs[0].datatype",
        )
    rows = _shape(t.get("shape"), width, max_rows)
    dtype = np.dtype(NUMERIC[datatype])
    params = _object(t.get("parameters"), "inputs[0].parameters")
    size = params.get("binary_data_size")
    if size is not None:
        arr = _binary_values(size, binary, rows * width, dtype)
    else:
        if binary:
            raise bad(
                f"{len(binary)} bytes follow the JSON but no input has binary_data_size",
                "Inference-Header-Content-Length",
            )
        arr = _json_values(t.get("data"), rows, width, dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # FP32 beyond its range: inf, refused
        X = np.ascontiguousarray(arr.reshape(rows, width), dtype=np.float64)
    finite = np.isfinite(X)
    if not finite.all():
        i, j = (int(v) for v in np.argwhere(~finite)[0])
        raise bad(f"element [{i}, {j}] is {X[i, j]} (values must be finite)", "inputs[0].data")
    return X


def _shape(shape: Any, width: int, max_rows: int) -> int:
    where = "inputs[0].shape"
    if type(shape) is not list or len(shape) != 2 or any(type(d) is not int for d in shape):
        raise bad(f"must be [batch, {width}] (two integers), got {shape!r:.80}", where)
    rows, cols = shape
    if cols != width:
        raise bad(f"{shape} has {cols} columns; the model reads rows of {width} values", where)
    if rows < 1:
        raise bad(f"{shape}: the batch is empty", where)
    if rows > max_rows:
        raise too_large(f"{where}: {rows} rows exceed the limit of {max_rows} per request", where)
    return rows


def _binary_values(size: Any, binary: bytes, n: int, dtype: np.dtype) -> np.ndarray:
    where = "inputs[0].parameters.binary_data_size"
    if type(size) is not int or size != n * dtype.itemsize:
        raise bad(f"{size!r:.40} is not {n} elements x {dtype.itemsize} bytes", where)
    if len(binary) != size:
        raise bad(f"{size} bytes announced, {len(binary)} follow the JSON", where)
    return np.frombuffer(binary, dtype=dtype)


def _json_values(data: Any, rows: int, width: int, dtype: np.dtype) -> np.ndarray:
    where = "inputs[0].data"
    if type(data) is not list:
        raise bad(f"must be an array of numbers, got {type_name(data)}", where)
    flat: list[Any] = data
    if data and type(data[0]) is list:  # rows as nested arrays, else flat row-major
        if len(data) != rows:
            raise bad(f"has {len(data)} rows, the shape says {rows}", where)
        for i, row in enumerate(data):
            if type(row) is not list or len(row) != width:
                raise bad(f"must be an array of {width} numbers", f"{where}[{i}]")
        flat = list(chain.from_iterable(data))
    elif len(data) != rows * width:
        raise bad(f"has {len(data)} values, the shape says {rows} x {width}", where)
    allowed = {int, float} if dtype.kind == "f" else {int}
    if not set(map(type, flat)) <= allowed:
        k = next(k for k, v in enumerate(flat) if type(v) not in allowed)
        at = f"{where}[{k // width}][{k % width}]" if flat is not data else f"{where}[{k}]"
        need = "a number" if dtype.kind == "f" else f"an integer (datatype {dtype.name})"
        raise bad(f"must be {need}, got {type_name(flat[k])}", at)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # 1e39 as FP32 is inf, refused as not finite
            return np.array(flat, dtype=np.float64).astype(dtype)
    info = np.iinfo(dtype)
    if flat and not (info.min <= min(flat) and max(flat) <= info.max):
        raise bad(f"values outside [{info.min}, {info.max}] for {dtype.name}", where)
    return np.array(flat, dtype=dtype)


# ---------------------------------------------------------------- outputs


class Tensor(NamedTuple):
    name: str
    datatype: str  # FP64, INT64 or BYTES
    shape: list[int]
    data: np.ndarray | list[str]  # a list for BYTES


def encode_response(head: dict[str, Any], tensors: list[tuple[Tensor, bool]]) -> tuple[bytes, int]:
    """The response body and the JSON's length (the ``Inference-Header-Content-Length``
    when binary tensors follow it; then equal to the body's length without them)."""
    outputs, blobs = [], []
    for t, binary in tensors:
        o: dict[str, Any] = {"name": t.name, "datatype": t.datatype, "shape": t.shape}
        if binary:
            blob = _tensor_bytes(t)
            o["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            # flat, row-major (the protocol allows nested arrays too; clients reshape)
            o["data"] = t.data.ravel().tolist() if isinstance(t.data, np.ndarray) else t.data
        outputs.append(o)
    js = orjson.dumps({**head, "outputs": outputs})
    return js + b"".join(blobs), len(js)


def _tensor_bytes(t: Tensor) -> bytes:
    if isinstance(t.data, np.ndarray):
        return np.ascontiguousarray(t.data, dtype=t.data.dtype.newbyteorder("<")).tobytes()
    # BYTES: each element a 4-byte little-endian length, then its UTF-8 bytes
    parts = [s.encode() for s in t.data]
    return b"".join(len(p).to_bytes(4, "little") + p for p in parts)
