"""``POST /update`` (learn) and ``POST /predict`` (score), the hot paths, documented.

Requests are served by :mod:`service.api.hot` (plain ASGI, ahead of FastAPI's
stack); the FastAPI routes here document the routes in OpenAPI and, when a request
does reach them, run the same pipeline (:mod:`service.api.pipeline`) and handlers
(:mod:`service.engine.requests`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api.pipeline import Handler, serve_json
from service.api.request_bodies import (
    read_body,
)
from service.api.schemas import (
    PredictRequest,
    PredictResponse,
    UpdateRequest,
    UpdateResponse,
    body_doc,
    error_responses,
)
from service.api.update_docs import (
    IDEMPOTENCY_KEY_PARAM,
    IDEMPOTENT_REPLAYED_HEADER,
    UPDATE_DESCRIPTION,
)
from service.engine.requests import predict_body, update_body
from service.settings import Settings

router = APIRouter(tags=["learning"])


async def _serve(
    request: Request, scope: str, handler: Handler, path_model: str | None = None
) -> Response:
    rstate = request.scope.setdefault("state", {})
    if path_model is not None:
        rstate["path_model"] = path_model
    headers: dict[str, str] = {}
    for k, v in request.headers.items():
        headers.setdefault(k, v)  # the first of repeated headers, as the hot path reads

    async def read(settings: Settings) -> bytes:
        return await read_body(request, settings.max_body_bytes)

    status, body, extra = await serve_json(request.app.state, scope, handler, headers, read, rstate)
    return Response(body, status, extra, media_type="application/json")


@router.post(
    "/update",
    summary="Learn from a batch of labelled examples (answers once durable and applied)",
    description=UPDATE_DESCRIPTION,
    responses={
        200: {"model": UpdateResponse, "headers": IDEMPOTENT_REPLAYED_HEADER},
        **error_responses(401, 403, 404, 409, 413, 422, 503),
    },
    openapi_extra={**body_doc(UpdateRequest), "parameters": [IDEMPOTENCY_KEY_PARAM]},
)
async def update(request: Request) -> Response:
    return await _serve(request, "update", update_body)


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
    return await _serve(request, "predict", predict_body)


# The same two routes with the model in the path, so a proxy can route by model
# (consistent hashing on the path) without reading bodies: see the README's
# "Sharded ownership". The body is the same; its "model" may be left out.
_BY_PATH = (
    " The model is the one in the path; a body `model`, if given, must be the same "
    "(else 422). A proxy can route by model on the path alone (e.g. nginx `hash "
    "$model consistent`, Envoy `ring_hash`), which sends each model to its owners."
)


@router.post(
    "/models/{name}/update",
    summary="Learn from a batch of labelled examples, the model named in the path",
    description=UPDATE_DESCRIPTION + _BY_PATH,
    responses={
        200: {"model": UpdateResponse, "headers": IDEMPOTENT_REPLAYED_HEADER},
        **error_responses(401, 403, 404, 409, 413, 422, 503),
    },
    openapi_extra={**body_doc("UpdateByPathRequest"), "parameters": [IDEMPOTENCY_KEY_PARAM]},
)
async def update_by_path(name: str, request: Request) -> Response:
    return await _serve(request, "update", update_body, name)


@router.post(
    "/models/{name}/predict",
    summary="Score instances with the model named in the path",
    description=_BY_PATH.strip(),
    responses={
        200: {"model": PredictResponse},
        **error_responses(401, 403, 404, 409, 413, 422, 503),
    },
    openapi_extra=body_doc("PredictByPathRequest"),
)
async def predict_by_path(name: str, request: Request) -> Response:
    return await _serve(request, "predict", predict_body, name)
