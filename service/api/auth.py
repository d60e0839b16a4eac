"""API keys with scopes: ``predict``, ``update``, ``admin``.

When ``LEARNSERVE_API_KEYS`` is set, every route except ``/healthz``, ``/readyz``,
``/v2/health/live|ready`` (and ``/metrics`` unless ``LEARNSERVE_METRICS_PUBLIC=false``)
needs a key sent as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``:

- ``predict``: ``POST /predict``, every ``GET`` of models and the other ``/v2`` routes;
- ``update``: ``POST /update``;
- ``admin``: ``PUT``/``DELETE /models/{name}`` (and artifacts), and ``/metrics`` when not public.

A missing or unknown key is 401, a key without the scope is 403. Keys are kept
only as SHA-256 digests, looked up by digest (no timing leak of key prefixes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Coroutine, Mapping
from typing import Annotated, Any

from fastapi import Depends, Request

from service.api.errors import ApiError


class KeyRing:
    def __init__(self, keys: dict[str, list[str]]) -> None:
        self._by_digest = {_digest(k): frozenset(v) for k, v in keys.items()}

    @property
    def enabled(self) -> bool:
        return bool(self._by_digest)

    def check(self, headers: Mapping[str, str], scope: str) -> None:
        """Raise 401/403 unless ``headers`` (lower-case names) carry a key with ``scope``."""
        if not self._by_digest:
            return
        key = _presented_key(headers)
        if key is None:
            raise ApiError(
                401,
                "unauthorized",
                "an API key is required (Authorization: Bearer <key> or X-API-Key)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        scopes = self._by_digest.get(_digest(key))
        if scopes is None:
            raise ApiError(
                401, "unauthorized", "unknown API key", headers={"WWW-Authenticate": "Bearer"}
            )
        if scope not in scopes:
            raise ApiError(403, "forbidden", f"this API key lacks the {scope!r} scope")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def _presented_key(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization")
    if auth:
        kind, _, token = auth.partition(" ")
        if kind.lower() == "bearer" and token.strip():
            return token.strip()
    key = headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


def require(scope: str) -> Callable[[Request], Coroutine[Any, Any, None]]:
    async def dependency(request: Request) -> None:
        request.app.state.keyring.check(request.headers, scope)

    dependency.__name__ = f"require_{scope}"
    return dependency


PredictScope = Annotated[None, Depends(require("predict"))]
UpdateScope = Annotated[None, Depends(require("update"))]
AdminScope = Annotated[None, Depends(require("admin"))]
