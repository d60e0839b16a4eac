"""artifact.dumps_buffer: the same bytes as dumps, written into one numpy buffer."""

from __future__ import annotations

import numpy as np
import pytest

from learners import artifact
from learners.features import Batch
from learners.linear import LinearClassifier, make_classifier


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    w = rng.normal(size=(3, 101, 2))
    return {
        "mu": w[:, :, 0],  # strided views, as a linear snapshot passes them
        "sigma": w[:, :, 1],
        "flags": np.array([True, False, True]),
        "small": np.arange(5, dtype=np.int16),  # 10 bytes: padded to 16
        "big_endian": np.arange(7, dtype=">i4"),
        "fortran": np.asfortranarray(rng.normal(size=(4, 3))),
        "scalar": np.array(np.float32(3.5)),  # 0-d: stored with shape [1]
        "empty": np.zeros((0, 3)),
        "bytes": np.arange(3, dtype=np.uint8),
    }


def test_same_bytes_as_dumps() -> None:
    args = ("demo", {"c": 1.0, "labels": ["+1", 1]}, _arrays(), {"note": "x"})
    blob = artifact.dumps(*args, created_at=12.5)
    buf = artifact.dumps_buffer(*args, created_at=12.5)
    assert isinstance(buf, memoryview) and buf.format == "B" and buf.nbytes == len(blob)
    assert bytes(buf) == blob
    art = artifact.loads(buf)
    for name, a in _arrays().items():
        got = art.arrays[name]
        assert got.dtype == a.dtype.newbyteorder("=")
        assert np.array_equal(got, np.asarray(a).reshape(got.shape))


def test_corruption_is_detected() -> None:
    buf = artifact.dumps_buffer("demo", {}, {"w": np.arange(64.0)})
    bad = bytearray(buf)
    bad[len(bad) // 2] ^= 1
    with pytest.raises(artifact.ArtifactError, match="checksum"):
        artifact.loads(bytes(bad))


def test_refuses_what_dumps_refuses() -> None:
    with pytest.raises(artifact.ArtifactError, match="dtype"):
        artifact.dumps_buffer("demo", {}, {"s": np.array(["a"])})
    with pytest.raises(artifact.ArtifactError, match="JSON"):
        artifact.dumps_buffer("demo", {"c": float("nan")}, {})


@pytest.mark.parametrize(
    ("algo", "params"), [("arow", {}), ("pa", {}), ("scw2", {}), ("arow", {"covariance": "full"})]
)
def test_linear_snapshot_is_to_bytes(
    algo: str, params: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(artifact.time, "time", lambda: 1234.0)  # same created_at
    clf = make_classifier(algo, dim=16, params=params)
    rng = np.random.default_rng(0)
    clf.update(Batch.from_dense(rng.normal(size=(30, 16))), rng.integers(0, 3, 30).tolist())
    blob = clf.snapshot()()
    assert bytes(blob) == clf.to_bytes()
    assert LinearClassifier.from_bytes(blob).state_digest() == clf.state_digest()
