"""learnserve learners: online and batch algorithms, features, artifacts.

This package imports only numpy and numba; it never imports the service.

:func:`load` reads any model from its artifact, e.g. one exported from the service
(``GET /models/{name}/state``, ``learnserve export``)::

    import learners
    model = learners.load("adult.lsrn")          # or the bytes
    batch = model.features_.encode([{"age": 39, "job": "clerk"}])
    model.predict(batch)
"""

from __future__ import annotations

import os
from typing import Any

from learners.artifact import Artifact, ArtifactError
from learners.base import Prediction, UpdateResult
from learners.features import Batch, FeatureError, FeatureSpec

__all__ = [
    "Artifact",
    "ArtifactError",
    "Batch",
    "FeatureError",
    "FeatureSpec",
    "Prediction",
    "UpdateResult",
    "load",
]


def load(source: bytes | bytearray | memoryview | str | os.PathLike[str]) -> Any:
    """The model an artifact holds (bytes, or the path of a file), of its kind's class:
    ``LinearClassifier`` (PA...SCW2), ``RankSVM``, ``LambdaMART``, ``FastXML``, ``LLSVM``.

    Validated (magic, format version, checksum, shapes): anything else raises
    :class:`ArtifactError` saying what is wrong. An online model exported from the
    service also carries ``features_`` (the :class:`FeatureSpec` that encodes its
    examples) and, for hashed features, ``feature_names_`` (the names it has seen);
    ``learners.artifact.loads(blob).meta["service"]`` holds its service config,
    version and example count."""
    from learners.registry import load_model

    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            source = f.read()
    return load_model(bytes(source))
