"""Operational routes: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

import asyncio
import os

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import PlainTextResponse, Response

from service.api.errors import json_response
from service.api.ops_schemas import Health, Readiness
from service.api.schemas import error_responses
from service.observability import metrics as M

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness: the process answers", responses={200: {"model": Health}})
async def healthz() -> Response:
    return json_response({"status": "ok", "worker": os.getpid()})


@router.get(
    "/readyz",
    summary="Readiness: every model is restored",
    responses={
        200: {"model": Readiness},
        503: {"model": Readiness, "description": "models are still being restored"},
    },
)
async def readyz(request: Request) -> Response:
    reg = request.app.state.engine
    body = {
        "ready": reg.ready,
        # "" once ready; else what start-up is doing (compiling kernels, restoring a model...)
        "waiting_for": reg.not_ready_reason(),
        "models": len(reg.models),
        "store": reg.store.name,
        "store_up": reg.health.up,
        # Models whose stored state could not be loaded: the others are served.
        "failed_models": reg.failed,
        # Models waiting for numba kernels still compiling (503 + Retry-After meanwhile).
        "pending_models": {
            name: reg.registry.kernels.describe(fams) for name, fams in reg.registry.pending.items()
        },
        # LEARNSERVE_OWNERSHIP: this member and the live members it sees (sharded).
        "fleet": reg.placement.fleet(),
    }
    return json_response(body, 200 if reg.ready else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics (all workers when several)",
    response_class=PlainTextResponse,
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **error_responses(401, 403),
    },
)
async def metrics(request: Request) -> Response:
    settings = request.app.state.settings
    if not settings.metrics_public:
        request.app.state.keyring.check(request.headers, "admin")
    reg = request.app.state.engine
    # The catalog as this worker knows it, taken here on the loop: the thread must
    # not iterate dicts the loop is changing. Deleted models' series are left out.
    live = frozenset(reg.models) | frozenset(reg.failed)
    # Thousands of models make an exposition of megabytes (reading every worker's
    # file): built on the loop it stalled every other request, /healthz included.
    data = await asyncio.to_thread(M.exposition, live)
    return Response(data, media_type=CONTENT_TYPE_LATEST)
