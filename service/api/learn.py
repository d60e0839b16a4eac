"""``POST /update`` (learn) and ``POST /predict`` (score), the hot paths.

Bodies are read as bytes, parsed with orjson and validated by the model's
adapter; no per-example pydantic objects are built.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import Response

from service import metrics as M
from service.api.deps import not_ready
from service.api.errors import ApiError, json_response
from service.api.schemas import (
    PredictRequest,
    PredictResponse,
    UpdateRequest,
    UpdateResponse,
    body_doc,
    error_responses,
)
from service.limits import optional_int, parse_json_object, read_body, require_str
from service.registry import Registry
from service.settings import Settings

router = APIRouter(tags=["learning"])


def hot_path(request: Request, scope: str) -> tuple[Registry, Settings]:
    """Auth + readiness as plain calls: on these two routes FastAPI's dependency
    resolution costs as much as the work itself (measured with bench/http.py).
    Same checks as the ``AdminScope``/``RegistryDep`` dependencies elsewhere."""
    state = request.app.state
    state.keyring.check(request, scope)
    registry: Registry = state.registry
    if not registry.ready:
        raise not_ready()
    return registry, state.settings


@router.post(
    "/update",
    summary="Learn from a batch of labelled examples (answers once durable and applied)",
    responses={200: {"model": UpdateResponse}, **error_responses(401, 403, 404, 413, 422, 503)},
    openapi_extra=body_doc(UpdateRequest),
)
async def update(request: Request) -> Response:
    registry, settings = hot_path(request, "update")
    raw = await read_body(request, settings.max_body_bytes)
    body = parse_json_object(raw)
    name = require_str(body, "model")
    h = await registry.find(name)
    request.state.model = name
    if not h.adapter.online:
        raise ApiError(
            409, "not_online", f"model {name!r} is a batch model; it cannot learn online"
        )
    # Validate + encode everything before anything is written: a bad batch never
    # reaches the log, so it can never change a model on any replica.
    if len(raw) > settings.parse_in_thread_bytes:
        # Encoding a big batch takes tens of ms: off the loop, so predicts keep
        # flowing (parse_update reads only the model's config, never its state).
        payload, n = await asyncio.to_thread(h.adapter.parse_update, body, settings, raw)
    else:
        payload, n = h.adapter.parse_update(body, settings, raw)
    version = await registry.submit_update(h, payload)
    M.EXAMPLES_ACCEPTED.labels(name).inc(n)
    return json_response({"model": name, "applied": n, "version": version})


@router.post(
    "/predict",
    summary="Score instances (labels come back with the type they were learned with)",
    responses={
        200: {"model": PredictResponse},
        **error_responses(401, 403, 404, 409, 413, 422, 503),
    },
    openapi_extra=body_doc(PredictRequest),
)
async def predict(request: Request) -> Response:
    registry, settings = hot_path(request, "predict")
    raw = await read_body(request, settings.max_body_bytes)
    body = parse_json_object(raw)
    name = require_str(body, "model")
    h = await registry.find(name)
    request.state.model = name
    min_version = optional_int(body, "min_version")
    if min_version is not None and h.version < min_version:
        ok = await registry.wait_for_version(h, min_version, settings.min_version_wait_seconds)
        if not ok:
            raise ApiError(
                503,
                "version_not_reached",
                f"this worker is at version {h.version} of {name!r}, "
                f"min_version {min_version} not reached in time",
                "min_version",
                headers={"Retry-After": "1"},
            )
    predictions = h.adapter.predict(body, settings, raw)
    return json_response({"model": name, "version": h.version, "predictions": predictions})
