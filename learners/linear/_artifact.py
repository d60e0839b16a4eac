"""A linear classifier as an artifact (kind ``"linear"``) and back: the parts
``LinearClassifier.to_bytes`` / ``snapshot`` write, and the checks ``from_artifact``
makes before a model is built from one (shapes, labels, counts, finite values, the
covariance a learner can reach, the feature spec and names)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from learners import artifact
from learners.base import check_label
from learners.feature_names import artifact_extras, read_extras

if TYPE_CHECKING:
    from learners.linear._base import LinearClassifier
    from learners.linear._state import LinearState

KIND = "linear"


def parts(
    clf: LinearClassifier,
    st: LinearState,
    meta: dict[str, Any] | None = None,
    extras: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """(params, arrays, meta) of the artifact; ``extras``: ``artifact_extras`` of the
    spec and names, taken with the state (else now)."""
    # algorithm, dim and hyperparameters never change after construction
    params = {
        "algorithm": clf.algorithm,
        "dim": clf.dim,
        "hyperparameters": clf.params,
        "labels": list(st.labels),
        "n_seen": st.n_seen,
        "n_updates": st.n_updates,
    }
    own_meta, own_arrays = extras or artifact_extras(clf.features_, clf.feature_names_)
    arrays = {"mu": st.mu}
    if st.sigma is not None:
        arrays["sigma"] = st.sigma
    arrays.update(own_arrays)
    return params, arrays, {**own_meta, **(meta or {})}


def read(cls: type[LinearClassifier], art: artifact.Artifact) -> LinearClassifier:
    """The model ``art`` holds, built with ``make_classifier`` and validated; an
    ``ArtifactError`` naming the problem otherwise (``cls``: a subclass refuses another
    algorithm's artifact)."""
    from learners.linear import make_classifier
    from learners.linear._base import LinearClassifier
    from learners.linear._state import LinearState

    if art.kind != KIND:
        raise artifact.ArtifactError(f"artifact holds a {art.kind!r} model, expected {KIND!r}")
    p = art.params
    mu = art.array("mu")
    if mu.ndim != 2 or p.get("dim") != mu.shape[1]:
        # before building: the model allocates its state from params.dim
        raise artifact.ArtifactError(
            f"linear artifact: state.mu: shape {tuple(mu.shape)} does not match "
            f"params.dim {p.get('dim')!r}"
        )
    try:
        clf = make_classifier(p["algorithm"], p["dim"], p["hyperparameters"])
        labels = [check_label(lab, f"labels[{i}]") for i, lab in enumerate(p["labels"])]
        n_seen, n_updates = int(p["n_seen"]), int(p["n_updates"])
    except (KeyError, TypeError, ValueError) as exc:
        raise artifact.ArtifactError(f"linear artifact has bad params: {exc}") from None
    sig = art.arrays.get("sigma")
    st = LinearState(labels, mu, sig, n_seen, n_updates)
    try:
        if not (np.isfinite(mu).all() and (sig is None or np.isfinite(sig).all())):
            raise ValueError("state arrays hold non-finite values")
        if n_seen < 0 or n_updates < 0:
            raise ValueError("n_seen and n_updates must be >= 0")
        clf._check_state(st)
        clf.features_, clf.feature_names_ = read_extras(art.meta, art.arrays, clf.dim)
    except ValueError as exc:
        raise artifact.ArtifactError(f"linear artifact: {exc}") from None
    if type(clf) is not cls and cls is not LinearClassifier:
        raise artifact.ArtifactError(f"artifact holds {p['algorithm']!r}, not {cls.__name__}")
    clf._restore(st)
    return clf
