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
from service.models import decision_names
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
the order of `labels`; `scores` are the sums, the model's score per label (a
regressor's: `[/predict's value]`, `baseline`, the running mean of its targets, plus the
sum; `clipped` when `sgd_regression` clipped it to the targets seen). Dense and
sparse inputs list their non-zero values. One version's weights (`version`), of the
state that answers `/predict` under this name (`serving`: a promoted follower's).
422: the errors `/predict` gives, naming `x.<field>` or `instances[i].x.<field>`; an
unknown body field. 409: a batch model.

A decision model takes a rank body instead, `{{"context": ..., "actions": [...]}}` (`x` is
a 422 naming `x`), and answers `reward_model`, `baseline` (the rewards' mean m: a score is
m + the sum of the contributions) and per action (`actions`, in the body's order) its
`id`, `score` (what `rank` scores it, at this version), `clipped` (`sgd_regression` only:
the sum was clipped to the range of rewards seen, so it is not the score) and
`features`: each column of its row with `index`, `names` (`id=<action>`, `a:<name>`,
`c:<context feature>|id=<action>`, `c:<context feature>|a:<name>`, `^constant`; the
context feature as the records encoder names it for a records context: `age#3`,
`job=clerk`), `collision` (several names), `value`, `weight` (in the reward's units)
and `contribution` (value x weight). 422: the errors `rank` gives.
"""


class ExplainedFeature(BaseModel):
    name: str | None
    index: int
    value: float
    weights: list[float] = Field(description="per label, in the order of labels")
    contributions: list[float] = Field(description="value x weight, per label")


class Explanation(BaseModel):
    features: list[ExplainedFeature]
    scores: list[float] = Field(
        description="the sum of the contributions, per label; a regressor's: /predict's "
        "value, baseline + the sum (unless clipped)"
    )
    baseline: float | None = Field(
        None, description="a regressor only: the running mean of its targets, in its score"
    )
    clipped: bool | None = Field(
        None, description="a regressor only: its value clipped to the targets seen (SGD)"
    )


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


class DecisionColumn(BaseModel):
    index: int
    names: list[str] = Field(description="id=<action>, a:<name>, c:<context>|id=<action>, ...")
    collision: bool = Field(description="several names at this column")
    value: float
    weight: float = Field(description="in the reward's units")
    contribution: float = Field(description="value x weight")


class ExplainedAction(BaseModel):
    id: str
    score: float = Field(description="what rank scores the action: baseline + the contributions")
    clipped: bool = Field(description="sgd_regression: the sum clipped to the rewards seen")
    features: list[DecisionColumn]


class DecisionExplainResponse(BaseModel):
    model: str
    serving: str
    version: int
    features: dict[str, Any] = Field(description="the model's feature config")
    reward_model: str
    baseline: float = Field(description="the rewards' mean, in every score")
    actions: list[ExplainedAction]


_ONE_X = {
    "type": "object",
    "required": ["x"],
    "properties": {"x": {"description": "an input, as /predict's instance x"}},
    "additionalProperties": False,
}
_RANK_BODY = {
    "type": "object",
    "description": "a decision model's: a rank body (its actions scored for the context)",
    "required": ["actions"],
    "properties": {"context": {"description": "the context, as rank takes it"},
                   "actions": {"type": "array", "minItems": 1,
                               "items": {"type": "object", "required": ["id"]}}},
    "additionalProperties": False,
}  # fmt: skip
_BODY_SCHEMA = {
    "title": "ExplainRequest",
    "oneOf": [
        _ONE_X,
        _RANK_BODY,
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
    responses={
        200: {"model": ExplainResponse | DecisionExplainResponse},
        **error_responses(401, 403, 404, 409, 413, 422),
    },
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
        if adapter.kind == "decision":  # a rank body: each action's score taken apart
            found = await asyncio.to_thread(decision_names.explain, adapter, body, settings)
        else:
            found = await asyncio.to_thread(explain, adapter.spec, adapter.model, body, settings)
    body_out = {"model": name, "serving": served.name, "version": version,
                "features": served.config["features"], **found}  # fmt: skip
    return json_response(body_out)
