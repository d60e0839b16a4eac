"""Batch models: ``PUT /models/{name}/artifact`` (deploy), versions, activate, rollback.

The body of a deploy is the artifact file itself (``application/octet-stream``,
as written by ``learnserve train ...``; ``learnserve deploy`` sends it). It is
validated (magic, format version, checksum, kind), loaded fully, stored as the
model's next version, and swapped in atomically: requests in flight finish on the
old version. Other workers pick the new version up through the catalog epoch.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from service.api.auth import AdminScope, PredictScope
from service.api.deps import EngineDep, SettingsDep
from service.api.errors import invalid, json_response
from service.api.models import check_name
from service.api.ops_schemas import (
    ActivateRequest,
    ActivateResponse,
    ArtifactList,
    DeployResponse,
    RollbackResponse,
)
from service.api.request_bodies import (
    OCTETS_TYPE,
    check_content_type,
    optional_int,
    read_body,
    read_json_object,
)
from service.api.schemas import body_doc, error_responses

router = APIRouter(tags=["batch models"])

_OCTETS = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.put(
    "/models/{name}/artifact",
    summary="Deploy a trained artifact as the model's next version (atomic swap)",
    description="201: stored as a new version, now active (older versions beyond "
    "`LEARNSERVE_ARTIFACT_RETENTION` are then deleted). 200: the same bytes (checksum) as a "
    "stored version, which is made active; nothing is stored.",
    status_code=201,
    responses={
        200: {"model": DeployResponse, "description": "identical to a stored version"},
        201: {"model": DeployResponse, "description": "stored as a new version"},
        **error_responses(401, 403, 409, 413, 422, 503),
    },
    openapi_extra=_OCTETS,
)
async def deploy(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: AdminScope
) -> Response:
    check_name(name)
    # Only octet-stream (what `learnserve deploy` sends): the CORS-simple types a web
    # page can send without a preflight (text/plain, forms, none) are refused.
    check_content_type(request.headers.get("content-type"), OCTETS_TYPE)
    blob = await read_body(request, settings.max_artifact_bytes)
    if not blob:
        raise invalid("artifact: the body is empty; send the artifact file", "artifact")
    h, created, stored = await engine.deploy(name, blob)
    request.state.model = name
    body = {
        "model": name,
        "kind": h.adapter.kind,
        "version": h.version,
        "checksum": h.adapter.state_digest(),
        "size": len(blob),
        "created": created,
        "stored": stored,
    }
    # The same bytes as a stored version: that version (now active), 200, nothing stored.
    return json_response(body, 201 if stored else 200)


@router.get(
    "/models/{name}/versions",
    summary="Stored artifact versions of a batch model, and the active one",
    responses={200: {"model": ArtifactList}, **error_responses(401, 403, 404, 409, 503)},
)
@router.get(
    "/models/{name}/artifacts",
    summary="Stored artifact versions of a batch model (same as /versions)",
    responses={200: {"model": ArtifactList}, **error_responses(401, 403, 404, 409, 503)},
)
async def list_artifacts(
    name: str, request: Request, engine: EngineDep, _: PredictScope
) -> Response:
    request.state.model = name
    h, versions, active = await engine.stored_versions(name)
    return json_response(
        {
            "model": name,
            "active": active,
            "serving": h.version,
            "versions": [
                {"version": v.version, "size": v.size, "checksum": v.checksum,
                 "created_at": v.created_at, "kind": v.kind}
                for v in versions
            ],
        }
    )  # fmt: skip


@router.put(
    "/models/{name}/active",
    summary='Serve a stored artifact version (rollback): body {"version": 3}',
    responses={200: {"model": ActivateResponse}, **error_responses(401, 403, 404, 409, 422, 503)},
    openapi_extra=body_doc(ActivateRequest),
)
async def activate(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: AdminScope
) -> Response:
    body = await read_json_object(request, settings.max_body_bytes)
    version = optional_int(body, "version", minimum=1)
    if version is None:
        raise invalid("version: field required", "version")
    if version > 2**63 - 1:  # the stores keep 64-bit versions (was a 500 from SQLite)
        raise invalid(f"version: must be at most {2**63 - 1}, got {version}", "version")
    h = await engine.activate(name, version)
    request.state.model = name
    return json_response(
        {"model": name, "version": h.version, "checksum": h.adapter.state_digest()}
    )


@router.post(
    "/models/{name}/rollback",
    summary="Serve the stored version before the active one (409 if there is none, or if "
    "a concurrent rollback or deploy changed the active version meanwhile)",
    responses={200: {"model": RollbackResponse}, **error_responses(401, 403, 404, 409, 503)},
)
async def rollback(name: str, request: Request, engine: EngineDep, _: AdminScope) -> Response:
    request.state.model = name
    h, previous = await engine.rollback(name)
    return json_response(
        {
            "model": name,
            "version": h.version,
            "previous": previous,
            "checksum": h.adapter.state_digest(),
        }
    )


@router.delete(
    "/models/{name}/versions/{version}",
    summary="Delete a stored artifact version (409 for the active one)",
    status_code=204,
    responses=error_responses(401, 403, 404, 409, 422, 503),
)
async def delete_version(
    name: str,
    version: Annotated[int, Path(ge=1, le=2**62, description="a stored version")],
    request: Request,
    engine: EngineDep,
    _: AdminScope,
) -> Response:
    await engine.delete_version(name, version)
    request.state.model = name  # only names that exist become metric labels
    return Response(status_code=204)
