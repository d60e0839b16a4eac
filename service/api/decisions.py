"""``POST /models/{name}/rank`` and ``POST /models/{name}/reward``: decisions (contextual
bandits), documented. Served by the hot path (:mod:`service.api.hot`) like
``/models/{name}/predict``; these FastAPI routes document them in OpenAPI and run the
same pipeline and handlers (:mod:`service.engine.decisions`) when a request reaches them.
Scopes: ``rank`` needs ``predict``, ``reward`` needs ``update``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, RootModel
from starlette.responses import Response

from service.api.auth import AdminScope, UpdateScope
from service.api.deps import EngineDep, SettingsDep
from service.api.errors import json_response
from service.api.learn import _serve
from service.api.request_bodies import read_body, read_json_object
from service.api.schemas import (
    body_doc,
    error_responses,
)
from service.api.update_docs import IDEMPOTENCY_KEY_PARAM, IDEMPOTENT_REPLAYED_HEADER
from service.api.v2_docs import Absent
from service.engine.decision_import import learn_dsjson
from service.engine.decision_log import dsjson_page
from service.engine.decisions import rank_body, require_leader, reward_body, set_mode
from service.errors import invalid

router = APIRouter(tags=["decisions"])


class ActionIn(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    features: dict[str, float | str] = Field(default_factory=dict)


class RankRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{
            "context": {"country": "fr", "hour": 20},
            "actions": [{"id": "news", "features": {"topic": "politics"}},
                        {"id": "sport", "features": {"topic": "football", "len": 2.5}}],
            "excluded": [], "event_id": "ev-8f3a"}]},
    )  # fmt: skip
    model: str | Absent = Field(None, description="if given, the model of the path")
    context: dict[str, float | str] = Field(default_factory=dict)
    actions: list[ActionIn] = Field(
        min_length=1, max_length=1024, description="distinct ids, at most the model's max_actions"
    )
    excluded: list[str] = Field(default_factory=list, description="ids of actions never to choose")
    event_id: str | Absent = Field(
        None, min_length=1, max_length=200, description="generated when absent; the same "
        "event id again answers the same decision and logs nothing new")  # fmt: skip


class RankedAction(BaseModel):
    id: str
    probability: float
    score: float = Field(description="the reward model's estimate")


class RankResponse(BaseModel):
    model: str
    event_id: str
    action: str = Field(description="the chosen action's id")
    probability: float = Field(description="the probability it was chosen with")
    ranking: list[RankedAction] = Field(description="the chosen action first, then by probability")
    version: int = Field(description="the model version that decided")
    rewarded: bool | None = Field(None, description="true when the event was rewarded already")


class RewardIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    event_id: str = Field(min_length=1, max_length=200)
    reward: float = Field(ge=-1e6, le=1e6, description="within the model's reward_range")


class RewardOne(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"event_id": "ev-8f3a", "reward": 1.0}]}
    )
    model: str | Absent = Field(None, description="if given, the model of the path")
    event_id: str = Field(min_length=1, max_length=200)
    reward: float = Field(ge=-1e6, le=1e6, description="within the model's reward_range")


class RewardMany(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"rewards": [{"event_id": "ev-8f3a", "reward": 1.0}]}]},
    )
    model: str | Absent = Field(None, description="if given, the model of the path")
    rewards: list[RewardIn] = Field(min_length=1, description="distinct event ids")


class RewardRequest(RootModel[RewardOne | RewardMany]):
    """One ``{event_id, reward}`` or ``{"rewards": [...]}``."""


class RewardOutcome(BaseModel):
    event_id: str
    learned: bool = Field(description="false: rewarded before with this reward (not again)")


class RewardResponse(BaseModel):
    model: str
    applied: int = Field(description="rewards this request learned")
    version: int
    events: list[RewardOutcome]


_RANK = (
    "Choose one of the actions for the context with the model's exploration policy; the "
    "decision (every action's features and probability) is kept for "
    "`feedback_ttl_seconds` under the event id until its reward arrives."
)
_REWARD = (
    "Learn the reward of one or many events, each once: the chosen action's features "
    "with the reward as target (weight 1, or 1/p with `weighting: ips`). An unknown or "
    "expired event is a 404, another reward for a rewarded event a 409 (both naming "
    "`rewards[i].event_id`); the same reward again is answered as the first time."
)


@router.post(
    "/models/{name}/rank",
    summary="Choose an action for a context (a decision model)",
    description=_RANK,
    responses={200: {"model": RankResponse}, **error_responses(401, 403, 404, 409, 413, 422, 503)},
    openapi_extra=body_doc(RankRequest),
)
async def rank(name: str, request: Request) -> Response:
    return await _serve(request, "predict", rank_body, name)


@router.post(
    "/models/{name}/reward",
    summary="Learn the rewards of earlier decisions, each once",
    description=_REWARD,
    responses={
        200: {"model": RewardResponse, "headers": IDEMPOTENT_REPLAYED_HEADER},
        **error_responses(401, 403, 404, 409, 413, 422, 503),
    },
    openapi_extra={**body_doc(RewardRequest), "parameters": [IDEMPOTENCY_KEY_PARAM]},
)
async def reward(name: str, request: Request) -> Response:
    return await _serve(request, "update", reward_body, name)


_LOG = (
    "The decisions rewarded in the model's log past position `after` (at most `limit` log "
    "entries read), as DSJSON lines (`application/x-ndjson`: VW's `--dsjson`, Personalizer "
    "and learning-loop read them): context and actions as sent (each action's id as `_id`), "
    "every probability, the chosen action, the reward (`_label_cost` = −reward), the "
    "version that decided (`VWState.m`). `X-Next-After` is the position to ask from next "
    "(the same as `after` when there was nothing more). Entries covered by a checkpoint "
    "are trimmed from the store: page through the log before that to keep every decision."
)


@router.get(
    "/models/{name}/decisions",
    summary="The decision log as DSJSON lines (decisions and their rewards)",
    description=_LOG,
    responses={
        200: {"description": "DSJSON lines", "content": {"application/x-ndjson": {}}},
        **error_responses(401, 403, 404, 409, 503),
    },
    response_class=Response,
)
async def decision_log(
    name: str,
    request: Request,
    engine: EngineDep,
    _: AdminScope,
    after: Annotated[int, Query(ge=0, le=2**63 - 1, description="a log position")] = 0,
    limit: Annotated[int, Query(ge=1, le=100_000, description="log entries to read")] = 10_000,
) -> Response:
    h = await engine.find(name)
    request.state.model = name
    require_leader(h, "this request (its log holds the decisions)")
    body, next_after = await dsjson_page(engine, h, after, limit)
    headers = {"X-Next-After": str(next_after)}
    return Response(body, media_type="application/x-ndjson", headers=headers)


class ModeRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"mode": "learning"}]}
    )
    mode: Literal["learning", "apprentice"]


class ModeResponse(BaseModel):
    model: str
    mode: str
    version: int = Field(description="the log entry that switched it")


@router.post(
    "/models/{name}/mode",
    summary="Switch a decision model between apprentice and learning mode",
    description=(
        "`apprentice`: rank serves the first eligible action (the caller's own choice, "
        "probability 1) while the reward model learns from its rewards; `GET "
        "/models/{name}` shows how often the learned policy agrees (`agreement`) and the "
        "estimated values. `learning`: rank explores with the model's policy. A log entry, "
        "so every replica switches at the same point."
    ),
    responses={200: {"model": ModeResponse}, **error_responses(401, 403, 404, 409, 422, 503)},
    openapi_extra=body_doc(ModeRequest),
)
async def switch_mode(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: AdminScope
) -> Response:
    body = await read_json_object(request, settings.max_body_bytes)
    h = await engine.find(name)
    request.state.model = name
    extra = [k for k in body if k != "mode"]
    if extra:
        raise invalid(f"{extra[0]}: unknown field (a mode body has only mode)", extra[0])
    return json_response(await set_mode(engine, h, body.get("mode")))


@router.post(
    "/models/{name}/decisions",
    summary="Warm start: learn the rewarded decisions of a DSJSON log (another system's)",
    description=(
        "The body is DSJSON lines, in any content type (`application/x-ndjson`, "
        "`text/plain`; as `GET /models/{name}/decisions` writes them, or VW's, "
        "Personalizer's): each line with a reward is learned as a rank + reward here would "
        "be (its actions' features, the logged probabilities, weight 1/p), its off-policy "
        "estimates included, in log order on every replica; lines without a reward are "
        "skipped. A bad line is a 422 naming `lines[i]` and nothing is learned. Optional "
        "header `Idempotency-Key`."
    ),
    responses={
        200: {"description": "`{model, applied, skipped, version}`"},
        **error_responses(401, 403, 404, 409, 413, 422, 503),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            # DSJSON lines; read whatever the content type (application/x-ndjson too)
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        "parameters": [IDEMPOTENCY_KEY_PARAM],
    },
)
async def import_decisions(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: UpdateScope
) -> Response:
    h = await engine.find(name)
    request.state.model = name
    require_leader(h, "the decisions")
    raw = await read_body(request, settings.max_body_bytes)
    key = request.headers.get("idempotency-key")
    return json_response(await learn_dsjson(engine, settings, h, raw, key))
