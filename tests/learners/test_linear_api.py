"""The public API of learners.linear: construction, labels, prediction, errors, artifacts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from learners.artifact import ArtifactError, dumps
from learners.features import Batch, FeatureError, FeatureSpec
from learners.linear import (
    ALGORITHMS,
    AROW,
    CW,
    PA,
    PA1,
    PA2,
    SCW1,
    SCW2,
    LinearClassifier,
    NonFiniteWeightsError,
    NotFittedError,
    make_classifier,
)
from learners.registry import load_model

SPEC = FeatureSpec.sparse(6)


def test_algorithm_names_and_classes() -> None:
    assert ALGORITHMS == ("pa", "pa1", "pa2", "cw", "arow", "scw1", "scw2")
    for name, cls in zip(ALGORITHMS, [PA, PA1, PA2, CW, AROW, SCW1, SCW2], strict=True):
        clf = make_classifier(name, dim=5)
        assert type(clf) is cls and clf.algorithm == name and clf.dim == 5
        # params are JSON-able and rebuild the same model
        assert make_classifier(name, 5, clf.params).params == clf.params


@pytest.mark.parametrize(
    ("algo", "params", "message"),
    [
        ("arow", {"r": 0}, "params.r: must be > 0"),
        ("arow", {"r": -1.0}, "params.r: must be > 0"),
        ("arow", {"r": True}, "params.r: must be a number"),
        ("arow", {"r": "1"}, "params.r: must be a number"),
        ("arow", {"r": float("nan")}, "params.r: must be > 0"),
        ("arow", {"C": 1.0}, "params.C: unknown hyperparameter for arow"),
        ("pa", {"C": 1.0}, "params.C: unknown hyperparameter for pa"),
        ("pa1", {"covariance": "diagonal"}, "params.covariance: unknown"),
        ("pa2", {"C": 0.0}, "params.C: must be > 0"),
        ("cw", {"eta": 0.5}, r"params.eta: must be in \(0.5, 1\)"),
        ("scw1", {"eta": 1.0}, r"params.eta: must be in \(0.5, 1\)"),
        ("scw2", {"C": -2}, "params.C: must be > 0"),
        ("scw1", {"covariance": "dense"}, "params.covariance: must be 'diagonal' or 'full'"),
    ],
)
def test_invalid_hyperparameters_are_named(algo: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_classifier(algo, 10, params)


def test_other_construction_errors() -> None:
    with pytest.raises(ValueError, match="algorithm: must be one of"):
        make_classifier("svm", 10)
    with pytest.raises(ValueError, match="dim: must be a positive integer"):
        AROW(dim=0)
    with pytest.raises(ValueError, match=r"params.covariance: 'full' .* dim <= 4096"):
        AROW(dim=2**20, covariance="full")
    with pytest.raises(ValueError, match=r"params.r: must be > 0"):
        AROW(dim=3, r=-1)


def test_predicting_before_learning_raises_not_fitted() -> None:
    clf = AROW(dim=6)
    b = SPEC.encode([{"1": 1.0}])
    for fn in (clf.predict, clf.decision_function, clf.predict_details):
        with pytest.raises(NotFittedError, match="has not learned any label yet"):
            fn(b)
    assert issubclass(NotFittedError, ValueError)


def test_one_label_then_binary_symmetric_scores() -> None:
    clf = SCW1(dim=6)
    clf.update(SPEC.encode([{"0": 1.0}]), ["+1"])
    probe = SPEC.encode([{"0": 1.0}, {"3": -2.0}])
    assert clf.predict(probe) == ["+1", "+1"]  # the only label, whatever the score
    assert clf.decision_function(probe).shape == (2, 1)
    clf.update(SPEC.encode([{"1": 1.0}, {"2": 0.5}]), ["-1", "+1"])
    s = clf.decision_function(probe)
    assert s.shape == (2, 2) and np.array_equal(s[:, 0], -s[:, 1])
    d = clf.predict_details(probe)[0]
    assert d.scores["+1"] == -d.scores["-1"] == d.score > 0
    assert d.confidence is not None and 0.5 < d.confidence <= 1.0


def test_string_and_int_labels_stay_distinct_through_artifacts() -> None:
    clf = AROW(dim=6)
    clf.update(SPEC.encode([{"0": 1.0}, {"1": 1.0}, {"2": 1.0}]), ["1", 1, "+1"])
    assert clf.labels_ == ["1", 1, "+1"]
    clone = LinearClassifier.from_bytes(clf.to_bytes())
    assert clone.labels_ == ["1", 1, "+1"]
    assert [type(x) for x in clone.labels_] == [str, int, str]
    assert clone.predict(SPEC.encode([{"1": 1.0}])) == [1]
    assert load_model(clf.to_bytes()).state_digest() == clf.state_digest()


def test_third_label_embedding_keeps_the_pair_exact() -> None:
    clf = AROW(dim=6)
    rows = [{"0": 1.0, "1": 0.5}, {"1": -1.0}, {"0": 0.3, "1": 2.0}, {"0": -1.0}]
    clf.update(SPEC.encode(rows), ["p", "n", "p", "n"])
    probe = SPEC.encode([{"0": 0.7, "1": -0.2}])
    s = clf.decision_function(probe)[0, 0]
    before = clf.state()
    # the third label's example touches only features 4, 5: the pair's rows stay exact
    clf.update(SPEC.encode([{"4": 1.0, "5": 1.0}]), ["third"])
    after = clf.decision_function(probe)[0]
    assert after[0] == s / 2 and after[1] == -s / 2 and after[2] == 0.0
    st = clf.state()
    assert st.sigma is not None and before.sigma is not None
    assert np.array_equal(st.mu[0, :4] - st.mu[1, :4], before.mu[0, :4])
    assert np.array_equal(st.sigma[0, :4] + st.sigma[1, :4], before.sigma[0, :4])


@pytest.mark.parametrize("cov", ["diagonal", "full"])
def test_multiclass_predict_details(cov: str) -> None:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 6)) * 3
    y = rng.integers(0, 4, 300)
    X = centers[y] + rng.normal(size=(300, 6))
    clf = SCW1(dim=6, covariance=cov)
    res = clf.update(Batch.from_dense(X), [f"c{k}" for k in y])
    assert res.applied == 300 and res.correct > 200 and 0 < res.updates < 300
    details = clf.predict_details(Batch.from_dense(X[:20]))
    labels = clf.predict(Batch.from_dense(X[:20]))
    for d, lab in zip(details, labels, strict=True):
        assert d.label == lab
        assert d.score == max(d.scores.values())
        assert set(d.scores) == set(clf.labels_)
        assert d.confidence is not None and 0.5 <= d.confidence <= 1.0
    pa = PA1(dim=6)
    pa.update(Batch.from_dense(X), [f"c{k}" for k in y])
    assert all(d.confidence is None for d in pa.predict_details(Batch.from_dense(X[:5])))


def test_label_validation_names_the_position() -> None:
    clf = PA(dim=6)
    b = SPEC.encode([{"0": 1.0}, {"1": 1.0}, {"2": 1.0}])
    bads: list[Any] = [True, 2.5, "", None, b"x"]  # (2.0 is the label 2: a whole float)
    for bad in bads:
        with pytest.raises(FeatureError, match=r"labels\[1\]"):
            clf.update(b, ["a", bad, "b"])
    with pytest.raises(ValueError, match="labels: got 2 labels for a batch of 3 examples"):
        clf.update(b, ["a", "b"])
    with pytest.raises(FeatureError, match="labels\\[1\\]"):
        clf.update(b, np.array([1.0, 2.5, 1.0]))
    with pytest.raises(ValueError, match=r"batch.dim: 7 does not match the model dimension 6"):
        clf.update(FeatureSpec.sparse(7).encode([{"0": 1.0}]), ["a"])
    assert clf.labels_ == [] and clf.n_seen_ == 0


def test_numpy_and_list_labels_give_the_same_state() -> None:
    rng = np.random.default_rng(1)
    X = Batch.from_dense(rng.normal(size=(200, 6)))
    y = rng.integers(-3, 30, 200)  # > 16 labels: exercises the sorted path too
    a, b, c = AROW(dim=6), AROW(dim=6), AROW(dim=6)
    a.update(X, y)
    b.update(X, y.tolist())
    c.update(X, y.astype(np.int32))
    assert a.state_digest() == b.state_digest() == c.state_digest()
    assert a.labels_ == list(dict.fromkeys(y.tolist()))  # order of first appearance


def test_label_coding_paths_agree() -> None:
    from learners.linear._labels import label_codes

    def reference(labels: list[Any], index: dict[Any, int]) -> tuple[list[int], list[Any]]:
        codes, new = dict(index), []
        for i, lab in enumerate(labels):
            if lab not in codes:
                codes[lab] = len(codes)
                new.append((i, lab))
        return [codes[lab] for lab in labels], new

    rng = np.random.default_rng(5)
    for n_known in (0, 2, 12):  # 12 > 8: the kernel bisects instead of scanning
        index = {int(v): k for k, v in enumerate(rng.permutation(40)[:n_known] - 5)}
        for n in (1, 5, 16, 17, 300):
            y = rng.integers(-5, 35, n)
            want = reference(y.tolist(), index)
            for labels in (y, y.tolist(), y.astype(np.int32)):
                got, new = label_codes(labels, n, index)
                assert got.dtype == np.int64 and got.tolist() == want[0] and new == want[1]
            # uint64 (may exceed int64): its own path; labels shifted to be >= 0
            got, new = label_codes(
                (y + 5).astype(np.uint64), n, {k + 5: c for k, c in index.items()}
            )
            assert got.tolist() == want[0] and new == [(i, lab + 5) for i, lab in want[1]]
    # known labels take the dict path; a bool equal to a known key must not, and a
    # whole float or numpy integer is read as the int it equals (never kept as such)
    clf = PA(dim=6)
    clf.update(SPEC.encode([{"0": 1.0}, {"1": 1.0}]), [1, 0])
    with pytest.raises(FeatureError, match=r"labels\[1\]"):
        clf.update(SPEC.encode([{"0": 1.0}, {"1": 1.0}]), [0, True])
    for same in (1.0, np.int64(1)):
        got, new = label_codes([0, same], 2, clf._index)
        assert got.tolist() == [1, 0] and new == []
    got, new = label_codes([0, 7.0], 2, clf._index)
    assert new == [(1, 7)] and type(new[0][1]) is int


def test_non_finite_weights_reject_the_batch_and_restore_state() -> None:
    clf = PA(dim=6)
    clf.update(SPEC.encode([{"0": 1.0}, {"1": 1.0}]), ["a", "b"])
    before = clf.state_digest()
    huge = SPEC.encode([{"2": 0.5}, {"0": 1e300, "3": 1e300}])
    with pytest.raises(
        FloatingPointError, match=r"non-finite at labels\[1\]; state left unchanged"
    ) as e:
        clf.update(huge, ["a", "b"])
    assert isinstance(e.value, NonFiniteWeightsError) and isinstance(e.value, ValueError)
    assert e.value.location == "labels[1]"
    assert clf.state_digest() == before
    # same when the batch also introduced a new label (multi-segment rollback)
    with pytest.raises(FloatingPointError, match=r"labels\[1\]"):
        clf.update(huge, ["new", "b"])
    assert clf.state_digest() == before and clf.labels_ == ["a", "b"]
    assert clf.n_seen_ == 2


@pytest.mark.parametrize("cov", ["diagonal", "full"])
@pytest.mark.parametrize("dim", [6, 400])  # dim 6: rollback from a state copy; 400: from the log
@pytest.mark.parametrize("known", [True, False])  # False: a new label, several kernel runs
def test_bad_rows_are_named_first_and_leave_state_unchanged(
    cov: str, dim: int, known: bool
) -> None:
    # Whatever the rollback mode, a bad row is named (before bad labels and before
    # non-finite weights at an earlier row) and the state is left unchanged.
    rng = np.random.default_rng(7)
    clf = AROW(dim=dim, covariance=cov if dim <= 64 else "diagonal")
    X = np.zeros((40, dim))
    X[:, :6] = rng.normal(size=(40, 6))
    y = ["a", "b"] * 20
    clf.update(Batch.from_dense(X), y)
    before = clf.state_digest()
    labels = y if known else [*y[:-1], "c"]
    good = Batch.from_dense(X)

    def with_value(row: int, value: float) -> Batch:
        v = good.values.copy()
        v[good.indptr[row]] = value
        return Batch(good.indptr, good.indices, v, dim)

    ix = good.indices.copy()
    ix[good.indptr[30]] = dim  # out of range in row 30
    cases: list[tuple[Batch, list[Any], str]] = [
        (Batch(good.indptr, ix, good.values, dim), labels, r"batch\[30\]: a feature index"),
        (with_value(25, math.nan), labels, r"batch\[25\]: a feature value is not finite"),
        (with_value(25, math.nan), [*labels[:-1], None], r"batch\[25\]"),  # batch first
        (with_value(25, math.inf), labels[:-1], r"batch\[25\]"),  # before the label count
    ]
    ix2 = good.indices.copy()
    a = good.indptr[12]
    ix2[a], ix2[a + 1] = ix2[a + 1], ix2[a]
    cases.append((Batch(good.indptr, ix2, good.values, dim), labels, r"batch\[12\]: .* sorted"))
    ip = good.indptr.copy()
    ip[5] = ip[6] + 1
    cases.append((Batch(ip, good.indices, good.values, dim), labels, r"batch.indptr"))
    # weights overflow at row 10, but row 30 is bad: the bad row is named
    v = good.values.copy()
    v[good.indptr[10] : good.indptr[11]] = 1e300
    v[good.indptr[30]] = math.nan
    cases.append((Batch(good.indptr, good.indices, v, dim), labels, r"batch\[30\]"))
    for batch, labs, match in cases:
        with pytest.raises(ValueError, match=match) as e:
            clf.update(batch, labs)
        assert not isinstance(e.value, NonFiniteWeightsError)
        assert clf.state_digest() == before and clf.labels_ == ["a", "b"]
    v[good.indptr[30]] = 1.0
    with pytest.raises(NonFiniteWeightsError, match=r"labels\[10\]"):
        clf.update(Batch(good.indptr, good.indices, v, dim), labels)
    assert clf.state_digest() == before and clf.n_seen_ == 40
    assert clf.update(good, labels).applied == 40  # and it still learns


@pytest.mark.parametrize("algo", ["pa", "arow", "scw1"])
def test_failed_first_batch_leaves_a_new_model(algo: str) -> None:
    # a new model's first batch rolls back by rebuilding the initial state (no copy)
    clf, ref = make_classifier(algo, dim=6), make_classifier(algo, dim=6)
    huge = SPEC.encode([{"2": 0.5}, {"0": 1e300, "3": 1e300}, {"1": 1.0}])
    with pytest.raises(NonFiniteWeightsError, match=r"labels\[1\]"):
        clf.update(huge, ["a", "b", "c"])
    assert clf.state_digest() == ref.state_digest() and clf.labels_ == []
    good = SPEC.encode([{"2": 0.5}, {"0": 1.0, "3": 1.0}])
    clf.update(good, ["a", "b"])
    ref.update(good, ["a", "b"])
    assert clf.state_digest() == ref.state_digest()
    before = clf.state_digest()
    with pytest.raises(NonFiniteWeightsError):  # no longer new: restored from a copy
        clf.update(huge, ["a", "b", "c"])
    assert clf.state_digest() == before and clf.labels_ == ["a", "b"]


def test_non_finite_full_covariance_restores_state() -> None:
    clf = AROW(dim=6, covariance="full")
    clf.update(SPEC.encode([{"0": 1.0}, {"1": 1.0}, {"2": 1.0}]), ["a", "b", "c"])
    before = clf.state_digest()
    with pytest.raises(FloatingPointError):
        clf.update(SPEC.encode([{"4": 1.0}, {"0": 1e200, "1": -1e200}]), ["b", "a"])
    assert clf.state_digest() == before


def test_empty_batch_and_zero_rows() -> None:
    clf = CW(dim=6)
    empty = Batch(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), 6)
    assert clf.update(empty, []).applied == 0
    zero = Batch.from_dense(np.zeros((2, 6)))  # rows without features: no update
    res = clf.update(zero, ["a", "b"])
    assert (res.applied, res.updates) == (2, 0) and clf.labels_ == ["a", "b"]


def test_artifact_errors() -> None:
    with pytest.raises(ArtifactError, match="expected 'linear'"):
        LinearClassifier.from_bytes(dumps("ranksvm", {}, {}))
    clf = AROW(dim=6)
    clf.update(SPEC.encode([{"0": 1.0}]), ["a"])
    with pytest.raises(ArtifactError, match="not PA"):
        PA.from_bytes(clf.to_bytes())
    bad = dumps("linear", {"algorithm": "arow", "dim": 6, "hyperparameters": {"r": 1.0},
                           "labels": ["a"], "n_seen": 1, "n_updates": 1},
                {"mu": np.zeros((1, 5)), "sigma": np.ones((1, 6))})  # fmt: skip
    with pytest.raises(ArtifactError, match=r"state.mu: shape \(1, 5\)"):
        LinearClassifier.from_bytes(bad)


def test_progressive_figures() -> None:
    clf = PA(dim=6)
    res = clf.update(SPEC.encode([{"0": 1.0}, {"0": 1.0}, {"0": 1.0}]), ["a", "a", "b"])
    # row 0: only label -> correct, loss 1 (margin 0); row 1: margin 1 -> no loss, no update;
    # row 2: predicts "a" (score 1), margin -1 -> loss 2
    assert (res.applied, res.correct, res.updates) == (3, 2, 2)
    assert math.isclose(res.loss_sum, 1.0 + 0.0 + 2.0)
    assert clf.n_seen_ == 3 and clf.n_updates_ == 2


@pytest.mark.parametrize(("algo", "cov"), [("pa2", None), ("cw", "diagonal"), ("scw2", "full")])
def test_state_and_from_state(algo: str, cov: str | None) -> None:
    params = {} if cov is None else {"covariance": cov}
    clf = make_classifier(algo, 6, params)
    clf.update(SPEC.encode([{"0": 1.0}, {"1": 1.0}, {"2": 1.0}]), ["a", "b", "c"])
    st = clf.state()
    clone = LinearClassifier.from_state(algo, 6, clf.params, st)
    assert clone.state_digest() == clf.state_digest()
    st.mu[0, 0] = 123.0  # a copy: the model is not affected
    assert clone.state_digest() == clf.state_digest()
    with pytest.raises(ValueError, match=r"state.mu: shape"):
        LinearClassifier.from_state(algo, 7, clf.params, clf.state())


@pytest.mark.parametrize(
    "module", ["__init__", "_normal", "pa", "cw", "arow", "scw", "sklearn", "dry_run", "confidence"]
)
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    name = "learners.linear" if module == "__init__" else f"learners.linear.{module}"
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("cov", ["diagonal", "full"])
def test_binary_confidence_is_phi_of_margin_over_std(cov: str) -> None:
    from scipy.stats import norm

    clf = AROW(dim=6, covariance=cov)
    clf.update(
        SPEC.encode([{"0": 1.0, "1": 0.5}, {"2": 1.0}, {"0": 0.2, "2": 0.7}]), ["p", "n", "n"]
    )
    x = np.array([0.0, 0.3, 2.0, 0.0, 0.0, 0.0])
    (d,) = clf.predict_details(Batch.from_dense(x[None, :]))
    st = clf.state()
    assert st.sigma is not None
    s = float(st.mu[0] @ x)
    v = float(x @ (np.diag(st.sigma[0]) if cov == "diagonal" else st.sigma[0]) @ x)
    assert s < 0 and d.label == "n" and d.score == -s  # the negative side wins
    assert d.confidence == pytest.approx(norm.cdf(abs(s) / np.sqrt(v)), rel=1e-12)


@pytest.mark.parametrize("keep", [8, 1 << 22])
@pytest.mark.parametrize("dim", [6, 400])
def test_undo_for_batches_bigger_than_the_kept_buffer(
    monkeypatch: pytest.MonkeyPatch, keep: int, dim: int
) -> None:
    import threading

    import learners.linear._learning as learning

    # keep=8: every batch takes a temporary buffer. dim=6: a long batch rolls back
    # from a copy of the state; dim=400: from the undo log of touched coordinates.
    monkeypatch.setattr(learning, "_KEEP_SCRATCH", keep)
    monkeypatch.setattr(learning, "_scratch", threading.local())
    rng = np.random.default_rng(3)
    X = np.zeros((50, dim))
    X[:, :6] = rng.normal(size=(50, 6))
    y = rng.integers(0, 3, 50)
    a, b = SCW2(dim=dim), SCW2(dim=dim)
    a.update(Batch.from_dense(X[:3]), np.arange(3))  # all labels known: one kernel run below
    b.update(Batch.from_dense(X[:3]), np.arange(3))
    a.update(Batch.from_dense(X), y)
    for i in range(50):
        b.update(Batch.from_dense(X[i : i + 1]), y[i : i + 1])
    assert a.state_digest() == b.state_digest()
    before = a.state_digest()
    X[40, 2] = 1e300
    with pytest.raises(NonFiniteWeightsError, match=r"labels\[40\]"):
        a.update(Batch.from_dense(X), y)
    assert a.state_digest() == before
