"""``features`` of kind ``"records"`` (raw JSON records, docs/guides/raw-records.md) in
the OpenAPI document: the fields by type, their transforms and text options, with the
bounds :mod:`learners.records.config` checks. These models only document; the route
validates with ``learners.records.config.parse_config`` (which also refuses what a
schema cannot say: interactions naming no field's namespace, a pair listed twice, idf
over ``bits`` 24, a text field with neither words nor chars, an idf table over its
share of ``max_model_bytes``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


def _no_default(schema: dict[str, Any]) -> None:
    """An optional member whose absence means what no JSON value does (null is refused)."""
    schema.pop("default", None)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: str = Field(
        None,  # type: ignore[assignment]  # optional, never null
        min_length=1,
        description="the field's namespace in interactions (default: the field's name)",
        json_schema_extra=_no_default,
    )


class Bins(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bins: list[float] = Field(
        min_length=1,
        max_length=1000,
        description="strictly increasing edges: a one-hot bin age#k for edges[k-1] <= x < edges[k]",
    )


class NumericField(_Spec):
    type: Literal["numeric"]
    transform: Literal["none", "log1p", "standardize"] | Bins = Field(
        "none",
        description="none (as is), log1p (sign(x) log(1 + |x|)), standardize (running "
        "z-score, model state) or {bins: [edges]}",
    )


class CategoricalField(_Spec):
    """A string, or a list of strings: one-hot ``field=value`` each."""

    type: Literal["categorical"]


class Words(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ngrams: int = Field(1, ge=1, le=5, description="word n-grams for n = 1..ngrams")
    skips: int = Field(0, ge=0, le=4, description="tokens skipped between neighbours")


NgramLength = Annotated[int, Field(ge=1, le=10)]


class Chars(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ngrams: NgramLength | list[NgramLength] = Field(
        description="n, or [min, max] with min <= max", examples=[[3, 5]]
    )
    across_words: bool = Field(False, description="n-grams of the whole padded token sequence")


class TextField(_Spec):
    type: Literal["text"]
    lowercase: bool = True
    words: Words | None = Field(Words(ngrams=1, skips=0), description="word n-grams (null: none)")
    chars: Chars | None = Field(None, description="character n-grams (default: none)")
    weighting: Literal["binary", "tf", "log_tf"] = "log_tf"
    idf: bool = Field(False, description="times log((1 + N) / (1 + df)) + 1 (model state)")
    normalize: bool = Field(True, description="the field's values divided by their L2 norm")


RecordField = Annotated[NumericField | CategoricalField | TextField, Field(discriminator="type")]
Namespace = Annotated[str, Field(min_length=1)]
Interaction = Annotated[list[Namespace], Field(min_length=2, max_length=3)]


class RecordsFeatures(BaseModel):
    """``x`` is a raw record ``{field: number | string | [strings] | null}``, hashed into
    ``2**bits`` columns by this config (docs/guides/raw-records.md)."""

    model_config = ConfigDict(extra="forbid", title="RecordsFeatures")
    kind: Literal["records"]
    bits: int = Field(20, ge=1, le=31, description="2**bits columns")
    intercept: bool = Field(True, description="a constant feature ^constant (default on)")
    fields: dict[str, RecordField] = Field(
        min_length=1,
        description="field name (non-empty, printable, without = ^ ~ # *) -> its spec",
        json_schema_extra={"propertyNames": {"minLength": 1, "pattern": "^[^=^~#*]+$"}},
    )
    interactions: list[Interaction] = Field(
        [], description="pairs or triples of namespaces: hashed products of their features"
    )
    unknown_fields: Literal["ignore", "refuse"] = Field(
        "ignore", description="a record's fields the config does not name"
    )
    max_features_per_record: int = Field(
        None,  # type: ignore[assignment]  # optional, never null
        ge=1,
        le=1_000_000,
        description="at most LEARNSERVE_MAX_FEATURES_PER_EXAMPLE (the default: the smaller "
        "of 10,000 and that)",
        json_schema_extra=_no_default,
    )
    max_text_bytes: int = Field(100_000, ge=1, le=10_000_000)
