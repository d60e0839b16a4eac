"""One error shape for every failure the service reports.

Every 4xx/5xx body is ``{"detail": {"error": CODE, "message": TEXT, "field": PATH?}}``,
where ``field`` (when present) names the offending part of the request, e.g.
``examples[3].x["17"]``.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

log = logging.getLogger("learnserve.api")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    503: "unavailable",
}


class ApiError(Exception):
    """Raised anywhere below a route; rendered as the common error body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers


def invalid(message: str, field: str | None = None) -> ApiError:
    return ApiError(422, "invalid_input", message, field)


def not_found(name: str) -> ApiError:
    return ApiError(404, "model_not_found", f"model {name!r} does not exist", "model")


def store_unavailable(what: str = "the store is unreachable") -> ApiError:
    return ApiError(503, "store_unavailable", what, headers={"Retry-After": "1"})


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    detail: dict[str, Any] = {"error": code, "message": message}
    if field is not None:
        detail["field"] = field
    return {"detail": detail}


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return json_response(error_body(code, message, field), status, headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on the request's path, and OPTIONS."""
    methods = {"OPTIONS"}
    for route in request.app.router.routes:
        route_methods = getattr(route, "methods", None)
        if route_methods and route.matches(request.scope)[0] != Match.NONE:
            methods |= set(route_methods)
    order = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return sorted(methods, key=lambda m: order.index(m) if m in order else len(order))


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return error_response(exc.status, exc.code, exc.message, exc.field, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            # Starlette's Allow names the methods of one route object; a path such as
            # /models/{name} has several. OPTIONS answers the same list.
            allow = {"Allow": ", ".join(allowed_methods(request))}
            if request.method == "OPTIONS":
                return Response(status_code=204, headers=allow)
            headers = {**(headers or {}), **allow}
        code = _CODES.get(exc.status_code, "error")
        msg = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return error_response(exc.status_code, code, msg, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request"}
        loc = first.get("loc", ())
        field = ".".join(str(p) for p in loc if p not in ("body", "path", "query"))
        return error_response(422, "invalid_input", f"{field}: {first.get('msg')}", field or None)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        # A bug on our side, never the client's input: log it with the traceback.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal error (see the server log)")
