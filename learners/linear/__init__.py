"""Online linear classifiers: PA, PA-I, PA-II, CW, AROW, SCW-I, SCW-II.

Binary and multiclass, with string or integer labels that may appear at any
time; diagonal (default, any dimension, cost O(nnz)) or full (d×d, opt-in)
covariance for the confidence-weighted family.

>>> from learners.features import FeatureSpec
>>> spec = FeatureSpec.sparse(4)
>>> clf = make_classifier("arow", dim=4, params={"r": 1.0})
>>> res = clf.update(spec.encode([{"0": 1.0}, {"1": 1.0}, {"2": 1.0}]), ["a", "b", "c"])
>>> (res.applied, clf.labels_, clf.predict(spec.encode([{"2": 1.0}])))
(3, ['a', 'b', 'c'], ['c'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from learners.linear._base import ALGORITHMS, LinearClassifier
from learners.linear._learning import NonFiniteWeightsError
from learners.linear._params import build_by_name
from learners.linear._scoring import NotFittedError
from learners.linear._state import LinearState
from learners.linear.arow import AROW
from learners.linear.cw import CW
from learners.linear.dry_run import first_nonfinite_row
from learners.linear.pa import PA, PA1, PA2
from learners.linear.scw import SCW1, SCW2

__all__ = [
    "ALGORITHMS",
    "AROW",
    "CW",
    "PA",
    "PA1",
    "PA2",
    "SCW1",
    "SCW2",
    "LinearClassifier",
    "LinearState",
    "NonFiniteWeightsError",
    "NotFittedError",
    "first_nonfinite_row",
    "make_classifier",
]

CLASSES: dict[str, type[LinearClassifier]] = {
    "pa": PA,
    "pa1": PA1,
    "pa2": PA2,
    "cw": CW,
    "arow": AROW,
    "scw1": SCW1,
    "scw2": SCW2,
}


def make_classifier(
    algorithm: str, dim: int, params: Mapping[str, Any] | None = None
) -> LinearClassifier:
    """Build a classifier by name; unknown or invalid hyperparameters raise ``ValueError``."""
    made: LinearClassifier = build_by_name(CLASSES, algorithm, dim, params)
    return made
