"""The FastAPI application: ``create_app(settings)``.

The lifespan opens the store, starts the replication task (which restores every
model — checkpoint, then replay of the log — and only then marks the service
ready, see ``/readyz``), and closes everything on shutdown.

Run with uvicorn (workers need an import string)::

    uvicorn --factory service.app:factory      # settings from LEARNSERVE_* env
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api import (
    artifacts,
    decisions,
    explain,
    followers,
    learn,
    model_state,
    models,
    ops,
    v2,
)
from service.api.auth import KeyRing
from service.api.docs_pages import install_docs
from service.api.errors import install_handlers
from service.api.hot import HotRoutes, route_path
from service.api.openapi import install_openapi
from service.engine.apply_loop import Replicator
from service.engine.facade import Engine
from service.observability import metrics as M
from service.observability.loop_monitor import start_loop_monitor, stop_loop_monitor
from service.observability.process_stats import start_process_stats, stop_process_stats
from service.settings import Settings

log = logging.getLogger("learnserve")

_NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


def _telemetry_kwargs(settings: Settings) -> dict[str, Any]:
    return {} if settings.otel else {"telemetry": _NO_TELEMETRY}


_ERROR_CODE = re.compile(rb'"error"\s*:\s*"([a-z_]{1,40})"')
_DEFAULT_ERROR = "no_body"  # a 499 (client gone) or an answer without our error body
# the route templates HotRoutes.serve answers (service.api.hot: ROUTES and MODEL_ROUTES)
_HOT_TEMPLATES = frozenset(
    {"/predict", "/update", "/models/{name}/predict", "/models/{name}/update"}
)


def error_code(body: bytes) -> str:
    """The ``detail.error`` code of an error body (``invalid_input``, ``not_ready``...)."""
    found = _ERROR_CODE.search(body[:4096])
    return found.group(1).decode() if found else ""


class MetricsMiddleware:
    """Requests, latency and in-flight per route template (never the raw path) and model.

    Pure ASGI (no BaseHTTPMiddleware) to keep the per-request cost low; the
    outermost layer, so it also counts what the hot routes answer. Also adds
    ``X-Worker: <pid>`` so clients and tests can tell workers apart.
    """

    def __init__(self, app: ASGIApp, routes: list[Any]) -> None:
        self.app = app
        self._pid = str(os.getpid()).encode()
        # Route templates from the routers themselves (FastAPI may wrap included
        # routers, so the app's own route list is not flat).
        self._static = {r.path: r.path for r in routes if "{" not in r.path}
        self._dynamic = [(r.path_regex, r.path) for r in routes if "{" in r.path]
        self._in_flight: dict[str, Any] = {}
        self._worker_header = ((b"x-worker", self._pid),)
        self._hot = app if isinstance(app, HotRoutes) else None

    def _route(self, scope: Scope) -> str:
        path = route_path(scope)
        hit = self._static.get(path)
        if hit is not None:
            return hit
        for regex, template in self._dynamic:
            if regex.match(path):
                return template
        return "unmatched"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = self._route(scope)
        if self._hot is not None and route in _HOT_TEMPLATES and scope["method"] == "POST":
            await self._serve_hot(self._hot, route, scope, receive, send)
            return
        status = 0
        pid = self._pid

        error = ""

        async def send_wrapper(message: Message) -> None:
            nonlocal status, error
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-worker", pid)]
            elif status >= 400 and not error:  # the error code, for errors by code
                error = error_code(message.get("body", b""))
            await send(message)

        in_flight = self._begin(route)
        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            in_flight.inc(-1)
            self._record(route, scope, status, error, t0)

    async def _serve_hot(
        self, hot: HotRoutes, route: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A hot route's request: the same figures, without wrapping ``send`` (the hot
        route adds ``X-Worker`` and tells its status; its error code is in the state)."""
        in_flight = self._begin(route)
        t0 = time.perf_counter()
        status: int | None = 0  # an error escaped: counted as a 500 below
        try:
            status = await hot.serve(scope, receive, send, self._worker_header)
            if status is None:  # never: the templates are the hot routes' (served anyway)
                await hot.app(scope, receive, send)
                status = 500
        finally:
            in_flight.inc(-1)
            self._record(route, scope, status or 0, "", t0)

    def _begin(self, route: str) -> Any:
        """The route's in-flight gauge (its value), one more in flight."""
        in_flight = self._in_flight.get(route)
        if in_flight is None:
            in_flight = self._in_flight[route] = M.raw(M.IN_FLIGHT.labels(route))
        in_flight.inc(1)
        return in_flight

    @staticmethod
    def _record(route: str, scope: Scope, status: int, error: str, t0: float) -> None:
        """Count an answered request: ``status`` 0 when none was sent (the client left:
        499 in the request state, else an error escaped: 500); the error code from the
        request state, else ``error`` (read from the body: /v2's answers)."""
        state = scope.get("state", {})
        error = state.get("error_code") or error
        if not status:
            status = state.get("status", 500)
        # Cached children, dropped with the model (service.observability.metrics.forget_model).
        children = M.request_children(route, state.get("model", ""), status)
        children[0].observe(time.perf_counter() - t0)
        children[1].inc(1)
        if status >= 400:
            M.REQUEST_ERRORS.labels(route, str(status), error or _DEFAULT_ERROR).inc()


def _open_store(settings: Settings) -> Any:
    from service.store import open_store

    return open_store(
        settings.redis_url,
        settings.data_dir,
        socket_timeout=settings.store_timeout_seconds,
        connect_timeout=settings.store_timeout_seconds,
        cluster=settings.redis_cluster,
        waitaof=settings.redis_wait_aof or settings.redis_waitaof,
        wait_replicas=settings.redis_wait_replicas,
        wait_timeout=settings.redis_wait_timeout_seconds,
    )


class LearnserveAPI(FastAPI):
    """FastAPI with the hot routes (``service.api.hot``) and the metrics outside its stack."""

    def build_middleware_stack(self) -> ASGIApp:
        routes = [r for r in self.router.routes if isinstance(r, Route)]
        return MetricsMiddleware(HotRoutes(super().build_middleware_stack(), self.state), routes)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    if not settings.auth_enabled and not settings.is_loopback():
        log.warning(
            "!!! learnserve binds %s WITHOUT API keys: anyone who can reach it can "
            "change or delete models. Set LEARNSERVE_API_KEYS. !!!",
            settings.host,
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = _open_store(settings)
        await store.open()
        engine = Engine(store, settings)
        app.state.engine = engine
        replicator = Replicator(engine)
        # The replicator restores every model first (retrying while the store is
        # unreachable); /readyz turns 200 once that is done.
        replicator.start()
        lag_monitor = start_loop_monitor(settings)
        process_stats = start_process_stats()
        try:
            yield
        finally:
            await stop_process_stats(process_stats)
            await stop_loop_monitor(lag_monitor)
            await replicator.stop()
            await engine.close()
            await store.close()
            if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                from prometheus_client import multiprocess

                multiprocess.mark_process_dead(os.getpid())

    app = LearnserveAPI(
        title="learnserve",
        version="0.1.0",
        summary="Models that learn while they serve.",
        description=(
            "Online models learn from `POST /update` and score with `POST /predict`. "
            'Errors have one shape: `{"detail": {"error", "message", "field"}}`. '
            "In `scores`, label keys are strings (JSON object keys); `label` keeps its type."
        ),
        lifespan=lifespan,
        # /docs and /redoc with their assets served here, not from a CDN (install_docs)
        docs_url=None,
        redoc_url=None,
        # FastAPI's built-in OpenTelemetry hooks look up the providers on every request;
        # our metrics are Prometheus (service/observability/metrics.py);
        # LEARNSERVE_OTEL=true keeps them.
        # (Older FastAPI versions keep unknown keyword arguments in ``app.extra``.)
        **_telemetry_kwargs(settings),
    )
    app.state.settings = settings
    app.state.keyring = KeyRing(settings.api_keys)
    install_handlers(app)
    routers = [
        learn.router,
        decisions.router,
        models.router,
        model_state.router,
        explain.router,
        artifacts.router,
        followers.router,
        ops.router,
        v2.router,
    ]
    _add_routes(app, routers)
    install_openapi(app, settings)
    install_docs(app)
    return app


def _add_routes(app: FastAPI, routers: list[APIRouter]) -> None:
    """Our routes, flat on the app and ahead of the docs routes.

    ``include_router`` (FastAPI >= 0.16x) wraps each router and matches through the
    wrappers (~50-90 us more per request, measured); our routers carry no prefix or
    router-level dependencies, so the route objects are used as they are."""
    ours: list[BaseRoute] = [r for router in routers for r in router.routes]
    app.router.routes[:0] = ours
    mark = getattr(app.router, "_mark_routes_changed", None)
    if mark is not None:
        mark()


def factory() -> FastAPI:
    """For ``uvicorn --factory service.app:factory`` (settings from the environment)."""
    logging.basicConfig(
        level=os.environ.get("LEARNSERVE_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
    )
    return create_app(Settings())
