"""learnserve learners: online and batch algorithms, features, artifacts.

This package imports only numpy and numba; it never imports the service.
"""

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
]
