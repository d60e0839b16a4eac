"""Python clients of the learnserve HTTP API (sync :class:`Client`, asyncio
:class:`AsyncClient`), their typed results and exceptions, and streaming readers
of example files (:mod:`service.client.files`) used by ``learnserve update``.

Imports nothing of the server (no ``service.*`` outside this package, no FastAPI,
numpy, numba, Redis or pydantic): only httpx and orjson, so it can ship alone.
"""

from service.client._core import DEFAULT_URL, RetryPolicy
from service.client.aio import AsyncClient
from service.client.decisions import Decision, RankedAction, RewardResult
from service.client.errors import (
    BadRequest,
    ClientError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    InvalidInput,
    LearnserveError,
    NotFound,
    PayloadTooLarge,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
)
from service.client.results import (
    ActivateResult,
    ArtifactVersion,
    CheckpointResult,
    DeployResult,
    ModelInfo,
    ModelState,
    OnlineMetrics,
    Prediction,
    PredictResult,
    Ranking,
    RankResult,
    UpdateResult,
    UpdateSummary,
    Versions,
)
from service.client.sync import Client

__all__ = [
    "DEFAULT_URL",
    "ActivateResult",
    "ArtifactVersion",
    "AsyncClient",
    "BadRequest",
    "CheckpointResult",
    "Client",
    "ClientError",
    "Conflict",
    "ConnectionFailed",
    "Decision",
    "DeployResult",
    "Forbidden",
    "InvalidInput",
    "LearnserveError",
    "ModelInfo",
    "ModelState",
    "NotFound",
    "OnlineMetrics",
    "PayloadTooLarge",
    "PredictResult",
    "Prediction",
    "RankResult",
    "RankedAction",
    "Ranking",
    "RetryPolicy",
    "RewardResult",
    "ServerError",
    "ServiceUnavailable",
    "Unauthorized",
    "UpdateResult",
    "UpdateSummary",
    "Versions",
]
