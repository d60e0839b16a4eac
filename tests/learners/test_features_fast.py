"""The C-speed encoding of sparse/hashed rows (``FeatureSpec._encode_maps_fast``) gives
exactly the arrays of the checked per-feature loop, and declines (``None``) whatever
the loop must read itself or refuse with a named error."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from learners.features import FeatureError, FeatureSpec


def same(a: Any, b: Any) -> None:
    assert a.dim == b.dim
    for k in ("indptr", "indices", "values"):
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and np.array_equal(x, y), k
    assert np.array_equal(a.values.view(np.uint64), b.values.view(np.uint64))  # -0.0 too


def random_rows(rng: np.random.Generator, kind: str, n: int) -> list[dict[Any, Any]]:
    rows = []
    for _ in range(n):
        k = int(rng.integers(0, 12))  # 0: an example with no features (the zero vector)
        row: dict[Any, Any] = {}
        for _ in range(k):
            if kind == "sparse":
                key: Any = str(int(rng.integers(0, 50)))  # repeats within a row: no (dict)
            else:
                key = f"f{int(rng.integers(0, 40))}"
            r = rng.random()
            if kind == "hashed" and r < 0.25:
                row[key] = ["red", "green", "ü", ""][int(rng.integers(0, 4))]
            elif r < 0.5:
                row[key] = int(rng.integers(-5, 6))
            elif r < 0.55:
                row[key] = -0.0
            else:
                row[key] = float(rng.normal() * 10 ** int(rng.integers(-3, 4)))
        rows.append(row)
    return rows


@pytest.mark.parametrize("kind", ["sparse", "hashed"])
def test_fast_equals_checked_loop(kind: str) -> None:
    spec = FeatureSpec.sparse(50) if kind == "sparse" else FeatureSpec.hashed(6)  # collisions
    rng = np.random.default_rng(11)
    for trial in range(300):
        rows = random_rows(rng, kind, int(rng.integers(1, 30)))
        fast = spec._encode_maps_fast(rows, None)
        assert fast is not None, rows
        same(fast, spec._encode_maps_checked(rows, "examples", "x", None))
        same(fast, spec.encode(rows))


def test_hashed_collisions_sum_like_the_loop() -> None:
    spec = FeatureSpec.hashed(1)  # two buckets: almost everything collides
    rows = [{"a": 0.1, "b": 0.2, "c": 0.3, "d": "x", "e": 1e-17}]
    fast = spec._encode_maps_fast(rows, None)
    assert fast is not None
    same(fast, spec._encode_maps_checked(rows, "examples", "x", None))


@pytest.mark.parametrize(
    ("kind", "rows"),
    [
        ("sparse", [{"1": True}]),
        ("sparse", [{"1": None}]),
        ("sparse", [{"1": "3"}]),
        ("sparse", [{"x": 1.0}]),
        ("sparse", [{"50": 1.0}]),
        ("sparse", [{"-1": 1.0}]),
        ("sparse", [{"1": math.nan}]),
        ("sparse", [{"1": math.inf}]),
        ("sparse", [{"1": 10**400}]),
        ("sparse", [{"01": 1.0}]),
        ("sparse", [{" 1": 1.0}]),
        ("sparse", [{True: 1.0}]),
        ("sparse", [[1.0]]),
        ("hashed", [{"a": False}]),
        ("hashed", [{"a": [1]}]),
        ("hashed", [{"a": -math.inf}]),
    ],
)
def test_fast_declines_what_the_loop_must_name(kind: str, rows: list[Any]) -> None:
    spec = FeatureSpec.sparse(50) if kind == "sparse" else FeatureSpec.hashed(8)
    assert spec._encode_maps_fast(rows, None) is None
    with pytest.raises(FeatureError) as e:
        spec.encode(rows)
    assert e.value.location.startswith("examples[")


@pytest.mark.parametrize("kind", ["sparse", "hashed"])
def test_fast_takes_examples_with_no_features(kind: str) -> None:
    spec = FeatureSpec.sparse(50) if kind == "sparse" else FeatureSpec.hashed(8)
    for rows in ([{}], [{}, {}], [{"1": 1.0}, {}, {"2": -1}]):
        fast = spec._encode_maps_fast(rows, None)
        assert fast is not None, rows
        same(fast, spec._encode_maps_checked(rows, "examples", "x", None))


def test_fast_respects_max_features() -> None:
    spec = FeatureSpec.hashed(8)
    rows = [{"a": 1.0, "b": 2.0, "c": 3.0}]
    assert spec._encode_maps_fast(rows, 2) is None
    with pytest.raises(FeatureError, match="exceed the limit"):
        spec.encode(rows, max_features=2)
    assert spec._encode_maps_fast(rows, 3) is not None


def test_index_and_hash_caches_give_fresh_results() -> None:
    """Keys seen before come from the caches; the arrays must not depend on them."""
    spec = FeatureSpec.sparse(1000)
    rows = [{str(k): 1.0 for k in range(0, 1000, 7)}]
    first, second = spec.encode(rows), spec.encode(rows)
    same(first, second)
    assert first.indices.tolist() == list(range(0, 1000, 7))
    h = FeatureSpec.hashed(20)
    same(
        h.encode([{"age": 3, "job": "x"}]),
        h._encode_maps_checked([{"age": 3, "job": "x"}], "e", "x", None),
    )
