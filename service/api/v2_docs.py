"""OpenAPI documentation of the Open Inference Protocol routes (:mod:`service.api.v2`):
the protocol's bodies as pydantic models (documentation only: the routes read and
write bytes themselves) and the responses of each route."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from service.api.v2_tensors import NUMERIC

Datatype = Literal[
    "FP16", "FP32", "FP64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"
]
assert set(Datatype.__args__) == set(NUMERIC)  # type: ignore[attr-defined]
Scalar = float | int | str | bool
Absent = SkipJsonSchema[None]  # optional, but null is refused: the schema says no null


def _no_null_defaults(schema: dict[str, Any]) -> None:
    """Optional fields written without ``"default": null`` (no default is sent)."""
    for prop in schema.get("properties", {}).values():
        if prop.get("default", 0) is None:
            del prop["default"]


class V2Error(BaseModel):
    error: str = Field(description="what is wrong, naming the part of the request")
    code: str | None = Field(None, description="learnserve's error code (invalid_input, ...)")
    field: str | None = Field(None, description="the part of the request, e.g. inputs[0].shape")


class V2Live(BaseModel):
    live: bool


class V2Ready(BaseModel):
    ready: bool


class V2ModelReady(BaseModel):
    name: str
    ready: bool


class V2ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class V2MetadataTensor(BaseModel):
    name: str
    datatype: str
    shape: list[int] = Field(description="-1 for a dimension of any size (the batch)")


class V2ModelMetadata(BaseModel):
    name: str
    versions: list[str] = Field(description="the version served now (only that one answers)")
    platform: str = Field(description="learnserve_<kind>, e.g. learnserve_linear")
    inputs: list[V2MetadataTensor]
    outputs: list[V2MetadataTensor]
    parameters: dict[str, Scalar]


class V2RequestInput(BaseModel):
    name: Literal["x"]
    shape: list[int] = Field(min_length=2, max_length=2, description="[batch, features]")
    datatype: Datatype
    parameters: dict[str, Scalar] | None = Field(
        None, description="binary_data_size: the tensor's bytes follow the JSON"
    )
    data: list[float | list[float]] | None = Field(
        None, description="row-major values, flat or as one array per row"
    )


class V2OutputParameters(BaseModel):
    # shared memory is not supported
    model_config = ConfigDict(extra="forbid", json_schema_extra=_no_null_defaults)
    binary_data: bool | None = Field(
        None, description="answer this output as binary data (default: binary_data_output)"
    )
    classification: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="on 'scores' only (the classification extension): answer the top k "
        "classes of each row instead, BYTES [batch, min(k, classes)], each "
        "'<score>:<index>:<label>' (index: the class's column in 'scores'), best first",
    )


class V2RequestOutput(BaseModel):
    model_config = ConfigDict(json_schema_extra=_no_null_defaults)
    name: Literal["label", "score", "scores", "classes", "confidence", "probability"]
    parameters: V2OutputParameters | None = None


class V2RequestParameters(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra=_no_null_defaults)
    binary_data_output: bool | None = Field(
        None, description="answer every output as binary data (the binary tensor data extension)"
    )


_INFER_EXAMPLE = {
    "id": "r1",
    "inputs": [
        {"name": "x", "shape": [2, 3], "datatype": "FP64", "data": [0.1, 0.2, 0.3, 1.0, 0.0, -1.0]}
    ],
}


def _infer_request_extra(schema: dict[str, Any]) -> None:
    schema["examples"] = [_INFER_EXAMPLE]
    _no_null_defaults(schema)


class V2InferRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_infer_request_extra)
    id: str | Absent = Field(None, description="echoed in the response")
    parameters: V2RequestParameters | None = None
    inputs: list[V2RequestInput] = Field(min_length=1, max_length=1)
    outputs: list[V2RequestOutput] | None = Field(
        None, description="default (absent, null or empty): all of them; each named at most once"
    )


class V2ResponseOutput(BaseModel):
    name: str
    shape: list[int]
    datatype: Literal["FP64", "INT64", "BYTES"]
    parameters: dict[str, Scalar] | None = None
    data: list[float | int | str] | None = None


class V2InferResponse(BaseModel):
    model_name: str
    model_version: str
    id: str | None = None
    outputs: list[V2ResponseOutput]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": V2Error} for c in codes}


_MODEL_ERRORS = _errors(400, 401, 403, 404, 409, 503)
RESPONSES: dict[str, dict[int | str, dict[str, Any]]] = {
    "live": {200: {"model": V2Live}},
    "ready": {200: {"model": V2Ready}, **_errors(503)},
    "server": {200: {"model": V2ServerMetadata}, **_errors(401, 403)},
    "model": {200: {"model": V2ModelMetadata}, **_MODEL_ERRORS},
    "ready_model": {200: {"model": V2ModelReady}, **_MODEL_ERRORS},
    "infer": {
        200: {
            "model": V2InferResponse,
            "description": "JSON; with binary outputs, application/octet-stream: the JSON "
            "(Inference-Header-Content-Length bytes), then each binary output's bytes",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        },
        **_errors(400, 401, 403, 404, 408, 409, 413, 415, 503),
    },
}
DOC_MODELS: list[type[BaseModel]] = [V2InferRequest]
INFER_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/V2InferRequest"}},
            "application/octet-stream": {
                # (a Media Type Object has no "description": the schema carries it)
                "schema": {
                    "type": "string",
                    "format": "binary",
                    "description": "binary tensor data extension: the JSON request "
                    "(Inference-Header-Content-Length bytes), then the inputs' bytes",
                },
            },
        },
    },
    "parameters": [
        {
            "name": "Inference-Header-Content-Length",
            "in": "header",
            "required": False,
            "schema": {"type": "integer", "minimum": 1},
            "description": "the JSON's length when binary tensor data follows it",
        }
    ],
}
