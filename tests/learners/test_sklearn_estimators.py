"""scikit-learn compatibility of learners.linear.sklearn (check_estimator + behaviour)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.datasets import load_digits
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from learners.features import Batch
from learners.linear import AROW, make_classifier
from learners.linear.sklearn import (
    AROWClassifier,
    CWClassifier,
    PA1Classifier,
    PA2Classifier,
    PAClassifier,
    SCW1Classifier,
    SCW2Classifier,
)

# Checks we expect to fail, with the reason. Everything else must pass.
# (Skipped by scikit-learn itself in this environment: the array-API checks, because
# SCIPY_ARRAY_API is unset, and the pandas checks, because pandas is not installed.)
_PA_ONE_PASS = (
    "plain PA (no intercept, uncapped step ℓ/‖x‖²) overshoots on the check's overlapping "
    "3-blob data and ends at 0.54 training accuracy (< 0.83); the capped PA-I, which "
    "equals scikit-learn's own PassiveAggressiveClassifier (test_pa1_equals_scikit_learn), "
    "and AROW/SCW pass the check"
)
_ZERO_WEIGHT = (
    "the check gives some samples weight 0 to drop them; an importance weight must be "
    "> 0 here (a 0 is refused with a ValueError naming sample_weight[i], as /update "
    "refuses it), and one pass of an online learner depends on the sample order, which "
    "the equivalence check shuffles (weight k against k repeats on a9a: "
    "tests/learners/test_weights_quality.py)"
)
_WEIGHT_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": _ZERO_WEIGHT,
    "check_sample_weight_equivalence_on_sparse_data": _ZERO_WEIGHT,
    "check_classifiers_one_label_sample_weights": _ZERO_WEIGHT,
}
EXPECTED_FAILED = {
    "PAClassifier": {
        "check_classifiers_train": _PA_ONE_PASS,
        "check_classifiers_train(readonly_memmap=True)": _PA_ONE_PASS,
        "check_classifiers_train(readonly_memmap=True,X_dtype=float32)": _PA_ONE_PASS,
    }
}


def _expected_failed(estimator: object) -> dict[str, str]:
    return {**_WEIGHT_CHECKS, **EXPECTED_FAILED.get(type(estimator).__name__, {})}


@parametrize_with_checks(
    [AROWClassifier(), PAClassifier(), SCW1Classifier(covariance="full")],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_check_estimator(estimator, check) -> None:
    check(estimator)


def test_pa1_equals_scikit_learn() -> None:
    import warnings

    from sklearn.datasets import make_blobs

    try:
        from sklearn.linear_model import PassiveAggressiveClassifier
    except ImportError:  # pragma: no cover - removed in some future scikit-learn
        pytest.skip("scikit-learn has no PassiveAggressiveClassifier")
    X, y = make_blobs(random_state=0, n_samples=300)
    X = StandardScaler().fit_transform(X)
    yb = (y == 0).astype(int)
    ours = PA1Classifier(C=0.5).fit(X, yb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = PassiveAggressiveClassifier(
            C=0.5, fit_intercept=False, max_iter=1, tol=None, shuffle=False
        ).fit(X, yb)
    np.testing.assert_allclose(ours.decision_function(X), peer.decision_function(X), rtol=1e-10)
    assert PAClassifier().fit(X, yb).score(X, yb) < 0.83 < ours.score(X, yb)  # the xfail above


@pytest.mark.parametrize(
    "est",
    [
        PAClassifier(),
        PA1Classifier(C=0.1),
        PA2Classifier(C=0.1),
        CWClassifier(),
        AROWClassifier(),
        SCW1Classifier(),
        SCW2Classifier(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_pipeline_cross_validation_on_digits(est) -> None:
    X, y = load_digits(return_X_y=True)
    scores = cross_val_score(make_pipeline(StandardScaler(), est), X, y, cv=3)
    assert scores.mean() > 0.80


def test_estimator_equals_the_online_model() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    est = AROWClassifier(r=2.0).fit(X, y)
    model = AROW(dim=5, r=2.0)
    model.update(Batch.from_dense(X), y.tolist())
    assert np.array_equal(est.model_.state().mu, model.state().mu)
    assert est.classes_.tolist() == ["no", "yes"]
    # binary decision_function: one column, positive means classes_[1]
    d = est.decision_function(X)
    assert d.shape == (200,)
    assert np.array_equal(est.predict(X), np.where(d > 0, "yes", "no"))


def test_sample_weight_reaches_the_online_model() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] > 0, "yes", "no")
    w = rng.uniform(0.1, 5.0, 120)
    est = SCW1Classifier().partial_fit(X[:60], y[:60], sample_weight=w[:60])
    est.partial_fit(X[60:], y[60:], sample_weight=w[60:])
    model = make_classifier("scw1", 4, {})
    model.update(Batch.from_dense(X), y.tolist(), w)
    # the estimator codes labels as integers: compare the learned arrays
    assert np.array_equal(est.model_.state().mu, model.state().mu)
    assert np.array_equal(est.model_.state().sigma, model.state().sigma)
    plain = AROWClassifier().fit(X, y)
    ones = AROWClassifier().fit(X, y, sample_weight=np.ones(120))
    assert ones.model_.state_digest() == plain.model_.state_digest()
    with pytest.raises(ValueError, match=r"sample_weight\[3\]"):
        AROWClassifier().fit(X, y, sample_weight=np.where(np.arange(120) == 3, -1.0, 1.0))


def test_partial_fit_accepts_new_labels_and_sparse_input() -> None:
    from scipy.sparse import csr_matrix

    rng = np.random.default_rng(1)
    centers = rng.normal(size=(4, 8)) * 4
    y = rng.integers(0, 4, 400)
    X = centers[y] + rng.normal(size=(400, 8))
    est = SCW1Classifier()
    est.partial_fit(csr_matrix(X[:100]), y[:100] % 2)  # labels 0, 1 only
    assert est.classes_.tolist() == [0, 1]
    est.partial_fit(csr_matrix(X[100:]), y[100:])  # 2 and 3 appear
    assert est.classes_.tolist() == [0, 1, 2, 3]
    assert est.decision_function(X).shape == (400, 4)
    assert est.score(X[300:], y[300:]) > 0.6
    assert est.get_params() == {"C": 0.01, "eta": 0.75, "covariance": "diagonal", "epochs": 1}


def test_invalid_hyperparameters_fail_at_fit() -> None:
    X = np.eye(4)
    y = [0, 1, 0, 1]
    with pytest.raises(ValueError, match=r"params.r: must be > 0"):
        AROWClassifier(r=-1).fit(X, y)
    with pytest.raises(ValueError, match="epochs"):
        AROWClassifier(epochs=0).fit(X, y)
