"""Request/response shapes for the OpenAPI document (``/docs``).

Bodies are parsed on the hot path with orjson and validated by hand (no
per-example pydantic objects); these models exist to document the API, with an
example for every body. Note: JSON object keys are strings, so in ``scores`` a
label sent as the integer ``1`` appears as the key ``"1"`` — the ``label`` field
itself keeps its type (``1`` stays ``1``, ``"+1"`` stays ``"+1"``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from service.api.ops_schemas import ActivateRequest
from service.api.prediction_docs import CONFIDENCE_DOC, PROBABILITY_DOC

DenseX = Annotated[list[float], Field(title="DenseX", description="dense: dim numbers")]
SparseX = Annotated[
    dict[str, float | str],
    Field(
        title="SparseX",
        description='sparse {"index": number}; hashed {"name": number, or a category string}',
    ),
]
RecordX = Annotated[
    dict[str, Any],
    Field(
        title="RecordX",
        description="a raw record (records models, docs/guides/raw-records.md): "
        "{field: number | string | [strings] | null}, read as the model's config says; "
        "a field the config does not name is ignored whatever its value (or refused, "
        'with "unknown_fields": "refuse"): a value of the wrong type for its field is '
        "a 422 naming x.<field>",
        json_schema_extra={
            "examples": [{"age": 39, "job": "clerk", "tags": ["a", "b"], "note": None}]
        },
    ),
]
# What x may be for some model kind; which one a model reads is its config's
# ``features.kind`` (a shape the model does not read is a 422 naming x).
Features = DenseX | SparseX | RecordX
Label = str | int
_X_DOC = (
    "dense list, sparse {index: value}, hashed {name: value} or a raw record "
    "{field: number | string | [strings] | null}, as the model's features.kind says"
)


class Example(BaseModel):
    x: Features = Field(description=_X_DOC)
    y: Label
    weight: float = Field(
        1.0,
        gt=0,
        description=(
            "importance weight, finite and > 0 (default 1): PA-I/PA-II/SCW-I/SCW-II learn "
            "with C·weight, AROW with r/weight, PA and CW take min(weight, 1) of their step "
            "(README: Importance weights); anything else is a 422 naming examples[i].weight"
        ),
    )


FEEDBACK_ID_DOC = (
    "delayed labels: 1-200 characters naming this prediction; its features and the "
    "prediction served are kept for `feedback_ttl_seconds` (default 7 days), so that "
    '`/update` can label it later with `{"id", "y"}` (online classifiers only)'
)


class LabelById(BaseModel):
    """The label of an earlier prediction made with this ``id`` (no ``x``)."""

    id: str = Field(min_length=1, max_length=200, description=FEEDBACK_ID_DOC)
    y: Label


class RankedItem(BaseModel):
    x: Features = Field(description=_X_DOC)
    relevance: int = Field(ge=0, le=30, description="graded relevance (update only)")


class Query(BaseModel):
    qid: str | int | None = Field(None, description="echoed back in predictions")
    items: list[RankedItem]
    weight: float = Field(
        1.0,
        gt=0,
        description="update only: importance weight of the query (finite, > 0, default 1); "
        "its pairs' Pegasos steps are weight times as long",
    )


class UpdateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",  # refused with a 422 naming the member (service.engine.requests)
        json_schema_extra={
            "examples": [
                {"model": "adult", "examples": [
                    {"x": {"age": 39, "job": "clerk"}, "y": "+1"},
                    {"x": {"age": 50, "job": "manager"}, "y": "-1", "weight": 0.5}]},
                {"model": "adult", "examples": [{"id": "session-7f3a", "y": "+1"}]},
                {"model": "web-ranker", "queries": [
                    {"qid": "q1", "items": [{"x": {"3": 0.5, "17": 1.0}, "relevance": 2},
                                            {"x": {"3": 0.1}, "relevance": 0}]}]},
            ],
            "oneOf": [{"required": ["examples"]}, {"required": ["queries"]}],
        }
    )  # fmt: skip
    model: str
    examples: list[Example | LabelById] | None = Field(
        None, min_length=1, description="classifiers: {x, y}, or {id, y} to label a prediction"
    )
    queries: list[Query] | None = Field(
        None, min_length=1, description="rankers (ranksvm): query groups; applied = number of items"
    )


class UpdateResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"model": "adult", "applied": 2, "version": 17, "correct": 1}]
        }
    )
    model: str
    applied: int = Field(
        description="examples this batch learned; an {id, y} whose id was labelled before "
        "(with this label) is not learned again and not counted, except that a batch of "
        "nothing but such repeats is answered as the first time"
    )
    version: int = Field(
        description="the model's log position after this batch; plain batches sent at the "
        "same moment by several clients share one log entry (group commit), so they share "
        "this version: each is learned once, in the entry's order, and answered on its own"
    )
    correct: int | None = Field(
        None,
        description="classifiers: examples predicted right: an {x, y} one by the model "
        "just before it learned it (progressive), an {id, y} one by the prediction served "
        "with that id; null for rankers, or when this worker did not apply the batch itself",
    )
    ignored_fields: list[str] | None = Field(
        None,
        description="raw records (unknown_fields ignore): the fields of the examples' x "
        "that the model's config does not read, left out of what was learned (first met "
        "first, at most 50; counted in learnserve_ignored_fields_total); absent when none. "
        "A record none of whose fields the model reads is refused (422 naming examples[i].x)",
    )


class Instance(BaseModel):
    x: Features = Field(description=_X_DOC)
    id: str = Field(None, min_length=1, max_length=200, description=FEEDBACK_ID_DOC)  # type: ignore[assignment]  # optional, never null


class PredictQuery(BaseModel):
    qid: str | int | None = None
    items: list[Instance]


class PredictRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",  # refused with a 422 naming the member (service.engine.requests)
        json_schema_extra={
            "examples": [
                {"model": "adult", "instances": [{"x": {"age": 39, "job": "clerk"}}],
                 "min_version": 17},
                {"model": "adult", "instances": [{"x": {"age": 39}, "id": "session-7f3a"}]},
                {"model": "web-ranker", "queries": [
                    {"qid": "q1", "items": [{"x": {"1": 0.5, "17": 1.0}}, {"x": {"3": 0.1}}]}]},
            ],
            "oneOf": [{"required": ["instances"]}, {"required": ["queries"]}],
        }
    )  # fmt: skip
    model: str
    instances: list[Instance] | None = Field(
        None, min_length=1, description='score each instance (rankers: {"score": s} per instance)'
    )
    queries: list[PredictQuery] | None = Field(
        None,
        min_length=1,
        description="rankers (ranksvm, lambdamart): rank each query's items. LambdaMART "
        "sparse keys are feature indices as in the training file (1-based when the "
        "artifact's index_base is 1: {\"1\": 0.5} is the file's feature 1); dense lists "
        "have n_features values",
    )
    k: int = Field(5, ge=1, le=100, description="FastXML: how many labels per instance (default 5)")
    min_version: int | None = Field(
        None,
        ge=0,
        le=2**63 - 1,
        description="wait briefly until this worker has applied this version, else 503; "
        "422 at once if the model's log has not reached it",
    )


class PredictionOut(BaseModel):
    label: Label
    score: float
    scores: dict[str, float] = Field(description="by label; JSON keys are always strings")
    confidence: float | None = Field(None, description=CONFIDENCE_DOC)
    probability: float | None = Field(None, ge=0.0, le=1.0, description=PROBABILITY_DOC)


class RankingOut(BaseModel):
    qid: str | int | None
    scores: list[float] = Field(description="one per item, in the order sent")
    order: list[int] = Field(description="item indices, best first (ties: order sent)")


class ScoreOut(BaseModel):
    score: float
    probability: float | None = Field(
        None,
        description="binary models imported from LightGBM: 1 / (1 + exp(-sigmoid * score)), "
        "as LightGBM's Booster.predict",
    )


class ValueOut(BaseModel):
    value: float = Field(description="regressors: the predicted number, in the target's units")
    variance: float | None = Field(
        None, description="AROW regression: the predictive variance of the value (the "
        "target's squared units): the weights' uncertainty x'Sigma x plus the noise it "
        "has measured on the examples it learned"
    )  # fmt: skip
    interval: list[float] | None = Field(
        None, min_length=2, max_length=2,
        description="AROW regression: [low, high], the central 90 % interval value +- "
        "1.645 sqrt(variance)",
    )  # fmt: skip


class TopKOut(BaseModel):
    labels: list[int] = Field(description="FastXML: the top-k label ids, best first")
    scores: list[float]


class PredictResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"model": "adult", "version": 17, "predictions": [
                    {"label": "+1", "score": 1.7, "scores": {"+1": 1.7, "-1": -1.7},
                     "confidence": 0.96, "probability": 0.83}]},
                {"model": "web-ranker", "version": 3, "predictions": [
                    {"qid": "q1", "scores": [0.12, 1.5], "order": [1, 0]}]},
                {"model": "house-prices", "version": 40, "predictions": [
                    {"value": 231500.0, "variance": 1.9e9,
                     "interval": [159900.0, 303100.0]}]},
            ]
        }
    )  # fmt: skip
    model: str
    version: int
    predictions: list[PredictionOut | RankingOut | ScoreOut | TopKOut | ValueOut]


class ArtifactInfo(BaseModel):
    checksum: str = Field(description="SHA-256 of the artifact's bytes")
    size: int = Field(description="bytes of the artifact")
    created_at: float | None = Field(description="when the artifact was written (epoch s)")
    format_version: int | None


class TrainingInfo(BaseModel):
    model_config = ConfigDict(extra="allow")  # per kind: best_iteration, final_pass...
    params: dict[str, Any] = Field(description="the hyperparameters the model was trained with")
    data: dict[str, Any] = Field(
        description="the training data's shape: d features, and when recorded n rows; "
        "labels (fastxml), queries (lambdamart), classes (llsvm)"
    )
    train_file: str | None = None
    validation: dict[str, Any] | None = Field(
        None,
        description='metrics measured by `learnserve train` on held-out data: {"file", "n", '
        '"metrics": {"p@1": ...}} (absent when the artifact recorded none)',
    )


class ModelInfo(BaseModel):
    """A model. Online models have ``examples_learned``, ``online_metrics``,
    ``last_checkpoint``; batch models (deployed artifacts) have ``artifact`` and
    ``training`` instead, and none of the online fields."""

    model_config = ConfigDict(extra="allow")
    name: str
    kind: str
    config: dict[str, Any]
    version: int
    examples_learned: int | None = Field(None, description="online models only")
    labels: list[Label] = []
    online_metrics: dict[str, Any] | None = Field(
        None,
        description=(
            "online models only: progressive (predict-then-learn) figures over the window "
            "(window_size from the config's metrics.window; window_examples): accuracy, "
            "loss (hinge), for "
            "binary classifiers log_loss and roc_auc of the probability /predict serves "
            "(probability says how the margin maps to it; each log entry scored by the map "
            "as it was before the entry); ndcg_at_10 for rankers; cumulative: "
            "the same since the model was created (no AUC), kept across restarts"
        ),
        json_schema_extra={
            "examples": [{
                "window_size": 1000, "window_examples": 1000, "accuracy": 0.843,
                "loss": 0.429, "log_loss": 0.368, "ndcg_at_10": None, "roc_auc": 0.888,
                "cumulative": {"examples": 6000, "accuracy": 0.832, "loss": 0.433,
                               "log_loss": 0.379, "ndcg_at_10": None},
                "probability": "1 / (1 + exp(-a·z)), z = m / sqrt(v + r), "
                               "m = y·(mu·x), v = x'Sigma x; a >= 0: the logistic regression "
                               "(no intercept) of the last 1000 progressive scores "
                               "(GET /models/{name}: calibration)",
            }]
        },
    )  # fmt: skip
    calibration: dict[str, Any] | None = Field(
        None,
        description="binary online classifiers: the map from the link's score z to the "
        "probability /predict serves, P(labels[0]) = 1 / (1 + exp(-a*z)): a (>= 0), b "
        "(always 0: no intercept, so the answered label is the more probable), fit_on (the "
        "progressive examples it is fit on, at most 1000) and examples (all it has "
        "learned); absent for other models",
    )
    drift: dict[str, Any] | None = Field(
        None,
        description="online models with a detector: detector, params, estimate, detections, "
        "last_detection_version, last_detection_example, values_seen, digest "
        "(docs/guides/drift-detection.md); null for a model without one",
    )
    followers: list[dict[str, Any]] | None = Field(
        None,
        description="online models: the models that follow this one (challengers learning "
        "its log), each with name, algorithm, version, examples_learned, online_metrics, "
        "drift and state_digest, side by side (docs/guides/challengers.md)",
    )
    serving: str | None = Field(
        None,
        description="online models: the model whose state answers /predict under this "
        "name (itself, or a promoted follower)",
    )
    last_checkpoint: dict[str, Any] | None = Field(None, description="online models only")
    # While checkpoints fail: {"failures", "retry_in_seconds", "last_error"}
    checkpoint_backoff: dict[str, Any] | None = None
    artifact: ArtifactInfo | None = Field(None, description="batch models only")
    training: TrainingInfo | None = Field(None, description="batch models only")
    state_digest: str


class ModelList(BaseModel):
    models: list[ModelInfo]


class ErrorDetail(BaseModel):
    error: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"detail": {"error": "invalid_input",
                            "message": 'examples[3].x["17"]: value is NaN',
                            "field": 'examples[3].x["17"]'}}
            ]
        }
    )  # fmt: skip
    detail: ErrorDetail


# The models that ``body_doc`` refers to: ``service.api.openapi`` adds each to the
# document's components, so no route's body is a dangling ``$ref``.
BODY_MODELS: dict[str, type[BaseModel]] = {}


def body_doc(model: type[BaseModel] | str) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON body that the route reads itself (a model,
    which is then added to the document's components, or the name of a component that
    ``service.api.openapi`` adds)."""
    if isinstance(model, str):
        name = model
    else:
        name = model.__name__
        BODY_MODELS[name] = model
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    }


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorBody} for c in codes}


DOC_MODELS: list[type[BaseModel]] = [UpdateRequest, PredictRequest, ActivateRequest]
