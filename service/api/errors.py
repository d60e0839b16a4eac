"""One error shape for every failure the service reports, and the only place where
a domain error (:class:`service.errors.ServiceError`) becomes HTTP.

Every 4xx/5xx body is ``{"detail": {"error": CODE, "message": TEXT, "field": PATH?}}``,
where ``field`` (when present) names the offending part of the request, e.g.
``examples[3].x["17"]``. A kind maps to one status (:data:`STATUS`); a retry hint
becomes ``Retry-After``, a replayed idempotent answer ``Idempotent-Replayed: true``.
The Open Inference Protocol's paths (``/v2...``) answer its ``{"error": message,
"code": CODE}`` instead, also for a path or method no route serves (404, 405).
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

from service.errors import Kind, ServiceError
from service.errors import invalid as invalid
from service.errors import not_found as not_found
from service.errors import store_unavailable as store_unavailable

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


# The status of each kind of domain error.
STATUS: dict[Kind, int] = {
    Kind.BAD_REQUEST: 400,
    Kind.UNAUTHORIZED: 401,
    Kind.FORBIDDEN: 403,
    Kind.NOT_FOUND: 404,
    Kind.TIMEOUT: 408,
    Kind.CONFLICT: 409,
    Kind.TOO_LARGE: 413,
    Kind.UNSUPPORTED: 415,
    Kind.INVALID: 422,
    Kind.UNAVAILABLE: 503,
}
_KIND_OF_STATUS = {v: k for k, v in STATUS.items()}


class ApiError(ServiceError):
    """An error of the HTTP layer itself (auth, framing, the protocol's own rules),
    given with its status and any headers."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(_KIND_OF_STATUS.get(status, Kind.BAD_REQUEST), code, message, field)
        self.status = status
        self.headers = headers


def http_status(e: ServiceError) -> int:
    """The status code ``e`` is answered with."""
    return e.status if isinstance(e, ApiError) else STATUS[e.kind]


def http_headers(e: ServiceError) -> dict[str, str] | None:
    """The headers ``e`` is answered with (None: none)."""
    headers = dict(e.headers or {}) if isinstance(e, ApiError) else {}
    if e.retry_after is not None:
        headers["Retry-After"] = str(e.retry_after)
    if e.replayed:
        headers["Idempotent-Replayed"] = "true"
    return headers or None


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


# The Open Inference Protocol's paths (service.api.v2), whose errors are {"error": message}.
V2_PREFIX = "/v2"
# What a /v2 path that no route serves is told (tritonclient shows the "error" text).
V2_SERVED = (
    "this server implements the Open Inference Protocol's health (/v2/health/live, "
    "/v2/health/ready), server and model metadata (/v2, /v2/models/{name}[/versions/{v}]), "
    "model readiness (.../ready) and inference (.../infer), with the binary tensor data "
    "and classification extensions; not the model configuration, statistics, repository, "
    "shared-memory, logging or trace extensions"
)


def is_v2_path(scope: Any) -> bool:
    """The request is for a path of the Open Inference Protocol (below any root path)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path == V2_PREFIX or path.startswith(V2_PREFIX + "/")


def v2_error_response(
    request: Request, status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """The protocol's error body ``{"error": message, "code": code}``."""
    request.scope.setdefault("state", {})["error_code"] = code  # for the error metrics
    return json_response({"error": message, "code": code}, status, headers)


def _v2_http_error(
    request: Request, exc: StarletteHTTPException, headers: dict[str, str] | None
) -> Response:
    code = _CODES.get(exc.status_code, "error")
    what = f"{request.method} {request.url.path[:200]}"
    if exc.status_code == 404:
        message = f"{what} is not served: {V2_SERVED}"
    elif exc.status_code == 405:
        allowed = (headers or {}).get("Allow", "")
        message = f"{what}: the method is not allowed; allowed: {allowed}"
    else:
        message = f"{what}: {exc.detail}"
    return v2_error_response(request, exc.status_code, code, message, headers)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> Response:
        return error_response(http_status(exc), exc.code, exc.message, exc.field, http_headers(exc))

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
        if is_v2_path(request.scope):  # the protocol's error body, which its clients read
            return _v2_http_error(request, exc, headers)
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
        message = "internal error (see the server log)"
        if is_v2_path(request.scope):
            return v2_error_response(request, 500, "internal", message)
        return error_response(500, "internal_error", message)
