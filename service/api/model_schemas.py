"""The ``PUT /models/{name}`` body in OpenAPI: one schema per algorithm.

``params`` are typed per algorithm with the learners' real hyperparameter names,
types and bounds (``learners/linear``, ``learners/ranking/ranksvm.py``), and
``features`` per kind, so a body that validates against the document is one the
service accepts (up to the configured limits, which ``service.api.openapi``
writes into the document: ``max_dim``). These models only document; the route
validates by hand (``service.models.online_config.online_model_config``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from service.api.records_schemas import RecordsFeatures

# ------------------------------------------------------------------ features


def _intercept_doc(where: str) -> str:
    return (
        f"a constant feature 1.0 in every row, the model's intercept ({where}); "
        "classifiers (default off) and regressors (default on); a ranker refuses it"
    )


class DenseFeatures(BaseModel):
    model_config = ConfigDict(extra="forbid", title="DenseFeatures")
    kind: Literal["dense"]
    dim: int = Field(ge=1, description="number of features (x is a list of dim numbers)")
    index_base: Literal[0, 1] = Field(
        0, description="the first feature index of the model's files (x is read by position)"
    )
    intercept: bool | None = Field(
        None, description=_intercept_doc("an extra column: the model has dim + 1")
    )


class SparseFeatures(BaseModel):
    model_config = ConfigDict(extra="forbid", title="SparseFeatures")
    kind: Literal["sparse"]
    dim: int = Field(ge=1, description='number of features (x is {"index": value})')
    index_base: Literal[0, 1] = Field(
        0,
        description="1: keys are 1-based as in SVMlight files (1 to dim; 0 is refused); "
        "0: keys 0 to dim - 1",
    )
    intercept: bool | None = Field(
        None, description=_intercept_doc("an extra column: the model has dim + 1")
    )


class HashedFeatures(BaseModel):
    model_config = ConfigDict(extra="forbid", title="HashedFeatures")
    kind: Literal["hashed"]
    bits: int = Field(ge=1, le=31, description="2**bits dimensions; x is {name: value}")
    intercept: bool | None = Field(None, description=_intercept_doc("the name ^constant, hashed"))


FeaturesConfig = Annotated[
    DenseFeatures | SparseFeatures | HashedFeatures | RecordsFeatures, Field(discriminator="kind")
]

# ------------------------------------------------------------------ params

Positive = Annotated[float, Field(gt=0)]
Eta = Annotated[float, Field(gt=0.5, lt=1.0, description="confidence, in (0.5, 1)")]
Covariance = Literal["diagonal", "full"]
_COV = "'full' keeps a dim×dim matrix per label (dim <= 4096)"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PAParams(_Params):
    pass


class PA1Params(_Params):
    C: Positive = Field(1.0, description="aggressiveness (slack cost)")


class CWParams(_Params):
    eta: Eta = 0.9
    covariance: Covariance = Field("diagonal", description=_COV)


class AROWParams(_Params):
    r: Positive = Field(1.0, description="regularisation")
    covariance: Covariance = Field("diagonal", description=_COV)


class SCWParams(_Params):
    C: Positive = Field(0.01, description="aggressiveness (slack cost)")
    eta: Eta = 0.75
    covariance: Covariance = Field("diagonal", description=_COV)


class PARegressionParams(_Params):
    epsilon: float = Field(
        0.1, ge=0, description="half-width of the band (in standard deviations of the "
        "target) where an error is no loss"
    )  # fmt: skip


class PA1RegressionParams(PARegressionParams):
    C: Positive = Field(1.0, description="aggressiveness (slack cost)")


class AROWRegressionParams(_Params):
    r: Positive = Field(1.0, description="regularisation (the noise variance of the "
                        "standardised target)")  # fmt: skip
    covariance: Literal["diagonal", "full"] = Field(
        "diagonal", description="'full' keeps a dim×dim matrix (dim <= 4096)"
    )


class SGDRegressionParams(_Params):
    eta: Positive = Field(1.0, description="learning rate (unit-free: the steps are "
                          "normalised by each feature's scale and the target's)")  # fmt: skip


class RankSVMParams(_Params):
    lam: Positive = Field(0.01, description="L2 regularisation (Pegasos)")
    pairs_per_group: int | None = Field(
        100, ge=1, le=2**63 - 1, description="pairs sampled per query group; null: all pairs"
    )
    projection: bool = False
    seed: int = Field(0, ge=0, le=2**63 - 1)


# ------------------------------------------------------------------ bodies


class MetricsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="examples in the progressive-metrics window (default: the service's "
        "LEARNSERVE_EVAL_WINDOW, 1000); GET /models/{name} reports online_metrics over "
        "it and cumulative since creation",
    )


class AdwinDrift(BaseModel):
    model_config = ConfigDict(extra="forbid")
    detector: Literal["adwin"]
    delta: float = Field(0.002, gt=0, lt=1, description="confidence of a detected change")
    clock: int = Field(32, ge=1, le=1_000_000, description="values between checks for a cut")
    max_buckets: int = Field(5, ge=2, le=1_000_000, description="buckets per row of the histogram")
    min_window_length: int = Field(5, ge=1, le=1_000_000, description="least values per sub-window")
    grace_period: int = Field(10, ge=0, le=1_000_000_000, description="values before any check")


class PageHinkleyDrift(BaseModel):
    model_config = ConfigDict(extra="forbid")
    detector: Literal["page_hinkley"]
    min_instances: int = Field(30, ge=0, le=1_000_000_000, description="values before any check")
    delta: float = Field(0.005, ge=0, description="magnitude of changes tolerated")
    threshold: float = Field(50.0, gt=0, description="cumulative deviation that is a change")
    alpha: float = Field(0.9999, gt=0, le=1, description="forgetting factor of the sum")
    mode: Literal["both", "up", "down"] = "both"


class NoDrift(BaseModel):
    model_config = ConfigDict(extra="forbid")
    detector: Literal["none"]
    on_detection: Literal["none"] = Field("none", description="no detector: no reaction")


class ReopenConfidence(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reopen_confidence: float = Field(
        gt=0,
        le=1,
        description="the fraction of the way the covariance moves back to its prior, the "
        "mean kept (1: the prior)",
    )


_REACTION_DOC = (
    'after an applied entry with a detection: "none" (default) or re-open the model\'s '
    "confidence (CW, AROW and SCW; PA and RankSVM keep none)"
)


class AdwinDriftNoReaction(AdwinDrift):
    on_detection: Literal["none"] = Field("none", description=_REACTION_DOC)


class PageHinkleyDriftNoReaction(PageHinkleyDrift):
    on_detection: Literal["none"] = Field("none", description=_REACTION_DOC)


class AdwinDriftReacting(AdwinDrift):
    on_detection: Literal["none"] | ReopenConfidence = Field("none", description=_REACTION_DOC)


class PageHinkleyDriftReacting(PageHinkleyDrift):
    on_detection: Literal["none"] | ReopenConfidence = Field("none", description=_REACTION_DOC)


# Models without a covariance (PA, PA-I, PA-II, RankSVM) take no reaction; CW, AROW and SCW do.
DriftConfig = Annotated[
    AdwinDriftNoReaction | PageHinkleyDriftNoReaction | NoDrift, Field(discriminator="detector")
]
ReactingDriftConfig = Annotated[
    AdwinDriftReacting | PageHinkleyDriftReacting | NoDrift, Field(discriminator="detector")
]
_DRIFT_DOC = (
    "the drift detector over the model's progressive losses (default: ADWIN with delta "
    "0.002) and the reaction to a detection; GET /models/{name} reports it under drift"
)


class _Create(BaseModel):
    model_config = ConfigDict(extra="forbid")
    features: FeaturesConfig
    metrics: MetricsConfig | None = None
    follows: str | None = Field(
        None,
        description="a challenger: the name of an online model of the same kind and features "
        "whose log this model learns, entry by entry, from now on (no updates of its own; a "
        "decision model's challenger may have other bits, and estimates its own policy on "
        "the leader's decisions without serving); see POST /models/{name}/promote",
    )


class _PlainCreate(_Create):
    """A model without a covariance: a detector, no reaction."""

    drift: DriftConfig | None = Field(None, description=_DRIFT_DOC)


class _CWFamilyCreate(_Create):
    """CW, AROW, SCW: a detector and, optionally, a reaction."""

    drift: ReactingDriftConfig | None = Field(None, description=_DRIFT_DOC)


class PACreate(_PlainCreate):
    algorithm: Literal["pa"]
    params: PAParams | None = None


class PA1Create(_PlainCreate):
    algorithm: Literal["pa1"]
    params: PA1Params | None = None


class PA2Create(_PlainCreate):
    algorithm: Literal["pa2"]
    params: PA1Params | None = None


class CWCreate(_CWFamilyCreate):
    algorithm: Literal["cw"]
    params: CWParams | None = None


class AROWCreate(_CWFamilyCreate):
    algorithm: Literal["arow"]
    params: AROWParams | None = None


class SCW1Create(_CWFamilyCreate):
    algorithm: Literal["scw1"]
    params: SCWParams | None = None


class SCW2Create(_CWFamilyCreate):
    algorithm: Literal["scw2"]
    params: SCWParams | None = None


class RankSVMCreate(_PlainCreate):
    algorithm: Literal["ranksvm"]
    params: RankSVMParams | None = None


class PARegressionCreate(_PlainCreate):
    algorithm: Literal["pa_regression"]
    params: PARegressionParams | None = None


class PA1RegressionCreate(_PlainCreate):
    algorithm: Literal["pa1_regression"]
    params: PA1RegressionParams | None = None


class PA2RegressionCreate(_PlainCreate):
    algorithm: Literal["pa2_regression"]
    params: PA1RegressionParams | None = None


class AROWRegressionCreate(_CWFamilyCreate):
    algorithm: Literal["arow_regression"]
    params: AROWRegressionParams | None = None


class SGDRegressionCreate(_PlainCreate):
    algorithm: Literal["sgd_regression"]
    params: SGDRegressionParams | None = None


class RewardModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    algorithm: Literal[
        "pa_regression", "pa1_regression", "pa2_regression", "arow_regression", "sgd_regression"
    ] = "arow_regression"
    params: dict[str, Any] | None = Field(None, description="the regressor's hyperparameters")


class Exploration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    policy: Literal["epsilon_greedy", "softmax", "squarecb", "thompson", "ucb"] = "squarecb"
    params: dict[str, Any] | None = Field(
        None,
        description="the policy's hyperparameters (squarecb: gamma 10, gamma_exponent 0.5, "
        "gamma_action_exponent 0.5)",
    )


class DecisionCreate(_PlainCreate):
    """A decision model (contextual bandit): see docs/guides/decisions.md."""

    algorithm: Literal["decision"]
    features: FeaturesConfig = Field(
        description='{"kind": "hashed", "bits": n}: the context is named values; or '
        '{"kind": "records", "bits": n, "fields": {...}}: the context is a raw record '
        "encoded as the records kind does (stateless encodings only: standardize and idf "
        "are refused) and crossed with the action id and features by combining hashes "
        "(docs/guides/decisions.md); the actions' features are named values either way"
    )
    reward_model: RewardModel | None = None
    exploration: Exploration | None = None
    seed: int = Field(0, ge=0, le=2**63 - 1, description="the draw's seed")
    max_actions: int = Field(256, ge=1, le=1024)
    reward_range: list[float] = Field([-1e6, 1e6], min_length=2, max_length=2)
    weighting: Literal["ips", "dr", "none"] = Field(
        "none",
        description="none: each reward learned with weight 1 (SquareCB's plain "
        "square-loss regression); ips: with importance weight 1/p; dr: with weight 1 "
        "towards the doubly robust estimate ŝ + (r − ŝ)/p",
    )
    default_reward: float | None = Field(
        None, description="learned for an event with no reward within reward_wait_seconds"
    )
    reward_wait_seconds: float = Field(600.0, gt=0, description="at most feedback_ttl_seconds")
    mode: Literal["learning", "apprentice"] = "learning"
    crossing: Literal["hash", "names"] = Field(
        "hash",
        description="hash: a cross's column combined from the context name's and the "
        "action part's hashes (16777619·c ^ h); names: each cross's name hashed (every "
        "model created before this field existed); a raw-record context: hash only",
    )


ModelCreate = Annotated[
    PACreate | PA1Create | PA2Create | CWCreate | AROWCreate | SCW1Create | SCW2Create
    | RankSVMCreate | PARegressionCreate | PA1RegressionCreate | PA2RegressionCreate
    | AROWRegressionCreate | SGDRegressionCreate | DecisionCreate,
    Field(discriminator="algorithm"),
]  # fmt: skip

MODEL_CREATE_EXAMPLES: list[dict[str, Any]] = [
    {"algorithm": "arow", "params": {"r": 1.0}, "features": {"kind": "dense", "dim": 28}},
    {"algorithm": "scw1", "params": {"C": 1.0, "eta": 0.9},
     "features": {"kind": "hashed", "bits": 20}},
    {"algorithm": "ranksvm", "params": {"lam": 0.01, "pairs_per_group": 100, "seed": 0},
     "features": {"kind": "sparse", "dim": 300}, "metrics": {"window": 5000}},
    {"algorithm": "arow_regression", "params": {"r": 1.0},
     "features": {"kind": "dense", "dim": 8}},
]  # fmt: skip

MODEL_CREATE: TypeAdapter[object] = TypeAdapter(ModelCreate)
