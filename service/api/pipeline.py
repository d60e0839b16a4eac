"""The one request pipeline of the JSON body routes (``/update``, ``/predict`` and their
``/models/{name}/...`` forms), shared by the plain-ASGI hot path
(:mod:`service.api.hot`) and the documented FastAPI routes (:mod:`service.api.learn`).

In order: the API key and its scope, the content type, the readiness check, the
body (its size and time limits, read by the caller's ``read``), the handler (no
HTTP: :mod:`service.engine.requests`), then the answer or the domain error as the
one error body, with its status and headers. A client that disconnects before its
body arrived raises :class:`~service.api.request_bodies.ClientGone` (nothing to
answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from service.api.deps import ready_engine
from service.api.errors import error_body, http_headers, http_status
from service.api.request_bodies import check_content_type
from service.engine.facade import Engine
from service.errors import ServiceError
from service.settings import Settings

# (engine, settings, body, request state, idempotency key) -> the answer
Handler = Callable[[Engine, Settings, bytes, dict[str, Any], str | None], Awaitable[dict[str, Any]]]
ReadBody = Callable[[Settings], Awaitable[bytes]]

_REPLAYED = {"Idempotent-Replayed": "true"}


async def serve_json(
    state: Any,
    key_scope: str,
    handler: Handler,
    headers: Mapping[str, str],
    read: ReadBody,
    rstate: dict[str, Any],
) -> tuple[int, bytes, dict[str, str] | None]:
    """``(status, JSON body, extra headers)`` for one request. ``state``: the app's
    state (engine, settings, keyring); ``headers``: the request's, lower-case names;
    ``rstate``: the request's state (``path_model`` in, ``model`` out for metrics)."""
    extra: dict[str, str] | None = None
    status = 200
    try:
        state.keyring.check(headers, key_scope)
        check_content_type(headers.get("content-type"))
        engine = ready_engine(state.engine)
        settings: Settings = state.settings
        raw = await read(settings)
        answer = await handler(engine, settings, raw, rstate, headers.get("idempotency-key"))
        if rstate.get("replayed"):
            extra = dict(_REPLAYED)
    except ServiceError as e:
        status, extra = http_status(e), http_headers(e)
        answer = error_body(e.code, e.message, e.field)
        rstate["error_code"] = e.code  # for learnserve_request_errors_total
    return status, orjson.dumps(answer, option=orjson.OPT_NON_STR_KEYS), extra
