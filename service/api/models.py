"""``/models``: create (PUT, idempotent), list, describe, delete."""

from __future__ import annotations

import contextlib
import re

from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api.deps import RegistryDep, SettingsDep
from service.api.errors import invalid, json_response
from service.api.schemas import ModelCreate, ModelInfo, ModelList, body_doc, error_responses
from service.auth import AdminScope, PredictScope
from service.limits import read_json_object
from service.models import adapter_for_body

router = APIRouter(tags=["models"])

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise invalid(f"name: {name[:80]!r} must be 1-64 characters of A-Z a-z 0-9 . _ -", "name")
    return name


@router.put(
    "/models/{name}",
    summary="Create an online model (idempotent)",
    status_code=201,
    responses={200: {"model": ModelInfo, "description": "already exists with this config"},
               201: {"model": ModelInfo}, **error_responses(401, 403, 409, 413, 422, 503)},
    openapi_extra=body_doc(ModelCreate),
)  # fmt: skip
async def put_model(
    name: str, request: Request, registry: RegistryDep, settings: SettingsDep, _: AdminScope
) -> Response:
    check_name(name)
    request.state.model = name
    body = await read_json_object(request, settings.max_body_bytes)
    cls = adapter_for_body(body)
    config = cls.normalize_config(body, settings)
    h, created = await registry.create(name, cls, config)
    return json_response(h.describe(), 201 if created else 200)


@router.get(
    "/models",
    summary="List models",
    responses={200: {"model": ModelList}, **error_responses(401, 403)},
)
async def list_models(registry: RegistryDep, _: PredictScope) -> Response:
    with contextlib.suppress(Exception):  # store down: list what this worker holds
        await registry.sync_catalog()
    return json_response({"models": [h.describe() for h in registry.models.values()]})


@router.get(
    "/models/{name}",
    summary="Describe a model: config, version, labels, online metrics, checkpoint, digest",
    responses={200: {"model": ModelInfo}, **error_responses(401, 403, 404)},
)
async def get_model(
    name: str, request: Request, registry: RegistryDep, _: PredictScope
) -> Response:
    h = await registry.find(name)
    request.state.model = name
    return json_response(h.describe())


@router.delete(
    "/models/{name}",
    summary="Delete a model and everything stored for it",
    status_code=204,
    responses=error_responses(401, 403, 404, 503),
)
async def delete_model(
    name: str, request: Request, registry: RegistryDep, _: AdminScope
) -> Response:
    check_name(name)
    await registry.delete(name)
    return Response(status_code=204)
