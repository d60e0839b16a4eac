"""Domain errors: what went wrong, in the service's words, with no HTTP in them.

Everything below ``service.api`` (the engine, the model adapters, the wire codecs)
raises :class:`ServiceError`: a :class:`Kind` (the class of failure), a stable
``code`` a client can branch on, a ``message`` for people, the ``field`` of the
request it is about (``examples[3].x``) and, for failures worth retrying, a
``retry_after`` hint in seconds. ``service.api.errors`` alone turns a kind into a
status code and the hints into headers.

>>> e = invalid("must be finite", "examples[0].y")
>>> (e.kind, e.code, e.field)
(<Kind.INVALID: 'invalid'>, 'invalid_input', 'examples[0].y')
"""

from __future__ import annotations

import enum


class Kind(enum.Enum):
    """The class of a failure (``service.api.errors`` maps each to one status)."""

    BAD_REQUEST = "bad_request"  # the request's framing is wrong (not its content)
    UNAUTHORIZED = "unauthorized"  # no credentials, or unknown ones
    FORBIDDEN = "forbidden"  # credentials without the needed scope
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"  # the request contradicts the model's current state
    TOO_LARGE = "too_large"  # over a configured limit
    UNSUPPORTED = "unsupported"  # a media type or encoding the service does not read
    TIMEOUT = "timeout"  # the request's body did not arrive in time
    INVALID = "invalid"  # well framed, but its content is wrong
    UNAVAILABLE = "unavailable"  # not now: the store, a restore, a stale copy


class ServiceError(Exception):
    """A failure reported to the caller; ``replayed``: the first answer of an
    idempotent request, given again."""

    def __init__(
        self,
        kind: Kind,
        code: str,
        message: str,
        field: str | None = None,
        *,
        retry_after: int | None = None,
        replayed: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.replayed = replayed

    def __repr__(self) -> str:
        return f"ServiceError({self.kind.name}, {self.code!r}, {self.message!r}, {self.field!r})"


def invalid(message: str, field: str | None = None) -> ServiceError:
    return ServiceError(Kind.INVALID, "invalid_input", message, field)


def not_found(name: str) -> ServiceError:
    return ServiceError(
        Kind.NOT_FOUND, "model_not_found", f"model {name!r} does not exist", "model"
    )


def conflict(code: str, message: str, field: str | None = None) -> ServiceError:
    return ServiceError(Kind.CONFLICT, code, message, field)


def too_large(message: str, field: str | None = None, code: str = "too_large") -> ServiceError:
    return ServiceError(Kind.TOO_LARGE, code, message, field)


def store_unavailable(what: str = "the store is unreachable") -> ServiceError:
    return ServiceError(Kind.UNAVAILABLE, "store_unavailable", what, retry_after=1)


def model_unavailable(name: str, why: str) -> ServiceError:
    return ServiceError(
        Kind.UNAVAILABLE,
        "model_unavailable",
        f"model {name!r} could not be restored: {why}",
        "model",
        retry_after=30,
    )


class KernelsCompiling(ServiceError):
    """A model that waits for numba kernels still compiling (``families``): a 503 whose
    ``Retry-After`` asks the client to come back, never a request held for minutes."""

    def __init__(self, name: str, families: list[str], what: str) -> None:
        super().__init__(
            Kind.UNAVAILABLE,
            "kernels_compiling",
            f"model {name!r} is not loaded yet: waiting for {what}",
            "model",
            retry_after=5,
        )
        self.families = families
