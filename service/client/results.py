"""Typed answers of the service (dataclasses built from its JSON).

Each keeps the fields the API documents (``service/api/schemas.py``); ``ModelInfo``
and ``DeployResult`` also keep the whole answer in ``raw`` (kind-specific fields such
as ``dim``, ``ownership`` or a batch model's ``n_features``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Label = str | int


@dataclass(frozen=True)
class OnlineMetrics:
    """Progressive (predict-then-learn) figures over the last ~``eval_window`` examples."""

    window_examples: int = 0
    accuracy: float | None = None
    loss: float | None = None
    ndcg_at_10: float | None = None
    # regressors: errors in the target's units, R² against the mean, interval coverage
    mae: float | None = None
    rmse: float | None = None
    r2: float | None = None
    interval_coverage: float | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> OnlineMetrics:
        d = d or {}
        return cls(
            int(d.get("window_examples") or 0),
            d.get("accuracy"),
            d.get("loss"),
            d.get("ndcg_at_10"),
            d.get("mae"),
            d.get("rmse"),
            d.get("r2"),
            d.get("interval_coverage"),
        )


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str
    config: dict[str, Any]
    version: int
    examples_learned: int
    labels: list[Label]
    online_metrics: OnlineMetrics
    state_digest: str
    last_checkpoint: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ModelInfo:
        return cls(
            name=d["name"],
            kind=d.get("kind", ""),
            config=d.get("config") or {},
            version=int(d.get("version", 0)),
            examples_learned=int(d.get("examples_learned", 0)),
            labels=list(d.get("labels") or []),
            online_metrics=OnlineMetrics.from_json(d.get("online_metrics")),
            state_digest=d.get("state_digest", ""),
            last_checkpoint=d.get("last_checkpoint"),
            raw=d,
        )

    @property
    def features(self) -> dict[str, Any]:
        """The feature config (``{"kind": "sparse", "dim": 123, "index_base": 1}``)."""
        f = self.config.get("features")
        return f if isinstance(f, dict) else {}

    @property
    def index_base(self) -> int:
        """The first sparse feature index the model takes (0 or 1)."""
        return int(self.features.get("index_base", 0))


@dataclass(frozen=True)
class UpdateResult:
    """One ``/update`` batch: ``version`` is the model's log position after it;
    ``replayed`` when the answer is that of an earlier request with the same
    Idempotency-Key (the batch was learned once, by that request)."""

    model: str
    applied: int
    version: int
    replayed: bool = False


@dataclass
class UpdateSummary:
    """A stream sent in batches: totals, and the version after the last batch."""

    model: str
    examples: int = 0
    batches: int = 0
    version: int = 0
    replayed_batches: int = 0
    retries: int = 0

    def add(self, r: UpdateResult, retries: int) -> None:
        self.examples += r.applied
        self.batches += 1
        self.version = max(self.version, r.version)
        self.replayed_batches += int(r.replayed)
        self.retries += retries


@dataclass(frozen=True)
class Prediction:
    """One instance's answer. Classifiers: ``label``, ``score``, ``scores`` (by label,
    keys are strings), ``confidence``, and for binary ones ``probability`` (calibrated,
    of the predicted label); rankers scoring instances: ``score`` (and ``probability``
    for a binary LightGBM import); FastXML: ``labels`` (the artifact's label names, else
    ids), ``ids`` and ``scores`` (best first); ``id`` as sent."""

    label: Label | None = None
    score: float | None = None
    scores: dict[str, float] | list[float] | None = None
    confidence: float | None = None
    labels: list[Label] | None = None
    id: str | None = None
    ids: list[int] | None = None
    probability: float | None = None
    value: float | None = None
    variance: float | None = None
    interval: list[float] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Prediction:
        return cls(
            d.get("label"), d.get("score"), d.get("scores"), d.get("confidence"),
            d.get("labels"), d.get("id"), d.get("ids"), d.get("probability"),
            d.get("value"), d.get("variance"), d.get("interval"),
        )  # fmt: skip


@dataclass(frozen=True)
class Ranking:
    """One query's answer: ``scores`` in the order sent, ``order`` best first."""

    qid: str | int | None
    scores: list[float]
    order: list[int]


@dataclass(frozen=True)
class PredictResult:
    model: str
    version: int
    predictions: list[Prediction]


@dataclass(frozen=True)
class RankResult:
    model: str
    version: int
    rankings: list[Ranking]


@dataclass(frozen=True)
class CheckpointResult:
    model: str
    written: bool
    position: int
    duration_seconds: float


@dataclass(frozen=True)
class DeployResult:
    model: str
    kind: str
    version: int
    checksum: str
    size: int
    created: bool
    # False: the same bytes as a stored version, which is now active (nothing stored)
    stored: bool = True
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ModelState:
    """An online model's state, exported (``GET /models/{name}/state``): ``artifact`` is
    an artifact file's bytes (``learners.load`` reads it; ``PUT /models/{name}`` with it
    as the body starts a model from it), at ``version``; ``state_digest`` as in
    :class:`ModelInfo` (``None`` when the answer lacked the header)."""

    model: str
    version: int
    state_digest: str | None
    artifact: bytes = field(repr=False)


@dataclass(frozen=True)
class ArtifactVersion:
    version: int
    size: int
    checksum: str
    created_at: float
    kind: str


@dataclass(frozen=True)
class Versions:
    """A batch model's stored artifacts; ``active`` is stored as active, ``serving``
    is what the answering worker serves."""

    model: str
    active: int | None
    serving: int
    versions: list[ArtifactVersion]


@dataclass(frozen=True)
class ActivateResult:
    """After an activate or a rollback; ``previous`` (rollback only) was served before."""

    model: str
    version: int
    checksum: str
    previous: int | None = None


def update_result(body: dict[str, Any], replayed_header: str | None) -> UpdateResult:
    return UpdateResult(
        body["model"], int(body["applied"]), int(body["version"]), replayed_header == "true"
    )


def predict_result(body: dict[str, Any]) -> PredictResult:
    preds = [Prediction.from_json(p) for p in body["predictions"]]
    return PredictResult(body["model"], int(body["version"]), preds)


def rank_result(body: dict[str, Any]) -> RankResult:
    ranks = [Ranking(p.get("qid"), p["scores"], p["order"]) for p in body["predictions"]]
    return RankResult(body["model"], int(body["version"]), ranks)


def versions_result(body: dict[str, Any]) -> Versions:
    return Versions(
        body["model"],
        body.get("active"),
        int(body["serving"]),
        [
            ArtifactVersion(v["version"], v["size"], v["checksum"], v["created_at"], v["kind"])
            for v in body.get("versions", [])
        ],
    )


def deploy_result(b: dict[str, Any]) -> DeployResult:
    return DeployResult(
        b["model"], b["kind"], b["version"], b["checksum"], b["size"], b["created"],
        b.get("stored", True), b,
    )  # fmt: skip


def model_state(model: str, artifact: bytes, headers: Mapping[str, str]) -> ModelState:
    """The state export's answer: the body, and its ``X-Model-Version`` and
    ``X-State-Digest`` headers (``headers``: case-insensitive, as httpx's are)."""
    version = int(headers.get("x-model-version", "0"))
    return ModelState(model, version, headers.get("x-state-digest"), artifact)


def checkpoint_result(b: dict[str, Any]) -> CheckpointResult:
    return CheckpointResult(b["model"], b["written"], b["position"], b["duration_seconds"])
