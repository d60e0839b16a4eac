"""What the sync and async clients share: the requests they build, when to retry,
and how answers are decoded. Only the sending (and sleeping) differs between them.

Retry rules (:class:`RetryPolicy`):

- ``idempotent`` calls (every GET, create, delete, predict, activate, and updates,
  which always carry an ``Idempotency-Key``) are retried on 502/503/504 and on any
  transport error, including a connection that broke after the request was sent:
  a repeated update with the same key is answered from the first one, never learned
  twice.
- other calls (deploy, rollback: each creates or moves a version) are retried only
  when the service cannot have acted: the connection never opened, or a 503
  ``not_ready`` (refused before the route ran).

A 503's ``Retry-After`` is honoured (capped at ``max_delay``); otherwise the wait
doubles from ``backoff`` with jitter, up to ``max_delay``, for at most ``attempts``
tries in all.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import orjson

from service.client.errors import ConnectionFailed, LearnserveError, error_for

DEFAULT_URL = "http://127.0.0.1:8000"
JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
RETRY_STATUSES = frozenset({502, 503, 504})

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # tries in all, the first included (1: never retry)
    backoff: float = 0.25  # seconds before the first retry without Retry-After; doubles
    max_delay: float = 10.0  # longest single wait, Retry-After included

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        step = min(self.backoff * (2**retry), self.max_delay)
        return step * random.uniform(0.5, 1.0)  # jitter: many clients do not retry in step


@dataclass(frozen=True)
class Call:
    """One request, as both clients send it."""

    method: str
    path: str
    body: bytes | None = None
    content_type: str | None = None
    headers: dict[str, str] | None = None
    idempotent: bool = True

    def request_headers(self) -> dict[str, str]:
        h = dict(self.headers or {})
        if self.content_type:
            h["Content-Type"] = self.content_type
        return h


def json_call(method: str, path: str, body: Any, **kw: Any) -> Call:
    return Call(method, path, orjson.dumps(body, option=JSON_OPTIONS), "application/json", **kw)


def model_path(name: str, suffix: str = "") -> str:
    return f"/models/{quote(name, safe='')}{suffix}"


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date (RFC 9110)."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_of(response: httpx.Response) -> LearnserveError:
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    return error_for(
        response.status_code,
        body,
        retry_after_seconds(response.headers.get("retry-after")),
        fallback=response.text.strip()[:500] or response.reason_phrase,
    )


def may_retry_status(call: Call, err: LearnserveError) -> bool:
    if err.status not in RETRY_STATUSES:
        return False
    return call.idempotent or (err.status == 503 and err.error == "not_ready")


def may_retry_transport(call: Call, exc: httpx.TransportError) -> bool:
    # ConnectError / ConnectTimeout: the request never left; anything else may have
    # reached the service (a read timeout, a connection reset mid-answer).
    return call.idempotent or isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def transport_failure(call: Call, exc: httpx.TransportError, tries: int) -> ConnectionFailed:
    what = type(exc).__name__
    return ConnectionFailed(
        f"{call.method} {call.path} failed after {tries} tr{'y' if tries == 1 else 'ies'}: "
        f"{what}: {exc}",
        error="connection_failed",
    )


def decode(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    return orjson.loads(response.content)


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last may be shorter); reads lazily."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def feedback_examples(pairs: Iterable[tuple[str, Any]]) -> Iterator[dict[str, Any]]:
    """``(id, label)`` pairs as ``/update`` examples ``{"id": ..., "y": ...}``: the
    label of an instance the service saw by id in a ``/predict``."""
    for i, (ident, y) in enumerate(pairs):
        if not isinstance(ident, str) or not ident:
            raise ValueError(f"label pair {i}: the id must be a non-empty string, got {ident!r}")
        yield {"id": ident, "y": y}


def instances_body(
    model: str,
    xs: Iterable[Any],
    ids: Iterable[str | None] | None,
    min_version: int | None,
    k: int | None,
) -> dict[str, Any]:
    rows = [{"x": x} for x in xs]
    if ids is not None:
        id_list = list(ids)
        if len(id_list) != len(rows):
            raise ValueError(f"ids: {len(id_list)} ids for {len(rows)} instances")
        for row, ident in zip(rows, id_list, strict=True):
            if ident is not None:  # a row without an id is scored, not remembered
                row["id"] = ident
    body: dict[str, Any] = {"model": model, "instances": rows}
    if min_version is not None:
        body["min_version"] = min_version
    if k is not None:
        body["k"] = k
    return body


def example_dict(item: Any) -> Any:
    """An ``(x, y)`` pair as ``{"x": x, "y": y}``; anything else as it is (a dict
    ``{"x", "y"}``, ``{"id", "y"}``, or a ranker's query)."""
    if isinstance(item, tuple) and len(item) == 2:
        return {"x": item[0], "y": item[1]}
    return item


def update_call(model: str, field: str, items: list[Any], key: str) -> Call:
    """``POST /models/{model}/update`` with the batch's Idempotency-Key; the body names
    the model too, which keeps it on the service's fast parsers (and lets a proxy route
    by path). The key covers labels by id too: a retried batch that mixes ids and
    ``x`` is learned once, although its ids are labelled by the first attempt."""
    return json_call(
        "POST",
        model_path(model, "/update"),
        {"model": model, field: items},
        headers={"Idempotency-Key": key},
    )


def create_body(
    algorithm: str, features: dict[str, Any], params: dict[str, Any] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"algorithm": algorithm, "features": features}
    if params:
        body["params"] = params
    return body


def artifact_source(artifact: object) -> bytes | Path:
    """What ``deploy(name, artifact)`` uploads: a path (``str`` or ``os.PathLike``, the
    file is read) or the artifact's bytes (``bytes``, ``bytearray``, ``memoryview``);
    anything else is a ``TypeError`` naming the argument (a ``str`` is never sent as
    the artifact itself)."""
    if isinstance(artifact, bytes):
        return artifact
    if isinstance(artifact, bytearray | memoryview):
        return bytes(artifact)
    if isinstance(artifact, str | os.PathLike):
        path = os.fspath(artifact)
        if isinstance(path, bytes):
            raise TypeError(
                f"artifact: a path must be str or pathlib.Path, got {type(artifact).__name__}"
            )
        return Path(path)
    raise TypeError(
        "artifact: expected a path (str or pathlib.Path) or the artifact's bytes "
        f"(bytes, bytearray, memoryview), got {type(artifact).__name__}"
    )


class QueryPacker:
    """Rankers' queries packed into requests: at most ``max_queries`` queries and, with
    ``max_items``, at most that many items in all (the service's limit counts items); a
    query bigger than ``max_items`` goes alone. Queries are never split or reordered.
    ``size(query)``: its items (a wire query's ``len(items)`` by default)."""

    def __init__(
        self,
        max_queries: int,
        max_items: int | None = None,
        size: Callable[[Any], int] | None = None,
    ) -> None:
        if max_queries < 1:
            raise ValueError(f"batch size must be >= 1, got {max_queries}")
        if max_items is not None and max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.max_queries = max_queries
        self.max_items = max_items
        self.size = size or query_items
        self._batch: list[Any] = []
        self._items = 0

    def add(self, query: Any) -> list[Any] | None:
        """Take ``query``; the batch to send first when it does not fit, else ``None``."""
        n = self.size(query)
        full = None
        if self._batch and (
            len(self._batch) >= self.max_queries
            or (self.max_items is not None and self._items + n > self.max_items)
        ):
            full, self._batch, self._items = self._batch, [], 0
        self._batch.append(query)
        self._items += n
        return full

    def flush(self) -> list[Any] | None:
        full, self._batch, self._items = self._batch or None, [], 0
        return full


def query_items(query: Any) -> int:
    """The number of items of a ``{"qid", "items": [...]}`` query (0 when it has none)."""
    items = query.get("items") if isinstance(query, dict) else None
    return len(items) if isinstance(items, list) else 0


def pack_queries(
    queries: Iterable[T],
    max_queries: int,
    max_items: int | None,
    size: Callable[[Any], int] | None = None,
) -> Iterator[list[T]]:
    """:class:`QueryPacker` over a stream of queries."""
    packer = QueryPacker(max_queries, max_items, size)
    for q in queries:
        full = packer.add(q)
        if full:
            yield full
    last = packer.flush()
    if last:
        yield last
