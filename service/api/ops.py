"""Operational routes: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

import os

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from starlette.responses import Response

from service.api.errors import json_response

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> Response:
    return json_response({"status": "ok", "worker": os.getpid()})


@router.get("/readyz", summary="Readiness: every model is restored")
async def readyz(request: Request) -> Response:
    reg = request.app.state.registry
    body = {
        "ready": reg.ready,
        # "" once ready; else what start-up is doing (compiling kernels, restoring a model...)
        "waiting_for": reg.not_ready_reason(),
        "models": len(reg.models),
        "store": reg.store.name,
        "store_up": reg.health.up,
        # Models whose stored state could not be loaded: the others are served.
        "failed_models": reg.failed,
    }
    return json_response(body, 200 if reg.ready else 503)


@router.get("/metrics", summary="Prometheus metrics (all workers when several)")
async def metrics(request: Request) -> Response:
    settings = request.app.state.settings
    if not settings.metrics_public:
        request.app.state.keyring.check(request.headers, "admin")
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        data = generate_latest(registry)
    else:
        data = generate_latest(REGISTRY)
    return Response(data, media_type=CONTENT_TYPE_LATEST)
