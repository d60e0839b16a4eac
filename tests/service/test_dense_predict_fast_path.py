"""learners.linear.serving.dense_answers (the one-call /predict of dense rows) gives the
answers of the general path (predict_details, then the probability map) bit for bit."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from learners.features import FeatureSpec
from learners.linear import ALGORITHMS, make_classifier
from learners.linear.serving import dense_answers
from service.models import probability
from service.models.payload import dense_batch


def _general(clf, pmap, X):
    batch = dense_batch(X)
    answers = [
        {"label": p.label, "score": p.score, "scores": p.scores, "confidence": p.confidence}
        for p in clf.predict_details(batch)
    ]
    probability.add_probabilities(clf, pmap, batch, answers)
    return answers


def _trained(algorithm: str, labels: list, covariance: str = "diagonal", seed: int = 0):
    rng = np.random.default_rng(seed)
    d = 12
    params = {"covariance": covariance} if algorithm != "pa" and "pa" not in algorithm else {}
    clf = make_classifier(algorithm, dim=d, params=params)
    pmap = probability.read_map(clf, {})
    W = rng.normal(size=(len(labels), d))
    for _ in range(6):
        X = rng.normal(size=(50, d)) * (rng.random((50, d)) < 0.7)  # some zeros, some -0.0
        X[0, :3] = -0.0
        y = [labels[k] for k in np.argmax(X @ W.T, axis=1).tolist()]
        batch = FeatureSpec.dense(d).encode(X.tolist())
        pmap_result = probability.learn(pmap, clf.update(batch, y))
        assert pmap_result is not None
    return clf, pmap, rng


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("labels", [["s", "b"], [0, 1], ["a", "b", "c", "d"], [1, "1x", 2]])
def test_the_same_answers_as_the_general_path(algorithm: str, labels: list) -> None:
    clf, pmap, rng = _trained(algorithm, labels)
    X = rng.normal(size=(40, 12)) * (rng.random((40, 12)) < 0.6)
    X[1] = 0.0  # an all-zero row: variance 0, confidence 0.5
    X[2, 5] = -0.0
    X[3] = 1e150  # huge margins
    fast = dense_answers(clf, X, pmap.a, pmap.b)
    general = _general(clf, pmap, X)
    if not clf._has_cov:  # PA has no confidence: the general path answers it
        assert fast is None
        return
    assert fast is not None
    assert orjson.dumps(fast, option=orjson.OPT_NON_STR_KEYS) == orjson.dumps(
        general, option=orjson.OPT_NON_STR_KEYS
    )
    assert [type(a["label"]) for a in fast] == [type(a["label"]) for a in general]


def test_full_covariance_and_unfitted_models_take_the_general_path() -> None:
    clf, pmap, rng = _trained("arow", ["a", "b"], covariance="full")
    assert dense_answers(clf, rng.normal(size=(2, 12)), pmap.a, pmap.b) is None
    fresh = make_classifier("arow", dim=12)
    assert dense_answers(fresh, np.zeros((1, 12)), 1.0, 0.0) is None  # not fitted: refused there
    one_label, pmap1, _ = _trained("arow", ["only"])
    assert dense_answers(one_label, np.zeros((1, 12)), pmap1.a, pmap1.b) is None


def test_another_width_takes_the_general_path() -> None:
    clf, pmap, _ = _trained("cw", ["a", "b"])
    assert dense_answers(clf, np.zeros((1, 11)), pmap.a, pmap.b) is None
    assert dense_answers(clf, np.zeros((1, 12), dtype=np.float32), pmap.a, pmap.b) is None
