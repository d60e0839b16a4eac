"""Request bodies off the wire: size limits, time limits and content types.

The JSON inside is parsed and its fields checked by :mod:`service.models.json_fields`
(re-exported here for the routes).

JSON bodies must say ``Content-Type: application/json`` (a ``charset`` parameter,
if any, must be ``utf-8``), else 415: ``text/plain``, form types and no type at all
are what a web page may POST cross-origin without a CORS preflight, so refusing
them keeps a browser from driving a keyless service. Bodies are UTF-8 only: no
byte-order mark and no UTF-16/32 detection (422 naming ``body``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request
from starlette.types import Receive

from service.api.body_deadlines import body_deadline
from service.api.errors import ApiError
from service.errors import too_large
from service.models.json_fields import (
    check_utf8_start,
    items_field,
    json_int,
    optional_int,
    parse_json_object,
    require_list,
    require_str,
    type_name,
)

__all__ = [
    "check_utf8_start",
    "items_field",
    "json_int",
    "optional_int",
    "parse_json_object",
    "require_list",
    "require_str",
    "too_large",
    "type_name",
]


JSON_TYPE = "application/json"
OCTETS_TYPE = "application/octet-stream"


def check_content_type(value: str | None, expected: str | tuple[str, ...] = JSON_TYPE) -> None:
    """Raise 415 unless the ``Content-Type`` header is ``expected`` (or one of them;
    parameters allowed, but a ``charset``, if any, must be ``utf-8``: one rule for every
    route that reads JSON)."""
    send = expected if isinstance(expected, str) else " or ".join(expected)
    if value is None or not value.strip():
        raise unsupported_type(f"Content-Type is missing; send {send}")
    media, *params = value.split(";")
    if media.strip().lower() not in ((expected,) if isinstance(expected, str) else expected):
        raise unsupported_type(f"Content-Type {value[:100]!r} is not supported; send {send}")
    for param in params:
        key, _, v = param.partition("=")
        if key.strip().lower() == "charset" and v.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            raise unsupported_type(
                f"Content-Type {value[:100]!r}: the body must be UTF-8 (charset=utf-8)"
            )


def unsupported_type(message: str) -> ApiError:
    return ApiError(415, "unsupported_media_type", message, "Content-Type")


def body_timeout(seconds: float) -> ApiError:
    # Connection: close, so the connection is not reused with half a body unread.
    return ApiError(
        408,
        "request_timeout",
        f"body: the request body did not arrive within {seconds:g} s",
        "body",
        headers={"Connection": "close"},
    )


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, refusing more than ``max_bytes`` (before reading it when announced)
    and a body that takes longer than the ``body_timeout_seconds`` setting (408)."""
    seconds: float = request.app.state.settings.body_timeout_seconds
    try:
        async with asyncio.timeout(seconds):
            return await _read_body(request, max_bytes)
    except TimeoutError:
        raise body_timeout(seconds) from None


def _check_declared(declared: str, max_bytes: int) -> None:
    """A ``Content-Length`` that is a number within ``max_bytes`` (refused before reading)."""
    try:
        n = int(declared)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number") from None
    if n > max_bytes:
        raise too_large(f"body of {n} bytes exceeds the limit of {max_bytes} bytes")


async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        _check_declared(declared, max_bytes)
        return await request.body()
    # Chunked upload: count while reading so a huge stream is cut off early.
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large(f"body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class ClientGone(Exception):
    """The client disconnected before its body was read (nothing to answer)."""


async def receive_body(
    receive: Receive, declared: str | None, max_bytes: int, timeout_seconds: float
) -> bytes:
    """``read_body`` for a plain ASGI ``receive``: the same limits and messages."""
    try:
        async with body_deadline(timeout_seconds):  # one timer per loop, not per request
            return await _receive_body(receive, declared, max_bytes)
    except TimeoutError:
        raise body_timeout(timeout_seconds) from None


async def _receive_body(receive: Receive, declared: str | None, max_bytes: int) -> bytes:
    if declared is not None:
        _check_declared(declared, max_bytes)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise too_large(f"body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_json_object(request: Request, max_bytes: int) -> dict[str, Any]:
    check_content_type(request.headers.get("content-type"))
    body = await read_body(request, max_bytes)
    return parse_json_object(body)
