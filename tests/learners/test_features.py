"""Feature batches: wire formats, hashing, canonical rows, and errors that name the field."""

from __future__ import annotations

import math
from types import MappingProxyType

import numpy as np
import pytest

from learners.features import Batch, FeatureError, FeatureSpec, concat, murmurhash3_32

# Known MurmurHash3 x86_32 values (seed as given), cross-checked with the reference
# implementation (scikit-learn's murmurhash3_32(..., positive=True)).
KNOWN_HASHES = [
    ("", 0, 0),
    ("hello", 0, 613153351),
    ("age", 0, 717653329),
    ("job=clerk", 0, 3570694911),
    ("Hello, world!", 1234, 4210478515),
    ("ü日本", 0, 27991005),
    ("abcd", 0, 1139631978),
    ("abcde", 7, 3037955123),
]


@pytest.mark.parametrize(("text", "seed", "expected"), KNOWN_HASHES)
def test_murmurhash3_known_values(text: str, seed: int, expected: int) -> None:
    assert murmurhash3_32(text, seed) == expected


def test_hashed_features_are_stable_and_one_hot_for_strings() -> None:
    spec = FeatureSpec.hashed(20)
    b = spec.encode([{"age": 39, "job": "clerk"}])
    mask = (1 << 20) - 1
    expected = sorted([(717653329 & mask, 39.0), (3570694911 & mask, 1.0)])
    assert list(zip(b.indices.tolist(), b.values.tolist(), strict=True)) == expected
    assert b.dim == 1 << 20


def test_sparse_rows_sorted_and_duplicates_summed() -> None:
    spec = FeatureSpec.sparse(10)
    b = spec.encode([{"3": 1.0, "1": 2.0, 3: 0.5}, {"0": -1}])
    assert b.indptr.tolist() == [0, 2, 3]
    assert b.indices.tolist() == [1, 3, 0]
    assert b.values.tolist() == [2.0, 1.5, -1.0]


def test_feature_order_does_not_matter() -> None:
    spec = FeatureSpec.hashed(8)  # tiny space: collisions are summed deterministically
    row = {f"f{i}": float(i) * 0.1 for i in range(40)}
    rev = dict(reversed(list(row.items())))
    a, b = spec.encode([row]), spec.encode([rev])
    assert a.indices.tolist() == b.indices.tolist()
    assert a.values.tobytes() == b.values.tobytes()


def test_dense_rows() -> None:
    spec = FeatureSpec.dense(3)
    b = spec.encode([[0.0, 1.5, 2.0], [3, 0, 0]])
    assert b.to_dense().tolist() == [[0.0, 1.5, 2.0], [3.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("spec", "rows", "location", "problem"),
    [
        (FeatureSpec.sparse(5), [{"1": 1.0}, {"17": 1.0}], 'examples[1].x["17"]', "outside [0, 5)"),
        (FeatureSpec.sparse(5), [{"1": math.nan}], 'examples[0].x["1"]', "value is NaN"),
        (FeatureSpec.sparse(5), [{"1": math.inf}], 'examples[0].x["1"]', "value is infinite"),
        (FeatureSpec.sparse(5), [{"a": 1.0}], 'examples[0].x["a"]', "not an integer"),
        (FeatureSpec.sparse(5), [{"1": 1.0, " 1": 2.0}], 'examples[0].x[" 1"]', "canonical"),
        (FeatureSpec.sparse(5), [{"+1": 1.0}], 'examples[0].x["+1"]', "canonical"),
        (FeatureSpec.sparse(5), [{"01": 1.0}], 'examples[0].x["01"]', "canonical"),
        (FeatureSpec.sparse(50), [{"1_0": 1.0}], 'examples[0].x["1_0"]', "canonical"),
        (FeatureSpec.sparse(5), [{"\u0663": 1.0}], 'examples[0].x["\u0663"]', "canonical"),
        (FeatureSpec.sparse(5), [{"1 ": 1.0}], 'examples[0].x["1 "]', "canonical"),
        (FeatureSpec.sparse(5), [{"": 1.0}], 'examples[0].x[""]', "canonical"),
        (FeatureSpec.sparse(5), [{True: 1.0}], "examples[0].x[True]", "canonical"),
        (FeatureSpec.sparse(5), [{1.0: 1.0}], "examples[0].x[1.0]", "canonical"),
        (FeatureSpec.sparse(5), [[1.0]], "examples[0].x", "must be an object"),
        (FeatureSpec.sparse(5), [{"1": "x"}], 'examples[0].x["1"]', "must be a number"),
        (FeatureSpec.sparse(5), [{"1": True}], 'examples[0].x["1"]', "must be a number"),
        (FeatureSpec.hashed(4), [{"age": math.nan}], 'examples[0].x["age"]', "value is NaN"),
        (FeatureSpec.dense(3), [[1.0, 2.0]], "examples[0].x", "has 2 values, expected 3"),
        (FeatureSpec.dense(3), [[]], "examples[0].x", "has 0 values, expected 3"),
        (FeatureSpec.dense(2), [[1.0, 2.0], [1.0, math.nan]], "examples[1].x[1]", "value is NaN"),
        (FeatureSpec.dense(2), [[1.0, "a"]], "examples[0].x[1]", "must be a number"),
        (FeatureSpec.dense(2), [[1.0, True]], "examples[0].x[1]", "must be a number"),
        (FeatureSpec.dense(2), [{"0": 1.0}], "examples[0].x", "must be a list"),
        (FeatureSpec.dense(2), [], "examples", "no examples"),
    ],
)
def test_errors_name_example_and_field(spec, rows, location, problem) -> None:
    with pytest.raises(FeatureError) as info:
        spec.encode(rows)
    assert info.value.location == location
    assert problem in info.value.problem
    assert str(info.value).startswith(location + ": ")


@pytest.mark.parametrize(
    "spec", [FeatureSpec.sparse(5), FeatureSpec.hashed(4)], ids=["sparse", "hashed"]
)
def test_an_example_with_no_features_is_the_zero_vector(spec: FeatureSpec) -> None:
    """LIBSVM's w8a holds thousands of all-zero rows: ``{}`` is a row, not an error."""
    key = "1" if spec.kind == "sparse" else "a"
    for rows in ([{}], [{}, {key: 2.0}, {}], [{key: 2.0}, {}]):
        b = spec.encode(rows)
        assert b.n_rows == len(rows)
        dense = b.to_dense()
        assert [bool(r.any()) for r in dense] == [bool(r) for r in rows]
        assert b.indptr.tolist()[0] == 0 and b.indptr.tolist()[-1] == b.nnz == sum(map(len, rows))


def test_canonical_keys_and_int_keys_read_alike() -> None:
    spec = FeatureSpec.sparse(20)
    a = spec.encode([{"0": 1.0, "10": 2.0}])
    b = spec.encode([{0: 1.0, 10: 2.0}])
    assert a.indices.tolist() == b.indices.tolist() == [0, 10]
    # a key first seen as canonical and cached is not a licence for its other spellings
    with pytest.raises(FeatureError, match="canonical"):
        spec.encode([{"10": 1.0}, {"010": 1.0}])


def test_max_features_limit() -> None:
    with pytest.raises(FeatureError, match="exceed the limit of 2"):
        FeatureSpec.sparse(10).encode([{"1": 1, "2": 1, "3": 1}], max_features=2)


@pytest.mark.parametrize(
    "config",
    [{"kind": "dense"}, {"kind": "dense", "dim": 0}, {"kind": "hashed", "bits": 40}, {"kind": "x"}],
)
def test_bad_spec_configs(config) -> None:
    with pytest.raises(ValueError):
        FeatureSpec.from_config(config)


def test_spec_config_round_trip() -> None:
    for cfg in (
        {"kind": "dense", "dim": 28},
        {"kind": "sparse", "dim": 123},
        {"kind": "hashed", "bits": 20},
    ):
        assert FeatureSpec.from_config(cfg).to_config() == cfg


def test_from_dense_take_and_concat() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 4)) * (rng.random((6, 4)) > 0.5)
    b = Batch.from_dense(X)
    assert np.array_equal(b.to_dense(), X)
    assert np.array_equal(b.take([4, 1]).to_dense(), X[[4, 1]])
    both = concat([b.take([0, 1]), b.take([2, 3, 4, 5])])
    assert np.array_equal(both.to_dense(), X)


def test_from_csr_validates() -> None:
    with pytest.raises(ValueError, match="outside"):
        Batch.from_csr([0, 1], [7], [1.0], 5)
    with pytest.raises(ValueError, match="not finite"):
        Batch.from_csr([0, 1], [1], [np.nan], 5)
    b = Batch.from_csr([0, 3], [4, 1, 4], [1.0, 2.0, 3.0], 5)
    assert b.indices.tolist() == [1, 4] and b.values.tolist() == [2.0, 4.0]


def test_dense_refuses_numeric_strings() -> None:
    with pytest.raises(FeatureError) as info:
        FeatureSpec.dense(2).encode([[1.0, 2.0], [1.0, "3"]])
    assert info.value.location == "examples[1].x[1]"
    with pytest.raises(FeatureError):
        FeatureSpec.dense(2).encode([["1", "2"]])


def test_dense_integer_rows() -> None:
    b = FeatureSpec.dense(2).encode([[1, 2], [0, 3]])
    assert b.values.dtype == np.float64 and b.to_dense().tolist() == [[1, 2], [0, 3]]


def test_dense_refuses_bools_in_integer_rows() -> None:
    with pytest.raises(FeatureError) as info:
        FeatureSpec.dense(2).encode([[1, True]])
    assert info.value.location == "examples[0].x[1]"


def test_one_based_sparse_keys() -> None:
    """index_base 1: SVMlight's keys as written; key dim is the last column, 0 refused."""
    one = FeatureSpec.from_config({"kind": "sparse", "dim": 4, "index_base": 1})
    zero = FeatureSpec.sparse(4)
    rows1 = [{"1": 0.5, "4": 2.0}, {"3": -1.0}]
    rows0 = [{"0": 0.5, "3": 2.0}, {"2": -1.0}]
    a, b = one.encode(rows1), zero.encode(rows0)
    assert (a.indptr.tolist(), a.indices.tolist(), a.values.tolist()) == (
        b.indptr.tolist(), b.indices.tolist(), b.values.tolist())  # fmt: skip
    assert a.dim == 4
    # the checked path (a Mapping that is not a dict takes it) gives the same columns
    c = one.encode([MappingProxyType({"1": 0.5, "4": 2.0}), {"3": -1.0, "2": 0}])
    assert c.indices.tolist() == [0, 3, 1, 2]
    for key in ("0", "5"):
        with pytest.raises(FeatureError) as e:
            one.encode([{"1": 1.0}, {key: 1.0}])
        assert e.value.location == f'examples[1].x["{key}"]'
        assert "outside [1, 4] (1-based)" in e.value.problem
    assert one.to_config() == {"kind": "sparse", "dim": 4, "index_base": 1}
    assert zero.to_config() == {"kind": "sparse", "dim": 4}  # as before index_base existed
    assert FeatureSpec.from_config({"kind": "dense", "dim": 2, "index_base": 1}).index_base == 1


@pytest.mark.parametrize(
    "cfg",
    [
        {"kind": "sparse", "dim": 4, "index_base": 2},
        {"kind": "sparse", "dim": 4, "index_base": True},
        {"kind": "dense", "dim": 4, "index_base": "1"},
        {"kind": "hashed", "bits": 4, "index_base": 1},
    ],
)
def test_bad_index_base(cfg: dict) -> None:
    with pytest.raises(ValueError, match="index_base"):
        FeatureSpec.from_config(cfg)


@pytest.mark.parametrize(
    "module", ["learners.features", "learners.csr_batch", "learners.feature_keys"]
)
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), verbose=False)
    assert result.attempted > 0 and result.failed == 0
