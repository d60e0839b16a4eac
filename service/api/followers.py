"""``POST /models/{name}/promote``: which model answers ``/predict`` under a leader's name.

A promotion is an entry in the leader's log (``service.engine.followers``): from its
position on, every worker answers ``/predict`` for the leader with the promoted
follower's state, at the same version, without a refused request; both keep learning.
``{"follower": null}`` (or the leader's own name) undoes it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from service.api.auth import AdminScope
from service.api.deps import EngineDep, SettingsDep
from service.api.errors import invalid, json_response
from service.api.request_bodies import read_json_object
from service.api.schemas import body_doc, error_responses
from service.models.json_fields import type_name

router = APIRouter(tags=["models"])


class PromoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # another member is refused, naming it

    follower: str | None = Field(
        description="a model that follows this one (created with follows), or null (or this "
        "model's own name) to answer with this model's own state again"
    )


class PromoteResponse(BaseModel):
    model: str
    serving: str = Field(description="the model whose state now answers /predict for `model`")
    version: int = Field(description="the log position of the promotion (a control entry)")


@router.post(
    "/models/{name}/promote",
    summary='Let a follower answer /predict under this name: body {"follower": "challenger"}',
    responses={200: {"model": PromoteResponse}, **error_responses(401, 403, 404, 409, 422, 503)},
    openapi_extra=body_doc(PromoteRequest),
)
async def promote(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: AdminScope
) -> Response:
    body: dict[str, Any] = await read_json_object(request, settings.max_body_bytes)
    if "follower" not in body:
        raise invalid("follower: field required (a follower's name, or null)", "follower")
    unknown = sorted(set(body) - {"follower"})
    if unknown:
        raise invalid(f"{unknown[0]}: unknown field (known: follower)", unknown[0])
    follower = body["follower"]
    if follower is not None and not isinstance(follower, str):
        raise invalid(f"follower: must be a string or null, got {type_name(follower)}", "follower")
    request.state.model = name
    h, version = await engine.promote(name, follower)
    return json_response({"model": name, "serving": h.serving or name, "version": version})
