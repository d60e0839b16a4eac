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
import sys
from typing import Any


def _use_dependency_stamps() -> None:
    """numba's cache, keyed also on the modules a kernel inlines (``_kernel_cache``):
    named in numba's setting before numba reads it (or in its config, if it already
    has); a setting of the user's own is left alone."""
    key = "NUMBA_CACHE_LOCATOR_CLASSES"
    if os.environ.get(key):
        return
    # Not imported here: numba imports it when it first caches a kernel.
    os.environ[key] = (
        "learners._kernel_cache.UserProvided,learners._kernel_cache.InTree,"
        "learners._kernel_cache.UserWide,UserProvidedCacheLocator,InTreeCacheLocator,"
        "UserWideCacheLocator,IPythonCacheLocator,ZipCacheLocator"
    )
    config = sys.modules.get("numba.core.config")
    if config is not None and not getattr(config, "CACHE_LOCATOR_CLASSES", None):
        config.CACHE_LOCATOR_CLASSES = os.environ[key]  # type: ignore[attr-defined]


_use_dependency_stamps()

from learners.artifact import Artifact, ArtifactError  # noqa: E402
from learners.base import Prediction, UpdateResult  # noqa: E402
from learners.features import Batch, FeatureError, FeatureSpec  # noqa: E402

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
    ``LinearClassifier`` (PA...SCW2), ``LinearRegressor`` (PA...AROW regression),
    ``RankSVM``, ``LambdaMART``, ``FastXML``, ``LLSVM``.

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
