"""``/models/{name}/state`` (export an online model as an artifact) and
``/models/{name}/weights`` (its largest weights, with their variance and names).

Importing is ``PUT /models/{name}`` with the artifact as the body
(``application/octet-stream``, see :mod:`service.api.models`); both directions are
in :mod:`service.engine.transfers`, the weights in :mod:`service.models.weights`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from service.api.auth import AdminScope, PredictScope
from service.api.deps import EngineDep, SettingsDep
from service.api.errors import ApiError, json_response
from service.api.schemas import error_responses
from service.engine.model_handle import ModelHandle
from service.engine.transfers import export_state
from service.models.feature_names import named
from service.models.weights import MAX_TOP

router = APIRouter(tags=["models"])
_BINARY = {"type": "string", "format": "binary"}

STATE_DESCRIPTION = """\
The model's learned state as an artifact (the versioned container of
`learners.artifact`, the one batch models use: magic, format version, kind,
parameters, checksum, named arrays), taken at one version under the model's lock.
`meta.service` holds the model's config, `version`, `examples_learned` and
`state_digest`; `meta.features` how examples are encoded (and for hashed features
the names seen). Read it in Python with `learners.load(blob)`, or start a model
from it on any service with `PUT /models/{name}` and this body
(`Content-Type: application/octet-stream`): the state is bit-exact (same
`state_digest`). Headers: `X-Model-Version`, `X-State-Digest`. Needs the `admin`
scope (it is a full copy of the model). 409 for a batch model.

A decision model's artifact holds its reward model (kind `regression`), and in
`meta.decisions` its exploration's step `t`, its mode, its agreement counts and its
progressive off-policy estimates; imported, it ranks as the exported model does (the
same `event_id` and context: the same answer). Decisions awaiting a reward are not
carried: they belong to the exported model's decision log (`GET
/models/{name}/decisions`), and their rewards go to that model. A challenger's export
imports as a standalone decision model, without its `challenger` estimate.
"""

WEIGHTS_DESCRIPTION = """\
Per label (all labels, or `label`'s, given as its JSON key: `1` for the label `1`),
the `top` largest weights above 0 (`positive`, largest first) and the `top` most
negative ones (`negative`), each with its `index`, `weight` and `variance` (the
weight's variance Σ_ii, the diagonal of the covariance: how uncertain CW, AROW and
SCW are about it; `null` for PA and RankSVM, which keep none). A binary classifier
lists both labels (the second one's weights are the first one's negated).
A ranker has one entry with `label: null`.

Hashed and records features: each entry has `names` (the feature names recorded at
that index, at update time, by whichever worker parsed the update; see
`feature_names`; a records model's are its raw features, `age#3`, `job=clerk`, as
`POST /models/{name}/explain` names them; not yet for one with `standardize` or `idf`)
and `collision` (several names share the index). Names are recorded up to the
`max_feature_names` setting per model (100k by default), first seen first.
A decision model (one weight vector, `label: null`) names its columns `id=<action>`,
`a:<name>`, `c:<context feature>|id=<action>`, `c:<context feature>|a:<name>` and
`^constant` (a records context's feature as the records encoder names it, `age#3`,
`job=clerk`), recorded as rewards are learned (`service.models.decision_names`).
422: `top` outside 1..1000, a `label` the model does not have. 409: a batch model.
"""


class WeightEntry(BaseModel):
    index: int
    weight: float
    variance: float | None = Field(description="Σ_ii; null for PA and RankSVM")
    names: list[str] | None = Field(
        None, description="hashed and records features: names at this index"
    )
    collision: bool | None = Field(None, description="hashed and records features: several names")


class ClassWeights(BaseModel):
    label: str | int | None
    positive: list[WeightEntry]
    negative: list[WeightEntry]


class FeatureNamesInfo(BaseModel):
    recorded: int
    limit: int = Field(description="the max_feature_names setting")
    complete: bool = Field(description="false once the limit is reached: later names are not kept")


class WeightsResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"model": "adult", "kind": "linear", "algorithm": "arow", "version": 120,
                 "features": {"kind": "hashed", "bits": 20}, "top": 1,
                 "classes": [{"label": "+1",
                              "positive": [{"index": 52170, "weight": 0.41, "variance": 0.002,
                                            "names": ["marital=Married-civ-spouse"],
                                            "collision": False}],
                              "negative": [{"index": 9112, "weight": -0.38, "variance": 0.004,
                                            "names": ["age<25"], "collision": False}]}],
                 "feature_names": {"recorded": 123, "limit": 100000, "complete": True}}
            ]
        }
    )  # fmt: skip
    model: str
    kind: str
    algorithm: str
    version: int
    features: dict[str, Any]
    top: int
    classes: list[ClassWeights]
    feature_names: FeatureNamesInfo | None = Field(description="hashed and records features only")


def _online(h: ModelHandle, name: str) -> None:
    if not h.adapter.online:
        raise ApiError(
            409, "not_online", f"model {name!r} is a batch model; this is for online models"
        )


@router.get(
    "/models/{name}/state",
    summary="Export an online model's state as an artifact (learners.load reads it)",
    description=STATE_DESCRIPTION,
    responses={
        200: {
            "description": "the artifact",
            "content": {"application/octet-stream": {"schema": _BINARY}},
        },
        **error_responses(401, 403, 404, 409, 503),
    },
    response_class=Response,
)
async def export_model_state(
    name: str, request: Request, engine: EngineDep, _: AdminScope
) -> Response:
    h = await engine.find(name)
    request.state.model = name
    _online(h, name)
    blob, version, digest = await export_state(h)
    headers = {
        "Content-Disposition": f'attachment; filename="{name}.lsrn"',
        "X-Model-Version": str(version),
        "X-State-Digest": digest,
    }
    return Response(blob, media_type="application/octet-stream", headers=headers)


@router.get(
    "/models/{name}/weights",
    summary="The largest positive and negative weights, with variance and feature names",
    description=WEIGHTS_DESCRIPTION,
    responses={200: {"model": WeightsResponse}, **error_responses(401, 403, 404, 409, 422)},
)
async def model_weights(
    name: str,
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    _: PredictScope,
    top: Annotated[int, Query(ge=1, le=MAX_TOP, description="weights per side and label")] = 20,
    label: Annotated[str | None, Query(max_length=1000, description="one label only")] = None,
) -> Response:
    h = await engine.find(name)
    request.state.model = name
    _online(h, name)
    # Under the lock, in a thread: one version's weights, and a 2**24-wide partial
    # sort does not stall the loop (predicts keep flowing; updates wait).
    async with h.lock:
        version = h.version
        found = await asyncio.to_thread(h.adapter.weights, top, label)
    config = h.config
    names = getattr(h.adapter.model, "feature_names_", None)
    info = None
    spec = getattr(h.adapter, "spec", None)
    if spec is not None and named(spec):
        recorded = 0 if names is None else len(names)
        limit = settings.max_feature_names
        info = {"recorded": recorded, "limit": limit, "complete": recorded < limit}
    body = {
        "model": name,
        "kind": h.adapter.kind,
        "algorithm": config.get("algorithm"),
        "version": version,
        "features": config["features"],
        "top": top,
        **found,
        "feature_names": info,
    }
    return json_response(body)
