"""``POST /update`` (learn) and ``POST /predict`` (score), the hot paths.

Bodies are read as bytes, parsed with orjson and validated by the model's
adapter; no per-example pydantic objects are built. Requests are served by
:mod:`service.api.hot` (plain ASGI, ahead of FastAPI's stack); the FastAPI routes
here document the two routes in OpenAPI and run the same handlers when a request
does reach them.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api import delayed_labels
from service.api.deps import not_ready
from service.api.errors import ApiError, invalid, json_response
from service.api.finite import refuse_nonfinite
from service.api.request_bodies import (
    check_content_type,
    check_utf8_start,
    optional_int,
    parse_json_object,
    read_body,
    require_str,
)
from service.api.schemas import (
    IDEMPOTENCY_KEY_PARAM,
    IDEMPOTENT_REPLAYED_HEADER,
    UPDATE_DESCRIPTION,
    PredictRequest,
    PredictResponse,
    UpdateRequest,
    UpdateResponse,
    body_doc,
    error_responses,
)
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.errors import ServiceError
from service.observability import metrics as M
from service.settings import Settings

router = APIRouter(tags=["learning"])


async def update_body(
    engine: Engine,
    settings: Settings,
    raw: bytes,
    state: dict[str, Any],
    headers: Mapping[str, str],
) -> dict[str, Any]:
    """Learn from one ``/update`` body; the answer once it is durable and applied.

    ``state`` is the request's scope state: the model's name goes there for the
    per-model metrics, and response headers to add under ``"reply_headers"``.
    ``headers``: the request's headers (lower-case names); an ``Idempotency-Key``
    makes the update happen at most once per key (see ``submit_update_once``)."""
    key = headers.get("idempotency-key")
    if key is not None:
        check_idempotency_key(key)
    check_utf8_start(raw)  # before the bytes scanners, which read ASCII structure
    # Validate + encode everything before anything is written: a bad batch never
    # reaches the log, so it can never change a model on any replica.
    parsed = await _parse_raw(engine, settings, raw, state.get("path_model"))
    if parsed is not None:
        h, payload, n = parsed
    else:  # the general path: every body, with errors naming the field
        body = parse_json_object(raw)
        only_one_of(body, "examples", "queries")
        name = model_name(body, state)
        h = await engine.find(name)
        if not h.adapter.online:
            raise ApiError(
                409, "not_online", f"model {name!r} is a batch model; it cannot learn online"
            )
        if delayed_labels.sent_ids(body, "examples"):  # labels of earlier predictions
            state["model"] = h.name
            keyed = None
            if key is not None:  # the request's own bytes, as below
                keyed = (key, str(await _off_loop_if_big(settings, raw, _sha256, raw)))
            return await delayed_labels.update_with_ids(
                engine, settings, h, body, raw, keyed, state
            )
        payload, n = await _off_loop_if_big(
            settings, raw, h.adapter.parse_update, body, settings, raw
        )
    state["model"] = h.name
    # A dry run on the current state (no await: no update lands meanwhile): a batch
    # that would make the weights non-finite is refused before the log sees it.
    try:
        h.adapter.check_update(payload)
    except ServiceError:
        # A retry of a batch appended before (by a worker whose state was behind) is
        # answered as the first request was, not refused anew on today's state.
        if key is None or not await engine.key_recorded(h, key):
            raise
    if key is None:
        version = await engine.submit_update(h, payload)
    else:
        # The request's own bytes, not the log entry: both parse paths must see one
        # body as one body (they may encode it differently, e.g. -0.0 as 0.0).
        digest = await _off_loop_if_big(settings, raw, _sha256, raw)
        version, n, replayed = await engine.submit_update_once(h, payload, key, digest, n)
        if replayed:
            state["reply_headers"] = {"Idempotent-Replayed": "true"}
            return answer(h, n, version)
    M.EXAMPLES_ACCEPTED.labels(h.name).inc(n)
    return answer(h, n, version)


def answer(h: ModelHandle, n: int, version: int) -> dict[str, Any]:
    """The /update answer; ``correct``: examples of the entry at ``version`` predicted
    right before they were learned (None when not known here: a ranker's, or an entry
    this worker did not apply itself)."""
    return {"model": h.name, "applied": n, "version": version, "correct": h.correct_at.get(version)}


# Printable ASCII (space to tilde), 1 to 200 characters.
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,200}")


def check_idempotency_key(key: str) -> None:
    if _IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise ApiError(
            422,
            "invalid_input",
            "Idempotency-Key must be 1 to 200 printable ASCII characters",
            "Idempotency-Key",
        )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# The top-level "model" key: in a body the fast parsers accept, the only key so named.
_MODEL_KEY = re.compile(rb'"model"\s*:\s*"([A-Za-z0-9._-]{1,64})"')


def only_one_of(body: dict[str, Any], a: str, b: str) -> None:
    """The body carries ``a`` or ``b``, not both (the document's ``oneOf``): a model
    reads only one of them, and the other would be silently ignored."""
    if a in body and b in body:
        raise invalid(f"{b}: give either {a!r} or {b!r}, not both", b)


def model_name(body: dict[str, Any], state: dict[str, Any]) -> str:
    """The body's ``model``; on ``/models/{name}/...`` the path's, which a body
    ``model`` may repeat but not contradict."""
    path = state.get("path_model")
    if path is None:
        return require_str(body, "model")
    given = body.get("model", path)
    if given != path:
        raise invalid(
            f"model: {str(given)[:80]!r} differs from the model in the path ({path!r})", "model"
        )
    return str(path)


async def _parse_raw(
    engine: Engine, settings: Settings, raw: bytes, path_model: str | None = None
) -> tuple[ModelHandle, bytes, int] | None:
    """The adapter's bytes-only parse (``parse_update_raw``), when it takes the body
    (on ``/models/{name}/update``, a body naming the path's model; any other body
    goes the general way, which says what is wrong)."""
    m = _MODEL_KEY.search(raw)
    name = m.group(1).decode() if m else None
    if path_model is not None and name != path_model:
        return None
    h = engine.models.get(name) if name else None
    if h is None or not h.adapter.online:
        return None
    fast = await _off_loop_if_big(settings, raw, h.adapter.parse_update_raw, raw, settings)
    if fast is None or fast.model != h.name:
        return None
    return h, fast.payload, fast.n


async def _off_loop_if_big(settings: Settings, raw: bytes, fn: Any, *args: Any) -> Any:
    # Encoding a big batch takes tens of ms: off the loop, so predicts keep flowing
    # (parsing reads only the model's config, never its state).
    if len(raw) > settings.parse_in_thread_bytes:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


async def predict_body(
    engine: Engine,
    settings: Settings,
    raw: bytes,
    state: dict[str, Any],
    headers: Mapping[str, str],
) -> dict[str, Any]:
    """Score one ``/predict`` body (after waiting for ``min_version`` if asked)."""
    body = parse_json_object(raw)
    only_one_of(body, "instances", "queries")
    name = model_name(body, state)
    h = await engine.find(name)
    state["model"] = name
    min_version = optional_int(body, "min_version")
    if "k" in body:  # read by FastXML only, but documented (and checked) for every model
        k = optional_int(body, "k", minimum=1)
        if k is None or k > 100:
            raise invalid(f"k: must be an integer in [1, 100], got {body['k']!r}", "k")
    if min_version is not None and h.version < min_version:
        ok = await engine.wait_for_version(h, min_version, settings.min_version_wait_seconds)
        if not ok:
            raise ApiError(
                503,
                "version_not_reached",
                f"this worker is at version {h.version} of {name!r}, "
                f"min_version {min_version} not reached in time",
                "min_version",
                headers={"Retry-After": "1"},
            )
    if (b'id"' in raw or b"\\" in raw) and delayed_labels.sent_ids(body, "instances"):
        version = h.version  # that of the predictions (the store write may see a newer)
        tracked = await delayed_labels.predict_tracked(engine, settings, h, body, raw)
        return {"model": name, "version": version, "predictions": tracked}
    predictions = h.adapter.predict(body, settings, raw)
    refuse_nonfinite(predictions, "queries" if "queries" in body else "instances")
    return {"model": name, "version": h.version, "predictions": predictions}


def ready_engine(engine: Engine) -> Engine:
    if not engine.ready:
        raise not_ready(engine)
    return engine


async def _serve(
    request: Request, scope: str, handler: Any, path_model: str | None = None
) -> Response:
    state = request.app.state
    state.keyring.check(request.headers, scope)
    check_content_type(request.headers.get("content-type"))
    engine = ready_engine(state.engine)
    settings: Settings = state.settings
    raw = await read_body(request, settings.max_body_bytes)
    rstate = request.scope.setdefault("state", {})
    if path_model is not None:
        rstate["path_model"] = path_model
    answer = await handler(engine, settings, raw, rstate, request.headers)
    return json_response(answer, headers=rstate.get("reply_headers"))


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
