"""Seeded fuzzing of the artifact container and of each batch kind's loader.

Every mutated artifact must either be refused with the loaders' own ArtifactError
(which the service maps to 4xx) or load and then score a small batch without error
and with finite scores. Most mutations reseal the checksum so they reach the loaders.
The cases are deterministic (seeded), so a failure names a case that can be re-run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError
from tests.learners.artifact_tools import (
    KINDS,
    LOADERS,
    reseal,
    scores,
    small_batch,
    split,
    valid_blobs,
)

# Loads are held to a small budget: an accepted mutation cannot make scoring allocate GBs.
MAX_BYTES = 32 << 20
CASES_PER_KIND = 900

NASTY: list[Any] = [
    -1, 0, 1, 2, 3, 7, 255, 2**31, 2**62, -(2**63), 10**30, 1.5, -0.0, 1e308,
    float("nan"), float("inf"), "", "x", "float64", "int8", None, True, [], {}, [1, 2],
    [[[[[[[[]]]]]]]], {"a": {"b": {"c": 1}}},
]  # fmt: skip
NASTY_INT = [-(2**31), -2, -1, 0, 1, 2, 3, 4, 5, 6, 40, 2**31 - 1]
NASTY_FLOAT = [np.nan, np.inf, -np.inf, 1e308, -1e308, 1e-320, 0.0, -0.0, 1e30, 3.0]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside parsed JSON (dict keys and list indices)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def mutate(blob: bytes, rng: np.random.Generator) -> tuple[str, bytes]:
    """One random damage of ``blob`` and its description."""
    header, body = split(blob)
    op = int(rng.integers(7))
    if op == 0:  # a bit flip anywhere, checksum left as is
        b = bytearray(blob)
        i = int(rng.integers(len(b)))
        b[i] ^= 1 << int(rng.integers(8))
        return f"bitflip@{i}", bytes(b)
    if op == 1:  # bytes changed anywhere before the digest, checksum resealed
        b = bytearray(blob[:-32])
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(len(b)))] = int(rng.integers(256))
        if rng.random() < 0.3:  # the prefix (lengths) too: the framing may break
            return "bytes+digest", bytes(b) + hashlib.sha256(b).digest()
        raw_header = bytes(b[22 : len(b) - len(body)])  # 22: the prefix
        return "bytes+reseal", reseal(raw_header, bytes(b[len(b) - len(body) :]))
    if op == 2:  # truncation or trailing bytes
        if rng.random() < 0.5:
            cut = int(rng.integers(len(blob)))
            return f"truncate@{cut}", blob[:cut]
        return "trailing", blob + bytes(rng.integers(256, size=int(rng.integers(1, 40))).tolist())
    if op == 3:  # one header value replaced by a nasty one
        paths = [p for p in _paths(header) if p]
        path = paths[int(rng.integers(len(paths)))]
        value = NASTY[int(rng.integers(len(NASTY)))]
        _set(header, path, value)
        return f"header{list(path)}={value!r}"[:120], reseal(json.dumps(header).encode(), body)
    if op == 4:  # an array entry's dtype or shape changed consistently (nbytes follows)
        e = header["arrays"][int(rng.integers(len(header["arrays"])))]
        dtypes = ["int8", "int32", "int64", "float32", "float64", "uint64", "bool"]
        e["dtype"] = dtypes[int(rng.integers(len(dtypes)))]
        size = np.dtype(e["dtype"]).itemsize
        n = e["nbytes"] // size
        e["shape"] = [n] if rng.random() < 0.7 else [1, n]
        e["nbytes"] = n * size
        return f"retype {e['name']} {e['dtype']}", reseal(json.dumps(header).encode(), body)
    # ops 5, 6: array contents edited (valid container, damaged model)
    art = artifact.loads(blob)
    name = sorted(art.arrays)[int(rng.integers(len(art.arrays)))]
    a = art.arrays[name].copy()
    if a.size == 0:
        return f"empty {name}", blob
    flat = a.reshape(-1)
    for _ in range(int(rng.integers(1, 3))):
        i = int(rng.integers(flat.size))
        if a.dtype.kind == "f":
            with np.errstate(over="ignore"):  # 1e308 into a float32 array is inf
                flat[i] = NASTY_FLOAT[int(rng.integers(len(NASTY_FLOAT)))]
        elif op == 5:
            flat[i] = NASTY_INT[int(rng.integers(len(NASTY_INT)))]
        else:  # a neighbour's value: the subtle structural damage
            flat[i] = flat[int(rng.integers(flat.size))]
    arrays = {**art.arrays, name: a}
    return f"values {name}", artifact.dumps(art.kind, art.params, arrays, art.meta)


def check_case(kind: str, blob: bytes, rng: np.random.Generator) -> str:
    """'refused' or 'loaded'; anything else (another exception, a bad score) fails."""
    try:
        model = LOADERS[kind](blob, max_bytes=MAX_BYTES)
    except ArtifactError:
        return "refused"
    s = scores(kind, model, small_batch(model, rng))
    assert np.all(np.isfinite(s)), f"non-finite scores {s}"
    return "loaded"


def fuzz_cases(kind: str, n: int, seed: int) -> Iterator[tuple[str, bytes]]:
    rng = np.random.default_rng(seed)
    blob = valid_blobs()[kind]
    for _ in range(n):
        yield mutate(blob, rng)


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_loader(kind: str) -> None:
    rng = np.random.default_rng(1)
    outcomes: dict[str, int] = {}
    for i, (what, blob) in enumerate(fuzz_cases(kind, CASES_PER_KIND, seed=KINDS.index(kind))):
        try:
            got = check_case(kind, blob, rng)
        except Exception as e:  # the point: name the case that escaped
            raise AssertionError(f"{kind} case {i} ({what}): {type(e).__name__}: {e}") from e
        outcomes[got] = outcomes.get(got, 0) + 1
    # both outcomes occur: the mutations reach past the checksum and into the model
    assert outcomes.get("refused", 0) > CASES_PER_KIND // 3, outcomes
    assert outcomes.get("loaded", 0) > 10, outcomes


def test_fuzz_container_only() -> None:
    """The container alone, on artifacts of every kind: ArtifactError or a clean read."""
    rng = np.random.default_rng(7)
    loads: Callable[[bytes], Any] = artifact.loads
    for i in range(600):
        kind = KINDS[i % 3]
        what, blob = mutate(valid_blobs()[kind], rng)
        try:
            loads(blob)
        except ArtifactError:
            pass
        except Exception as e:
            raise AssertionError(f"container case {i} ({kind}, {what}): {e!r}") from e
