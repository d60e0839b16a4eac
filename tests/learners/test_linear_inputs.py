"""The linear classifiers take inputs as real files give them (issue #10): all-zero
examples (||x||^2 = 0) leave the weights unchanged for every algorithm and count as
predicted examples; float labels that are whole numbers (``load_svmlight_file``'s
``1.0``/``-1.0``) are the integers they equal."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners.features import Batch, FeatureError, FeatureSpec
from learners.io.svmlight import read_svmlight
from learners.linear import ALGORITHMS, make_classifier
from tests.conftest import require_data

CASES = [(a, None) for a in ALGORITHMS if a.startswith("pa")] + [
    (a, c) for a in ALGORITHMS if not a.startswith("pa") for c in ("diagonal", "full")
]
SPEC = FeatureSpec.sparse(6)


def model(algo: str, cov: str | None) -> Any:
    return make_classifier(algo, 6, {} if cov is None else {"covariance": cov})


def arrays(m: Any) -> list[np.ndarray]:
    st = m.state()
    return [st.mu] + ([] if st.sigma is None else [st.sigma])


@pytest.mark.parametrize(("algo", "cov"), CASES)
def test_zero_vectors_leave_weights_unchanged_and_are_counted(algo: str, cov: str | None) -> None:
    m = model(algo, cov)
    # a fresh model learning only zero vectors: labels appear, weights stay at their start
    r = m.update(SPEC.encode([{}, {}, {}]), ["a", "b", "c"])
    assert (r.applied, r.updates) == (3, 0) and m.labels_ == ["a", "b", "c"]
    assert not m.state().mu.any()  # (Σ is the multiclass embedding's: halved, exactly)
    for labels in (["a", "b"], ["a", "b", "c"]):  # binary, then multiclass
        m2 = model(algo, cov)
        m2.update(SPEC.encode([{"0": 1.0, "3": -2.0}, {"1": 0.5}, {"2": 1.5}]), ["a", "b", "a"])
        if len(labels) == 3:
            m2.update(SPEC.encode([{"4": 1.0}]), ["c"])
        before = [a.copy() for a in arrays(m2)]
        seen = m2.n_seen_
        r = m2.update(SPEC.encode([{}, {}]), labels[:2])
        assert (r.applied, r.updates) == (2, 0)
        assert r.loss_sum == 2.0  # margin 0: hinge loss 1 each, finite
        assert m2.n_seen_ == seen + 2
        for a, b in zip(before, arrays(m2), strict=True):
            assert np.array_equal(a, b)
        preds = m2.predict_details(SPEC.encode([{}]))
        assert np.isfinite(preds[0].score) and set(preds[0].scores.values()) == {0.0}
        assert preds[0].confidence in (None, 0.5)
        assert np.isfinite(m2.decision_function(SPEC.encode([{}, {"0": 1.0}]))).all()


@pytest.mark.parametrize(("algo", "cov"), CASES)
def test_zero_vectors_in_a_batch_equal_the_loop(algo: str, cov: str | None) -> None:
    rows: list[dict[str, float]] = [{"0": 1.0}, {}, {"1": -1.0, "5": 2.0}, {}, {"2": 0.5}, {}]
    labels = ["a", "b", "b", "c", "a", "c"]
    batch_m, loop_m = model(algo, cov), model(algo, cov)
    r = batch_m.update(SPEC.encode(rows), labels)
    rs = [loop_m.update(SPEC.encode([x]), [y]) for x, y in zip(rows, labels, strict=True)]
    assert r.applied == 6 and r.correct == sum(x.correct for x in rs)
    assert batch_m.state_digest() == loop_m.state_digest()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_whole_float_labels_are_the_integers(dtype: type) -> None:
    batch = SPEC.encode([{"0": 1.0}, {"1": 1.0}, {"0": -1.0}, {}])
    ints = model("arow", "diagonal")
    ints.update(batch, [1, -1, -1, 1])
    for labels in ([1.0, -1.0, -1.0, 1.0], np.array([1.0, -1.0, -1.0, 1.0], dtype=dtype),
                   [np.float64(1.0), -1.0, np.int64(-1), 1]):  # fmt: skip
        m = model("arow", "diagonal")
        m.update(batch, labels)
        assert m.labels_ == [1, -1] and [type(y) for y in m.labels_] == [int, int]
        assert m.state_digest() == ints.state_digest()
        assert m.predict(SPEC.encode([{"0": 1.0}])) == [1]


@pytest.mark.parametrize(
    ("labels", "row"),
    [
        ([1.0, 1.5], 1),
        (np.array([1.0, -1.0, 0.5]), 2),
        (np.array([1.0, np.nan]), 1),
        (np.array([2.0**53, 1.0]), 0),
        ([1.0, 1e300], 1),
        ([1.0, float("inf")], 1),
    ],
)
def test_other_float_labels_refused_and_state_unchanged(labels: Any, row: int) -> None:
    m = model("pa", None)
    m.update(SPEC.encode([{"0": 1.0}]), [1])
    before = m.state_digest()
    batch = SPEC.encode([{"0": 1.0}] * len(labels))
    with pytest.raises(FeatureError) as e:
        m.update(batch, labels)
    assert e.value.location == f"labels[{row}]" and "whole number" in e.value.problem
    assert m.state_digest() == before


def test_a9a_labels_as_read_from_the_file() -> None:
    """read_svmlight gives float64 labels (+1.0/-1.0): learned as the integers 1/-1."""
    data = read_svmlight(require_data("a9a", "a9a"), n_features=123)
    assert data.y.dtype == np.float64
    rows = np.arange(2000)
    X: Batch = data.X.take(rows)
    m, ref = make_classifier("arow", 123), make_classifier("arow", 123)
    m.update(X, data.y[rows])
    ref.update(X, data.y[rows].astype(np.int64).tolist())
    assert sorted(m.labels_) == [-1, 1] and m.state_digest() == ref.state_digest()
