"""``/models``: create (PUT, idempotent), list, describe, delete."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api.auth import AdminScope, PredictScope
from service.api.deps import EngineDep, SettingsDep
from service.api.descriptions import describe
from service.api.errors import ApiError, invalid, json_response, store_unavailable
from service.api.ops_schemas import CheckpointResponse
from service.api.request_bodies import OCTETS_TYPE, read_body, read_json_object
from service.api.schemas import ModelInfo, ModelList, body_doc, error_responses
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.errors import Kind, ServiceError
from service.models.kinds import adapter_for_body
from service.store.base import StoreUnavailable, validate_name

router = APIRouter(tags=["models"])
log = logging.getLogger("learnserve.api")

# Describing a model takes tens of microseconds once its digest is cached.
LIST_YIELD_EVERY = 32

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise invalid(f"name: {name[:80]!r} must be 1-64 characters of A-Z a-z 0-9 . _ -", "name")
    try:
        return validate_name(name)  # the stores' rules (e.g. "." and ".." are reserved)
    except ValueError as e:
        raise invalid(f"name: {e}", "name") from None


CREATE_DESCRIPTION = """\
Two bodies:

- `application/json`: a config (`ModelCreate`: algorithm, params, features); a new
  model starts with zero weights.
- `application/octet-stream`: an artifact of an online model (`GET
  /models/{name}/state` of this or another service, or `model.to_bytes()` of a
  `learners` model whose `features_` is set): the model starts from its state,
  bit-exact (same `state_digest`), with its algorithm, params and features (a
  decision model's: its config and decision state too, not its decisions awaiting a
  reward; a challenger's imports as a standalone decision model). Its
  config records the artifact's SHA-256 (`imported`). A malformed, truncated or
  corrupted artifact, one of a batch kind, or one without `meta.features` is a 422
  naming the problem (`field: "artifact"`); nothing is created.

Idempotent: the same body again answers 200 with the model; a different config
(or another artifact) for an existing name is 409.
"""

_CREATE_BODY = body_doc("ModelCreate")
_CREATE_BODY["requestBody"]["content"][OCTETS_TYPE] = {
    "schema": {"type": "string", "format": "binary"}
}


@router.put(
    "/models/{name}",
    summary="Create an online model from a config, or from an exported artifact (idempotent)",
    description=CREATE_DESCRIPTION,
    status_code=201,
    responses={200: {"model": ModelInfo, "description": "already exists with this config"},
               201: {"model": ModelInfo}, **error_responses(401, 403, 409, 413, 422, 503)},
    openapi_extra=_CREATE_BODY,
)  # fmt: skip
async def put_model(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: AdminScope
) -> Response:
    check_name(name)
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if media == OCTETS_TYPE:
        blob = await read_body(request, settings.max_artifact_bytes)
        if not blob:
            raise invalid("artifact: the body is empty; send the artifact file", "artifact")
        h, created = await _created_or_undone(engine, name, lambda: engine.import_model(name, blob))
        request.state.model = name
        return json_response(await describe(h), 201 if created else 200)
    body = await read_json_object(request, settings.max_body_bytes)
    cls = adapter_for_body(body)
    config = cls.normalize_config(body, settings)
    h, created = await _created_or_undone(engine, name, lambda: engine.create(name, cls, config))
    request.state.model = name  # only names that exist become metric labels
    return json_response(await describe(h), 201 if created else 200)


# What a failed creation may leave stored: a store outage (the model is stored and any
# worker loads it later, as the 503 says) or a conflict (another request's model) is kept.
_KEPT = (Kind.UNAVAILABLE, Kind.CONFLICT)


async def _created_or_undone(
    engine: Engine, name: str, creating: Callable[[], Awaitable[tuple[ModelHandle, bool]]]
) -> tuple[ModelHandle, bool]:
    """``creating()`` (``engine.create`` or ``import_model`` of ``name``), undone when it
    fails after storing a model that was not there before: a config the store took but
    a worker cannot load (a 500, or a refusal from the loading) is deleted again, so the
    name is free and no failed model survives restarts. Configs are validated before
    anything is stored (``normalize_config``); this is for what validation missed."""
    try:
        absent = await engine.registry.store.get_config(name) is None
    except StoreUnavailable:
        absent = False  # not known: never undo (the creation will say what is wrong)
    try:
        return await creating()
    except Exception as e:
        if not absent or (isinstance(e, ServiceError) and e.kind in _KEPT):
            raise
        try:
            await engine.delete(name)
        except ServiceError as undo:
            if undo.kind is not Kind.NOT_FOUND:  # (nothing was stored: nothing to undo)
                log.warning("model %r: undoing its failed creation failed: %s", name, undo)
        else:
            log.warning("model %r: its creation failed after storing; deleted again", name)
        raise


@router.get(
    "/models",
    summary="List models",
    responses={200: {"model": ModelList}, **error_responses(401, 403)},
)
async def list_models(engine: EngineDep, _: PredictScope) -> Response:
    with contextlib.suppress(Exception):  # store down: list what this worker holds
        await engine.sync_catalog()
    listed = []
    for i, h in enumerate(list(engine.models.values())):
        if i and i % LIST_YIELD_EVERY == 0:
            # Thousands of models: let the loop serve others between slices.
            await asyncio.sleep(0)
        listed.append(await describe(h))
    # Encoding megabytes of JSON is the other long step: off the loop.
    body = await asyncio.to_thread(orjson.dumps, {"models": listed}, option=orjson.OPT_NON_STR_KEYS)
    return Response(body, media_type="application/json")


@router.get(
    "/models/{name}",
    summary="Describe a model: config, version, labels, online metrics, checkpoint, digest",
    responses={200: {"model": ModelInfo}, **error_responses(401, 403, 404)},
)
async def get_model(name: str, request: Request, engine: EngineDep, _: PredictScope) -> Response:
    held = name in engine.models  # before find(), which loads a guest copy
    h = await engine.find(name)
    request.state.model = name
    info = await describe(h)
    info["ownership"] = engine.placement.describe(name, held)
    return json_response(info)


@router.post(
    "/models/{name}/checkpoint",
    summary="Write a checkpoint of the model now (e.g. before maintenance)",
    responses={200: {"model": CheckpointResponse}, **error_responses(401, 403, 404, 409, 503)},
)
async def checkpoint_model(
    name: str, request: Request, engine: EngineDep, _: AdminScope
) -> Response:
    h = await engine.find(name)
    request.state.model = name
    if not h.adapter.online:
        raise ApiError(
            409, "not_online", f"model {name!r} is a batch model; its artifacts are stored as is"
        )
    t0 = time.perf_counter()
    # A follower is written with its leader, at the leader's position: checkpoint that.
    target = h.leader if h.leader is not None else h
    while target.checkpointing:  # one at a time per model: wait for the running one
        await asyncio.sleep(0.01)
    before = h.checkpoint_position
    await engine.checkpoint(target)
    outcome = target.checkpoint_outcome
    if outcome in ("store_unavailable", "failed"):
        raise store_unavailable("the checkpoint could not be written; retry later")
    written = h.checkpoint_position > before
    # when nothing was written, what happened instead: said, not a 503 (the store is up)
    reason = "behind" if outcome == "written" else outcome
    note = None if written else CHECKPOINT_NOTES.get(reason)
    body: dict[str, Any] = {
        "model": name,
        "written": written,
        "position": h.checkpoint_position,
        "duration_seconds": time.perf_counter() - t0,
    }
    if note is not None:
        body["note"] = note
    return json_response(body)


CHECKPOINT_NOTES = {
    "not_needed": "nothing new since the stored checkpoint",
    "leased_elsewhere": "another worker holds the checkpoint lease and writes it; this "
    "worker's copy was not written",
    "deleted": "the model was deleted meanwhile",
    "behind": "the leader's checkpoint was written; this follower was behind it and is "
    "written with the leader's next one",
}


@router.delete(
    "/models/{name}",
    summary="Delete a model and everything stored for it",
    description="A leader with followers (409 `has_followers`) and a promoted follower (409 "
    "`promoted`) are not deleted: the store checks it in the step that deletes, so a delete "
    "racing the creation or the promotion of a follower never leaves an orphan follower nor "
    "a promotion of a deleted model.",
    status_code=204,
    responses=error_responses(401, 403, 404, 409, 503),
)
async def delete_model(name: str, request: Request, engine: EngineDep, _: AdminScope) -> Response:
    check_name(name)
    await engine.delete(name)
    return Response(status_code=204)
