"""An online regressor as an artifact (kind ``"regression"``) and back: the parts
``LinearRegressor.to_bytes`` / ``snapshot`` write, and the checks ``from_artifact``
makes before a model is built from one.

>>> from learners.regression import make_regressor
>>> reg = make_regressor("pa", 3)
>>> params, arrays, meta = parts(reg, reg.state())
>>> sorted(params), sorted(arrays), meta
(['algorithm', 'dim', 'hyperparameters', 'n_seen', 'n_updates'], ['mu', 'noise', 'y_stats'], {})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from learners import artifact
from learners.feature_names import artifact_extras, read_extras

if TYPE_CHECKING:
    from learners.regression._base import LinearRegressor
    from learners.regression._model import RegressionState

KIND = "regression"


def parts(
    reg: LinearRegressor,
    st: RegressionState,
    meta: dict[str, Any] | None = None,
    extras: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """(params, arrays, meta) of the artifact; ``extras``: ``artifact_extras`` of the
    spec and names, taken with the state (else now)."""
    params = {
        "algorithm": reg.algorithm,
        "dim": reg.dim,
        "hyperparameters": reg.params,
        "n_seen": st.n_seen,
        "n_updates": st.n_updates,
    }
    own_meta, own_arrays = extras or artifact_extras(reg.features_, reg.feature_names_)
    arrays = {"mu": st.mu, "y_stats": st.y_stats, "noise": st.noise}
    if st.sigma is not None:
        arrays["sigma"] = st.sigma
    arrays.update(own_arrays)
    return params, arrays, {**own_meta, **(meta or {})}


def read(cls: type[LinearRegressor], art: artifact.Artifact) -> LinearRegressor:
    """The model ``art`` holds, built with ``make_regressor`` and validated; an
    ``ArtifactError`` naming the problem otherwise (``cls``: a subclass refuses another
    algorithm's artifact)."""
    from learners.regression import make_regressor
    from learners.regression._base import LinearRegressor
    from learners.regression._model import RegressionState

    if art.kind != KIND:
        raise artifact.ArtifactError(f"artifact holds a {art.kind!r} model, expected {KIND!r}")
    p = art.params
    mu = art.array("mu")
    if mu.ndim != 1 or p.get("dim") != mu.shape[0]:
        # before building: the model allocates its state from params.dim
        raise artifact.ArtifactError(
            f"regression artifact: state.mu: shape {tuple(mu.shape)} does not match "
            f"params.dim {p.get('dim')!r}"
        )
    try:
        reg = make_regressor(p["algorithm"], p["dim"], p["hyperparameters"])
        st = RegressionState(
            mu, art.arrays.get("sigma"), p["n_seen"], p["n_updates"],
            art.array("y_stats"), art.array("noise"),
        )  # fmt: skip
        reg._check_state(st)
        reg.features_, reg.feature_names_ = read_extras(art.meta, art.arrays, reg.dim)
    except (KeyError, TypeError, ValueError) as exc:
        raise artifact.ArtifactError(f"regression artifact: {exc}") from None
    if type(reg) is not cls and cls is not LinearRegressor:
        raise artifact.ArtifactError(f"artifact holds {p['algorithm']!r}, not {cls.__name__}")
    reg._restore(st)
    return reg
