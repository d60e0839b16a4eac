"""Answer and body shapes of the operations on models, artifacts and health, for the
OpenAPI document (the routes build these answers by hand)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ActivateRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"version": 3}]})
    version: int = Field(ge=1, le=2**63 - 1, description="a stored artifact version of the model")


class CheckpointResponse(BaseModel):
    model: str
    written: bool = Field(description="false when this call wrote nothing (see note)")
    position: int = Field(description="the log position the stored checkpoint covers")
    duration_seconds: float
    note: str | None = Field(
        None,
        description="why nothing was written: nothing new since the stored checkpoint, "
        "another worker holds the checkpoint lease (it writes it), or a follower behind "
        "its leader's checkpoint (a follower is written with its leader)",
    )


class DeployResponse(BaseModel):
    model: str
    kind: str
    version: int
    checksum: str
    size: int = Field(description="bytes of the artifact")
    created: bool = Field(description="true when this deploy created the model")
    stored: bool = Field(
        description="true when stored as a new version (201); false when the same bytes "
        "(checksum) as a stored version, which is made active instead (200)"
    )


class ArtifactVersion(BaseModel):
    version: int
    size: int
    checksum: str
    created_at: float
    kind: str


class ArtifactList(BaseModel):
    model: str
    active: int | None = Field(description="the version stored as active")
    serving: int = Field(description="the version this worker serves")
    versions: list[ArtifactVersion]


class ActivateResponse(BaseModel):
    model: str
    version: int
    checksum: str


class RollbackResponse(ActivateResponse):
    previous: int = Field(description="the version served before")


class Health(BaseModel):
    status: Literal["ok"]
    worker: int = Field(description="the process id of the worker that answered")


class Readiness(BaseModel):
    ready: bool
    models: int
    store: str
    store_up: bool
    failed_models: dict[str, str] = Field(
        description="models whose stored state could not be loaded (the others are served)"
    )
    pending_models: dict[str, str] = Field(
        default_factory=dict,
        description="models waiting for numba kernels still compiling, and what compiles "
        "(they answer 503 with Retry-After; the others are served)",
    )
