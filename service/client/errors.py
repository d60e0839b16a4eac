"""The client's exceptions: one class per status family, carrying the service's error.

Every 4xx/5xx body of the service is ``{"detail": {"error", "message", "field"?}}``;
the exception keeps those three (``field`` names the offending part of the request,
e.g. ``examples[3].x["17"]`` or ``features.index_base``) and the HTTP status.

>>> e = error_for(422, {"detail": {"error": "invalid_input", "message": "x: bad",
...                                "field": "examples[0].x"}})
>>> type(e).__name__, e.status, e.error, e.field, isinstance(e, ClientError)
('InvalidInput', 422, 'invalid_input', 'examples[0].x', True)
>>> str(error_for(503, {"detail": {"error": "not_ready", "message": "starting"}}))
'HTTP 503 not_ready: starting'
"""

from __future__ import annotations

from typing import Any


class LearnserveError(Exception):
    """Anything that went wrong talking to the service.

    ``status`` is the HTTP status (``None`` when no answer came), ``error`` the
    service's code (``invalid_input``, ``model_not_found``...), ``message`` its words,
    ``field`` the part of the request it names (or ``None``), ``retry_after`` the
    seconds the server asked to wait (503s), ``body`` the decoded answer."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error: str = "error",
        field: str | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        self.status = status
        self.error = error
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.body = body
        where = f" (field {field})" if field else ""
        prefix = f"HTTP {status} {error}: " if status is not None else f"{error}: "
        super().__init__(f"{prefix}{message}{where}")


class ConnectionFailed(LearnserveError):
    """No answer: the service could not be reached, or the connection broke."""


class ClientError(LearnserveError):
    """4xx: the request was refused; sending it again unchanged gives the same answer."""


class BadRequest(ClientError):
    """400: the body is not JSON, or not an object."""


class Unauthorized(ClientError):
    """401: no API key, or an unknown one (``--token`` / ``token=``)."""


class Forbidden(ClientError):
    """403: the API key lacks the route's scope (predict, update or admin)."""


class NotFound(ClientError):
    """404: no such model (``error`` is ``model_not_found``) or route."""


class Conflict(ClientError):
    """409: e.g. a model exists with another config, a batch model asked to learn, an
    Idempotency-Key reused with another body, a model that has not learned yet."""


class PayloadTooLarge(ClientError):
    """413: the body (or a batch, or an example's features) exceeds a service limit."""


class InvalidInput(ClientError):
    """422: the request names a field that is wrong (``field``)."""


class ServerError(LearnserveError):
    """5xx: the service failed (500 is a bug on its side)."""


class ServiceUnavailable(ServerError):
    """503: starting, store unreachable, or ``min_version`` not reached; retried by the
    client (honouring Retry-After) until its retry budget is spent."""


_BY_STATUS: dict[int, type[LearnserveError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
    503: ServiceUnavailable,
}


def error_for(
    status: int, body: Any, retry_after: float | None = None, fallback: str = ""
) -> LearnserveError:
    """The exception for an error answer: its class by status, its fields from
    ``{"detail": {...}}`` (a body of another shape, e.g. from a proxy, is kept whole
    in ``message``)."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict) and "message" in detail:
        error = str(detail.get("error", "error"))
        message = str(detail["message"])
        field = detail.get("field")
    else:
        error = "error"
        message = (detail if isinstance(detail, str) else fallback) or f"HTTP {status}"
        field = None
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ClientError if 400 <= status < 500 else ServerError
    return cls(
        message,
        status=status,
        error=error,
        field=str(field) if field is not None else None,
        retry_after=retry_after,
        body=body,
    )
