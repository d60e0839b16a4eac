"""The Open Inference Protocol (KServe v2 REST), next to the service's own API.

Served: health, server and model metadata, model readiness and ``infer`` for every
model that reads fixed-width rows (dense online classifiers and RankSVM,
LambdaMART, LL-SVM; see :mod:`service.api.v2_outputs`), with the binary tensor
data extension. Sparse or hashed models and FastXML read maps of features, not a
tensor: their metadata, readiness and infer answer 400 (use ``POST /predict``).

The model's ``version`` is the one ``/predict`` reports (an online model's log
position, a batch model's active artifact); ``/versions/{v}`` answers only for the
version served now (404 otherwise). Scoring is ``/predict``'s (the adapter's
``predict_batch``, on the same encoded batch), so answers are identical.

As the protocol says, every error body is ``{"error": message}`` (the service's
other routes answer ``{"detail": ...}``), with ``code`` and ``field`` added; invalid
input is 400 (not 422). API keys (scope ``predict``; the health routes need none),
readiness (503 until every model is restored) and metrics are the other routes'.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api.deps import ready_engine
from service.api.errors import ApiError
from service.api.request_bodies import read_body
from service.api.v2_docs import INFER_DOC, RESPONSES
from service.api.v2_infer import error_answer, infer_answer, served
from service.api.v2_outputs import metadata
from service.engine.model_handle import ModelHandle
from service.errors import ServiceError

router = APIRouter(tags=["open inference protocol (v2)"])


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(obj), status, headers, media_type="application/json")


async def _answer(request: Request, work: Callable[[], Awaitable[Response]]) -> Response:
    """``work()``, its ``ApiError`` as the protocol's error body."""
    try:
        return await work()
    except ServiceError as e:
        status, body, headers = error_answer(e, request.scope.setdefault("state", {}))
        return Response(body, status, headers, media_type="application/json")


async def _served(request: Request, name: str, version: str | None) -> tuple[ModelHandle, int]:
    rstate = request.scope.setdefault("state", {})
    return await served(request.app.state.engine, name, version, rstate)


def _key(request: Request) -> None:
    request.app.state.keyring.check(request.headers, "predict")


@router.get("/v2/health/live", summary="Liveness (v2)", responses=RESPONSES["live"])
async def live() -> Response:
    return _json({"live": True})


@router.get(
    "/v2/health/ready", summary="Readiness (v2): every model restored", responses=RESPONSES["ready"]
)
async def ready(request: Request) -> Response:
    async def work() -> Response:
        ready_engine(request.app.state.engine)
        return _json({"ready": True})

    return await _answer(request, work)


@router.get("/v2", summary="Server metadata (v2)", responses=RESPONSES["server"])
async def server_metadata(request: Request) -> Response:
    async def work() -> Response:
        _key(request)
        return _json(
            {
                "name": "learnserve",
                "version": request.app.version,
                "extensions": ["binary_tensor_data", "classification"],
            }
        )

    return await _answer(request, work)


async def _metadata(request: Request, name: str, version: str | None) -> Response:
    async def work() -> Response:
        _key(request)
        h, width = await _served(request, name, version)
        return _json(metadata(h, width))

    return await _answer(request, work)


async def _ready(request: Request, name: str, version: str | None) -> Response:
    async def work() -> Response:
        _key(request)
        h, _ = await _served(request, name, version)
        if h.adapter.tensor_task == "classify" and not h.adapter.classes():
            raise ApiError(409, "not_fitted", f"model {name!r} has not learned any label yet")
        return _json({"name": h.name, "ready": True})

    return await _answer(request, work)


async def _infer(request: Request, name: str, version: str | None) -> Response:
    # Served by service.api.hot (v2_infer.serve_infer); this runs when a request does
    # reach FastAPI (e.g. an app without the hot layer), with the same handler.
    async def work() -> Response:
        async def read(max_bytes: int, timeout: float) -> bytes:
            return await read_body(request, max_bytes)

        rstate = request.scope.setdefault("state", {})
        body, headers = await infer_answer(
            request.app.state, request.headers, read, name, version, rstate
        )
        return Response(body, headers=headers)

    return await _answer(request, work)


@router.get("/v2/models/{name}", summary="Model metadata (v2)", responses=RESPONSES["model"])
async def model_metadata(request: Request, name: str) -> Response:
    return await _metadata(request, name, None)


@router.get(
    "/v2/models/{name}/versions/{version}",
    summary="Model metadata of a version (v2)",
    responses=RESPONSES["model"],
)
async def version_metadata(request: Request, name: str, version: str) -> Response:
    return await _metadata(request, name, version)


@router.get(
    "/v2/models/{name}/ready", summary="Model readiness (v2)", responses=RESPONSES["ready_model"]
)
async def model_ready(request: Request, name: str) -> Response:
    return await _ready(request, name, None)


@router.get(
    "/v2/models/{name}/versions/{version}/ready",
    summary="Model readiness of a version (v2)",
    responses=RESPONSES["ready_model"],
)
async def version_ready(request: Request, name: str, version: str) -> Response:
    return await _ready(request, name, version)


@router.post(
    "/v2/models/{name}/infer",
    summary="Inference (v2)",
    responses=RESPONSES["infer"],
    openapi_extra=INFER_DOC,
)
async def infer(request: Request, name: str) -> Response:
    return await _infer(request, name, None)


@router.post(
    "/v2/models/{name}/versions/{version}/infer",
    summary="Inference with a version (v2)",
    responses=RESPONSES["infer"],
    openapi_extra=INFER_DOC,
)
async def version_infer(request: Request, name: str, version: str) -> Response:
    return await _infer(request, name, version)
