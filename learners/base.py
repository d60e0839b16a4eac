"""Shared result types and the interfaces every learner kind implements.

The service talks to learners only through these shapes, so a new algorithm
plugs in by implementing one of the protocols and registering its kind in
:mod:`learners.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from learners.features import Batch

Label = str | int


# A float label is taken as the integer it equals below this magnitude: every integer
# there is a double, so the float names exactly one integer.
MAX_FLOAT_LABEL = 2**53


def check_label(label: Any, location: str) -> Label:
    """The label as a model keeps it: a non-empty string or an integer.

    Files give labels as floats (``load_svmlight_file``, CSV readers: ``1.0``,
    ``-1.0``): a float (or numpy integer) equal to an integer of magnitude below
    2**53 is that integer (``1.0`` -> ``1``); any other float (``1.5``, ``1e300``,
    NaN) and a bool are refused.
    """
    from learners.features import FeatureError

    t = type(label)
    if t is str:
        if not label:
            raise FeatureError(location, "label must not be empty")
        return label
    if t is int:
        return label
    if isinstance(label, np.integer):
        return int(label)
    if isinstance(label, float | np.floating):
        f = float(label)
        if f.is_integer() and abs(f) < MAX_FLOAT_LABEL:
            return int(f)
        raise FeatureError(
            location,
            "label must be a string or an integer (a float only when it is a whole "
            f"number below 2**53 in magnitude, e.g. 1.0), got {label!r}",
        )
    if isinstance(label, bool) or not isinstance(label, str | int):
        raise FeatureError(location, f"label must be a string or an integer, got {label!r}")
    return label  # an int or str subclass


@dataclass(frozen=True)
class UpdateResult:
    """What one ``update`` did, with progressive (predict-then-learn) figures.

    ``correct`` counts examples whose label was predicted right *before* the
    model learned from them; ``loss_sum`` is the sum of their pre-update losses
    (hinge loss for linear classifiers). For rankers ``metric_sum`` carries the
    sum of the per-query progressive NDCG@10 over ``n_groups`` query groups.

    Binary classifiers also give, per example learned while the model was binary,
    ``z``: the pre-update calibrated score of the positive label (``labels_[0]``),
    whose probability is F(z) with F = Φ (``probit``) or the logistic (see
    :mod:`learners.linear.calibration`), and ``positive``: whether the example's
    label was ``labels_[0]``. Both ``None`` for other learners.
    """

    applied: int
    correct: int = 0
    loss_sum: float = 0.0
    updates: int = 0  # examples that actually changed the model
    metric_sum: float = 0.0
    n_groups: int = 0
    z: np.ndarray | None = field(default=None, compare=False, repr=False)
    positive: np.ndarray | None = field(default=None, compare=False, repr=False)
    probit: bool = False
    # The progressive loss of each example in order (classifiers: 1.0 when predicted
    # wrong, else 0.0) or of each query group (rankers: 1 − NDCG@10): the stream the
    # drift detectors read. None when the learner does not report it.
    errors: np.ndarray | None = field(default=None, compare=False, repr=False)
    # Regressors: the pre-update prediction ŷ of each example in y's units (``errors``
    # is then |y − ŷ| and ``loss_sum`` its sum), and ŷ's predictive variance (AROW;
    # None for learners without one). None for other learners.
    predicted: np.ndarray | None = field(default=None, compare=False, repr=False)
    variance: np.ndarray | None = field(default=None, compare=False, repr=False)
    # Regressors served by the service: the targets of the examples, set by the adapter
    # that knows them (service.models.regression), for the progressive figures.
    targets: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Prediction:
    label: Label
    score: float
    scores: dict[Label, float]
    confidence: float | None = None


@runtime_checkable
class OnlineLearner(Protocol):
    """A model that learns from a stream (classifier or ranker).

    ``update`` validates the whole batch first and changes nothing on error; a
    batch is only a transport: its result equals a loop of single updates.
    """

    kind: str
    dim: int

    def update(self, batch: Batch, targets: Sequence[Any], **kw: Any) -> UpdateResult: ...

    def to_bytes(self) -> bytes: ...

    @classmethod
    def from_bytes(cls, blob: bytes) -> OnlineLearner: ...

    def state_digest(self) -> str: ...


@runtime_checkable
class BatchModel(Protocol):
    """A model trained offline and deployed for scoring only."""

    kind: str

    def to_bytes(self) -> bytes: ...

    @classmethod
    def from_bytes(cls, blob: bytes) -> BatchModel: ...


def digest_arrays(*parts: Any) -> str:
    """A stable SHA-256 over arrays and JSON-able scalars (for ``state_digest``)."""
    import hashlib
    import json

    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray):
            a = np.ascontiguousarray(p)
            h.update(a.dtype.str.encode())
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()
