"""Normalised adaptive SGD regression (learners.regression.sgd): what its three
normalisations promise — no dependence on a feature's scale, importance weights that
never overshoot, estimates inside the range of the targets seen. The contract every
regressor shares is tested in test_regression.py and test_conformance.py."""

from __future__ import annotations

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError
from learners.features import Batch
from learners.regression import SGD, LinearRegressor, make_regressor


def _stream(n: int = 300, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, -1] = 1.0
    return X, X @ rng.normal(size=d) + rng.normal(scale=0.1, size=n)


def test_a_feature_in_other_units_learns_alike() -> None:
    """A column in grams rather than kilograms: the same predictions (the scale nⱼ and
    the AdaGrad sums are per coordinate, in normalised units)."""
    X, y = _stream()
    grams = X.copy()
    grams[:, 0] *= 1000.0
    a, b = SGD(dim=6), SGD(dim=6)
    ra, rb = a.update(Batch.from_dense(X), y), b.update(Batch.from_dense(grams), y)
    np.testing.assert_allclose(rb.predicted, ra.predicted, rtol=1e-9, atol=1e-12)
    assert b.weights_view()[0][0] == pytest.approx(a.weights_view()[0][0] / 1000.0, rel=1e-9)


@pytest.mark.parametrize("h", [1.0, 10.0, 1e3, 1e6])
def test_a_weighted_step_never_passes_the_target(h: float) -> None:
    X, y = _stream()
    reg = SGD(dim=6)
    reg.update(Batch.from_dense(X[:50]), y[:50])
    row, target = Batch.from_dense(X[50:51]), float(y[50]) + 5.0 * reg.y_std_
    before = float(reg.predict(row)[0])
    reg.update(row, [target], sample_weight=[h])
    after = float(reg.predict(row)[0])
    assert before < after <= target  # toward it, never past it
    if h >= 1e3:  # a heavy weight is (nearly) the whole way
        assert after == pytest.approx(target, rel=1e-6)


def test_estimates_stay_in_the_range_of_the_targets_seen() -> None:
    X, y = _stream()
    reg = SGD(dim=6)
    res = reg.update(Batch.from_dense(X), y)
    lo, hi = float(y.min()), float(y.max())
    assert lo <= res.predicted[1:].min() and res.predicted[1:].max() <= hi
    far = Batch.from_dense(np.vstack([X[:5] * 1e6, -X[:5] * 1e6]))
    p = reg.predict(far)
    assert p.min() >= lo and p.max() <= hi and {lo, hi} <= set(p.tolist())


def test_reopening_shrinks_the_adagrad_sums() -> None:
    X, y = _stream()
    reg = SGD(dim=6)
    reg.update(Batch.from_dense(X), y)
    before = reg.state().sigma.copy()  # type: ignore[union-attr]
    reg.reopen_confidence(0.75)
    after = reg.state().sigma
    np.testing.assert_allclose(after[:, 0], 0.25 * before[:, 0])  # type: ignore[index]
    np.testing.assert_array_equal(after[:, 1], before[:, 1])  # type: ignore[index]  # scales kept


def test_a_bad_artifact_is_refused() -> None:
    X, y = _stream()
    reg = make_regressor("sgd", 6, {"eta": 0.5})
    reg.update(Batch.from_dense(X), y)
    assert LinearRegressor.from_bytes(reg.to_bytes()).state_digest() == reg.state_digest()
    art = artifact.loads(reg.to_bytes())
    for name, change, message in (
        ("noise", lambda a: a[[0, 1, 3, 2]], "lo <= hi"),
        ("sigma", lambda a: -a, ">= 0"),
        ("noise", lambda a: a[:2].copy(), "shape"),
    ):
        arrays = {**art.arrays, name: change(art.arrays[name])}
        bad = artifact.dumps(art.kind, art.params, arrays, art.meta)
        with pytest.raises(ArtifactError, match=message):
            LinearRegressor.from_bytes(bad)
    with pytest.raises(ValueError, match=r"params\.eta"):
        make_regressor("sgd", 6, {"eta": 0.0})
