"""``POST /predict`` and ``POST /update`` (and the Open Inference Protocol's ``infer``,
:mod:`service.api.v2_infer`) served as plain ASGI, ahead of FastAPI.

Between uvicorn and a route handler, FastAPI and Starlette put about seven layers
(error middleware, exception middleware, the router's matching, a ``Request``,
the handler's exception wrapper, a ``Response``). On a one-instance ``/predict``
those cost more than the scoring itself (``bench/http.py``: a no-op FastAPI route
runs at ~0.3x a bare ASGI app). These two routes take nothing but a JSON body,
so this layer answers them directly and hands every other request to FastAPI.

They keep everything the other routes have: API keys and scopes
(:class:`service.api.auth.KeyRing`), the content type, the readiness check, the body
limit and timeout, the one
error body (:func:`service.api.errors.error_body`) and the metrics
(``MetricsMiddleware`` wraps this layer). The pipeline and handlers are
the ones the FastAPI routes of :mod:`service.api.learn` (which document the paths)
run: :mod:`service.api.pipeline`, :mod:`service.engine.requests`.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.errors import error_body
from service.api.pipeline import Handler, serve_json
from service.api.request_bodies import ClientGone, receive_body
from service.api.v2_infer import infer_target, serve_infer
from service.engine.decisions import rank_body, reward_body
from service.engine.requests import predict_body, update_body
from service.settings import Settings

log = logging.getLogger("learnserve.api")


# path -> (API-key scope, handler)
ROUTES: dict[str, tuple[str, Handler]] = {
    "/predict": ("predict", predict_body),
    "/update": ("update", update_body),
}
# /models/{name}/<action>: the same handlers, the model taken from the path.
MODEL_ROUTES: dict[str, tuple[str, Handler]] = {
    "update": ROUTES["/update"],
    "predict": ROUTES["/predict"],
    "rank": ("predict", rank_body),  # a decision (service.engine.decisions)
    "reward": ("update", reward_body),
}
# The only request headers these routes read.
_WANTED = frozenset(
    {b"content-length", b"content-type", b"authorization", b"x-api-key", b"idempotency-key"}
)
_JSON = (b"content-type", b"application/json")
Header = tuple[bytes, bytes]


class HotRoutes:
    """Answer ``POST`` to :data:`ROUTES`; pass everything else to ``app``.

    ``state`` is the application's ``app.state`` (engine, settings, keyring),
    read per request because the lifespan sets the engine after start-up."""

    def __init__(self, app: ASGIApp, state: Any) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await self.serve(scope, receive, send, ()) is not None:
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            path = route_path(scope)
            target = infer_target(path) if path.startswith("/v2/") else None
            if target is not None:  # the Open Inference Protocol's infer
                await serve_infer(self.state, scope, receive, send, target)
                return
        await self.app(scope, receive, send)

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, more_headers: tuple[Header, ...]
    ) -> int | None:
        """Answer a hot route (with ``more_headers`` added to the answer) and return its
        status (0: the client left before its body arrived); ``None``, having done
        nothing, for any other request. The caller's metrics read ``scope["state"]``'s
        ``model`` and ``error_code``."""
        path = route_path(scope) if scope["type"] == "http" else ""
        route, path_model = ROUTES.get(path), None
        if route is None and path.startswith("/models/"):
            path_model, _, action = path[8:].partition("/")
            route = MODEL_ROUTES.get(action) if path_model else None
        if route is None or scope["method"] != "POST":
            return None
        key_scope, handler = route
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            if k in _WANTED:
                name = k.decode("latin-1")
                if name not in headers:  # the first of repeated headers, as Starlette reads
                    headers[name] = v.decode("latin-1")
        rstate = scope.setdefault("state", {})
        if path_model is not None:
            rstate["path_model"] = path_model

        async def read(settings: Settings) -> bytes:
            return await receive_body(
                receive,
                headers.get("content-length"),
                settings.max_body_bytes,
                settings.body_timeout_seconds,
            )

        try:
            status, body, extra = await serve_json(
                self.state, key_scope, handler, headers, read, rstate
            )
        except ClientGone:
            rstate["status"] = 499  # nothing to answer; counted apart from server errors
            return 0
        except Exception:
            # A bug on our side, never the client's input: log it with the traceback.
            log.exception("unhandled error on POST %s", scope["path"])
            status, extra = 500, None
            body = orjson.dumps(error_body("internal_error", "internal error (see the server log)"))
            rstate["error_code"] = "internal_error"
        out = [_JSON, (b"content-length", str(len(body)).encode()), *more_headers]
        if extra:
            out += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})
        return status


def route_path(scope: Scope) -> str:
    """The path the routes match: behind ``--root-path`` uvicorn keeps the prefix in
    ``scope["path"]`` (Starlette's router strips it the same way)."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path
