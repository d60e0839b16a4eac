"""snapshot(): the state is copied at once, serialised later, unaffected by later updates."""

from __future__ import annotations

import numpy as np
import pytest

from learners.artifact import loads
from learners.features import Batch
from learners.linear import LinearClassifier, make_classifier


def _stream(seed: int, n: int, d: int) -> tuple[Batch, list[str]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.5)
    y = [["a", "b", "c"][i] for i in rng.integers(0, 3, n)]
    return Batch.from_dense(X), y


@pytest.mark.parametrize(
    ("algo", "params"),
    [("arow", {}), ("pa1", {}), ("scw1", {}), ("arow", {"covariance": "full"})],
)
def test_snapshot_is_the_state_at_the_time_of_the_call(algo: str, params: dict) -> None:
    clf = make_classifier(algo, dim=12, params=params)
    X, y = _stream(0, 40, 12)
    clf.update(X, y)
    digest_then, bytes_then = clf.state_digest(), clf.to_bytes()
    dump = clf.snapshot()
    X2, y2 = _stream(1, 40, 12)
    clf.update(X2, y2)  # later updates must not leak into the snapshot
    assert clf.state_digest() != digest_then
    blob = dump()
    restored = LinearClassifier.from_bytes(blob)
    assert restored.state_digest() == digest_then
    a, b = loads(blob), loads(bytes_then)
    assert a.params == b.params
    assert a.arrays.keys() == b.arrays.keys()
    for k in a.arrays:
        assert a.arrays[k].tobytes() == b.arrays[k].tobytes()
