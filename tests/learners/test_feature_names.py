"""FeatureNames (hashed index -> names seen), the online artifacts that carry them,
``learners.load``, and the scikit-learn estimators' ``coef_``/``intercept_``."""

from __future__ import annotations

import numpy as np
import pytest

import learners
from learners import artifact
from learners.artifact import ArtifactError
from learners.feature_names import MAX_FEATURE_NAMES, FeatureNames, names_of_rows
from learners.features import FeatureSpec, murmurhash3_32
from learners.linear import make_classifier
from learners.ranking.ranksvm import RankSVM
from tests.learners.test_artifact_fuzz import mutate


def test_names_of_rows_match_the_hashing() -> None:
    rows = [{"age": 39, "job": "clerk"}, {"age": 50.5, 7: 1.0}, [1.0, 2.0]]
    assert names_of_rows(rows) == ["age", "job=clerk", "age", "7"]
    spec = FeatureSpec.hashed(12)
    idx = spec.encode(rows[:1]).indices.tolist()
    assert sorted(idx) == sorted(murmurhash3_32(n) & 4095 for n in ["age", "job=clerk"])


def test_add_is_ordered_bounded_and_deterministic() -> None:
    names = FeatureNames(limit=3)
    assert names.add(["b", "a", "b"]) == 2
    assert names.add(["c", "d", "e"]) == 1  # the limit: the first ones are kept
    assert names.names() == ["b", "a", "c"] and names.full
    assert names.add(["z"]) == 0 and "z" not in names
    assert FeatureNames(limit=10**9).limit == MAX_FEATURE_NAMES
    with pytest.raises(ValueError, match="limit"):
        FeatureNames(limit=-1)


def test_unknown_hashes_against_a_set() -> None:
    rng = np.random.default_rng(0)
    names = FeatureNames(limit=10_000)
    vocab = [f"n{i}" for i in range(3000)]
    known: set[int] = set()
    for step in range(6):  # grows through several rehashes
        batch = [vocab[i] for i in rng.integers(0, 3000, 400)]
        hashes = np.array([murmurhash3_32(n) for n in batch], dtype=np.int64)
        want = list(dict.fromkeys(h for h in hashes.tolist() if h not in known))
        assert names.unknown_hashes(hashes).tolist() == want, step
        names.add(batch)
        known |= set(hashes.tolist())
    assert names.unknown_hashes(np.zeros(0, np.int64)).size == 0


def test_collisions_and_names_at() -> None:
    names = FeatureNames()
    vocab = [f"w{i}" for i in range(40)]
    names.add(vocab)
    by = names.by_index(bits=3)
    assert sorted(n for v in by.values() for n in v) == sorted(vocab)
    for i, found in by.items():
        assert all(murmurhash3_32(n) & 7 == i for n in found)
    assert max(len(v) for v in by.values()) > 1  # 40 names on 8 indices
    assert names.names_at([0], bits=3) == {0: by[0]} and names.names_at([], bits=3) == {}


def test_arrays_round_trip_and_malformed() -> None:
    names = FeatureNames(limit=50)
    names.add(["é", "age", "job=clerk", ""])
    arrays = names.to_arrays()
    back = FeatureNames.from_arrays(arrays, 50)
    assert back.names() == names.names() and back.by_index(20) == names.by_index(20)
    bad = {
        "offsets": {**arrays, "feature_names_offsets": arrays["feature_names_offsets"] + 1},
        "utf8": {**arrays, "feature_names_utf8": np.array([0xC3], np.uint8)},
        "dtype": {**arrays, "feature_names_hash": arrays["feature_names_hash"].astype(np.int64)},
        "shape": {**arrays, "feature_names_hash": arrays["feature_names_hash"][:2]},
    }
    dup = FeatureNames()
    dup.add(["a"])
    two = dup.to_arrays()
    bad["duplicate"] = {
        "feature_names_hash": np.concatenate([two["feature_names_hash"]] * 2),
        "feature_names_offsets": np.array([0, 1, 2], np.int64),
        "feature_names_utf8": np.frombuffer(b"aa", np.uint8),
    }
    for what, arr in bad.items():
        with pytest.raises(ValueError, match="feature names"):
            FeatureNames.from_arrays(arr, 50)
        assert what


def trained(spec: FeatureSpec, with_names: bool = True) -> object:
    clf = make_classifier("arow", spec.dim, {"r": 0.5})
    rows = [{"age": 1.0, "job": "a"}, {"age": -1.0, "job": "b"}, {"x": 2.0}]
    clf.update(spec.encode(rows * 4), ["+", "-", "o"] * 4)
    clf.features_ = spec
    if with_names:
        clf.feature_names_ = FeatureNames()
        clf.feature_names_.add(names_of_rows(rows))
    return clf


def test_online_artifacts_carry_features_and_names() -> None:
    spec = FeatureSpec.hashed(6)
    clf = trained(spec)
    blob = clf.to_bytes(meta={"service": {"model": "m", "version": 3}})  # type: ignore[attr-defined]
    art = artifact.loads(blob)
    assert art.meta["features"] == {"kind": "hashed", "bits": 6}
    assert art.meta["service"]["version"] == 3
    back = learners.load(blob)
    assert back.features_ == spec and back.feature_names_.names() == clf.feature_names_.names()  # type: ignore[attr-defined]
    assert back.state_digest() == clf.state_digest()  # type: ignore[attr-defined]
    snap = clf.snapshot(meta={"x": 1})()  # type: ignore[attr-defined]
    assert learners.load(bytes(snap)).feature_names_.names() == back.feature_names_.names()
    ranker = RankSVM(dim=64)
    ranker.features_ = spec
    ranker.update(spec.encode([{"a": 1.0}, {"b": 1.0}]), [1, 0], groups=[2])
    r2 = learners.load(ranker.to_bytes())
    assert r2.features_ == spec and r2.state_digest() == ranker.state_digest()


def test_online_artifacts_are_validated() -> None:
    clf = trained(FeatureSpec.hashed(6))
    blob = clf.to_bytes()  # type: ignore[attr-defined]
    art = artifact.loads(blob)
    wrong_dim = artifact.dumps(
        "linear", art.params, art.arrays, {**art.meta, "features": {"kind": "dense", "dim": 5}}
    )
    with pytest.raises(ArtifactError, match="dimension"):
        learners.load(wrong_dim)
    nan = {**art.arrays, "mu": np.full_like(art.arrays["mu"], np.nan)}
    with pytest.raises(ArtifactError, match="non-finite"):
        learners.load(artifact.dumps("linear", art.params, nan, art.meta))
    partial = {k: v for k, v in art.arrays.items() if k != "feature_names_utf8"}
    with pytest.raises(ArtifactError, match="missing"):
        learners.load(artifact.dumps("linear", art.params, partial, art.meta))
    huge = {**art.params, "dim": 2**40}
    with pytest.raises(ArtifactError, match=r"params\.dim"):
        learners.load(artifact.dumps("linear", huge, art.arrays, art.meta))
    with pytest.raises(ArtifactError, match=r"params\.dim"):
        learners.load(artifact.dumps("ranksvm", {"dim": 2**40}, {}, {}))


def test_fuzz_online_artifacts() -> None:
    """Seeded damage of a linear and a ranksvm artifact with features and names:
    refused with ArtifactError, or loaded and scoring finitely."""
    spec = FeatureSpec.hashed(6)
    ranker = RankSVM(dim=64)
    ranker.features_, ranker.feature_names_ = spec, FeatureNames()
    ranker.feature_names_.add(["a", "b"])
    ranker.update(spec.encode([{"a": 1.0}, {"b": 1.0}]), [1, 0], groups=[2])
    rng = np.random.default_rng(3)
    batch = spec.encode([{"age": 0.5, "x": 1.0}, {"b": -1.0}])
    outcomes = {"refused": 0, "loaded": 0}
    for kind, blob in (("linear", trained(spec).to_bytes()), ("ranksvm", ranker.to_bytes())):  # type: ignore[attr-defined]
        for i in range(300):
            try:
                what, bad = mutate(blob, rng)
            except OverflowError:  # a negative value into an unsigned array: no case
                continue
            try:
                model = learners.load(bad)
            except ArtifactError:
                outcomes["refused"] += 1
                continue
            except Exception as e:
                raise AssertionError(f"{kind} case {i} ({what}): {e!r}") from e
            if model.dim == 64 and (kind == "ranksvm" or model.labels_):
                # scores of damaged (finite) weights may overflow; scoring must not fail
                assert len(model.decision_function(batch)) == 2, (kind, i, what)
            outcomes["loaded"] += 1
    assert outcomes["refused"] > 200 and outcomes["loaded"] > 10, outcomes


def test_sklearn_coef_and_intercept() -> None:
    from learners.linear.sklearn import AROWClassifier, PAClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    for y in (np.where(X[:, 0] > 0, "b", "a"), np.where(X[:, 0] > 0, "a", "b")):
        for est in (AROWClassifier(), PAClassifier()):
            est.fit(X, y)
            assert est.coef_.shape == (1, 4) and est.intercept_.shape == (1,)
            np.testing.assert_allclose(X @ est.coef_[0], est.decision_function(X), rtol=1e-12)
    y3 = np.array(["a", "b", "c"])[rng.integers(0, 3, 120)]
    est = AROWClassifier().fit(X, y3)
    assert est.coef_.shape == (3, 4) and est.intercept_.tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(X @ est.coef_.T, est.decision_function(X), rtol=1e-12)
    est = AROWClassifier().partial_fit(X, y3 != "c", classes=[False, True])
    est = AROWClassifier().partial_fit(
        X[:10], np.array(["a"] * 5 + ["b"] * 5), classes=["a", "b", "c"]
    )
    assert est.coef_.shape == (3, 4) and not est.coef_[2].any()  # "c": announced, never seen
