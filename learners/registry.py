"""Artifact kind -> the class that reads it.

Imports are lazy so that ``import learners`` stays cheap and a kind's numba
kernels are compiled only when that kind is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from learners.artifact import ArtifactError, loads

# artifact kind -> "module:ClassName"; the class has ``from_bytes(blob)``.
KINDS: dict[str, str] = {
    "linear": "learners.linear:LinearClassifier",
    "regression": "learners.regression:LinearRegressor",
    "ranksvm": "learners.ranking.ranksvm:RankSVM",
    "lambdamart": "learners.ranking.lambdamart:LambdaMART",
    "fastxml": "learners.xml.fastxml:FastXML",
    "llsvm": "learners.llsvm.model:LLSVM",
}

# kinds trained offline and deployed by artifact upload (never updated online)
BATCH_KINDS = frozenset({"lambdamart", "fastxml", "llsvm"})


def class_for(kind: str) -> Any:
    try:
        target = KINDS[kind]
    except KeyError:
        raise ArtifactError(f"unknown model kind {kind!r}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_model(blob: bytes) -> Any:
    """Read any model from artifact bytes (validated: magic, version, checksum)."""
    kind = loads(blob).kind
    return class_for(kind).from_bytes(blob)
