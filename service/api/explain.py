"""``POST /models/{name}/explain``: the features an input makes, with the model's weight
for each and what each adds to the score (:mod:`service.models.explain`)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from service.api.auth import PredictScope
from service.api.deps import EngineDep, SettingsDep
from service.api.errors import ApiError, json_response
from service.api.request_bodies import read_json_object
from service.api.schemas import error_responses
from service.engine import followers
from service.models.explain import MAX_INSTANCES, explain

router = APIRouter(tags=["models"])

EXPLAIN_DESCRIPTION = f"""\
Body `{{"x": <features>}}` (an instance's `x` as `/predict` takes it: a raw record for
a `records` model) or `{{"instances": [{{"x": ...}}, ...]}}` (at most {MAX_INSTANCES}).
Per input, every feature it makes (as Vowpal Wabbit's `--audit`): its `name`
(`records`: `age#3`, `job=clerk`, `note^free`, `job=clerk*sex=Male`; `hashed`: the
name sent, `job=clerk` for a string value; `sparse`: the key; `dense`: null), its
`index` (the column of `GET /models/{{name}}/weights`), its `value`, the model's
`weights` for that column and the `contributions` (value x weight), one per label in
the order of `labels`; `scores` are the sums, the model's score per label. Dense and
sparse inputs list their non-zero values. One version's weights (`version`), of the
state that answers `/predict` under this name (`serving`: a promoted follower's).
422: the errors `/predict` gives, naming `x.<field>` or `instances[i].x.<field>`; an
unknown body field. 409: a batch model.
"""


class ExplainedFeature(BaseModel):
    name: str | None
    index: int
    value: float
    weights: list[float] = Field(description="per label, in the order of labels")
    contributions: list[float] = Field(description="value x weight, per label")


class Explanation(BaseModel):
    features: list[ExplainedFeature]
    scores: list[float] = Field(description="the sum of the contributions, per label")


class ExplainResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"model": "adult", "serving": "adult", "version": 33,
                 "features": {"kind": "records"}, "labels": ["<=50K", ">50K"],
                 "explanations": [{"features": [
                     {"name": "^constant", "index": 40112, "value": 1.0,
                      "weights": [0.31, -0.31], "contributions": [0.31, -0.31]},
                     {"name": "job=clerk", "index": 7310, "value": 1.0,
                      "weights": [0.12, -0.12], "contributions": [0.12, -0.12]}],
                     "scores": [0.43, -0.43]}]}
            ]
        }
    )  # fmt: skip
    model: str
    serving: str = Field(description="the model whose state answers /predict under `model`")
    version: int
    features: dict[str, Any] = Field(description="the model's feature config")
    labels: list[str | int | None]
    explanations: list[Explanation]


_ONE_X = {
    "type": "object",
    "required": ["x"],
    "properties": {"x": {"description": "an input, as /predict's instance x"}},
    "additionalProperties": False,
}
_BODY_SCHEMA = {
    "title": "ExplainRequest",
    "oneOf": [
        _ONE_X,
        {
            "type": "object",
            "required": ["instances"],
            "properties": {
                "instances": {"type": "array", "minItems": 1, "maxItems": MAX_INSTANCES,
                              "items": _ONE_X}
            },
            "additionalProperties": False,
        },
    ],
    "examples": [{"x": {"age": 39, "job": "clerk"}}],
}  # fmt: skip
_BODY = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": _BODY_SCHEMA}}}
}


@router.post(
    "/models/{name}/explain",
    summary="The features an input makes, with their weights and contributions (an audit)",
    description=EXPLAIN_DESCRIPTION,
    responses={200: {"model": ExplainResponse}, **error_responses(401, 403, 404, 409, 422)},
    openapi_extra=_BODY,
)
async def explain_input(
    name: str, request: Request, engine: EngineDep, settings: SettingsDep, _: PredictScope
) -> Response:
    body = await read_json_object(request, settings.max_body_bytes)
    h = await engine.find(name)
    request.state.model = name
    if not h.adapter.online:
        raise ApiError(
            409, "not_online", f"model {name!r} is a batch model; this is for online models"
        )
    # Under the lock, in a thread: one version's weights, and a text's n-grams or a
    # 2**24-wide weight row do not stall the loop. The state explained is the one that
    # answers /predict under this name (a promoted follower's, as /predict takes it).
    async with h.lock:
        version = h.version
        served = followers.serving(h)
        adapter: Any = served.adapter
        found = await asyncio.to_thread(explain, adapter.spec, adapter.model, body, settings)
    body_out = {"model": name, "serving": served.name, "version": version,
                "features": served.config["features"], **found}  # fmt: skip
    return json_response(body_out)
