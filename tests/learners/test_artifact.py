"""The artifact container: round trip, and every kind of damage refused clearly."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError, dumps, loads


def _sample() -> bytes:
    arrays = {
        "w": np.arange(12, dtype=np.float64).reshape(3, 4),
        "idx": np.array([1, 5, 9], dtype=np.int32),
        "flags": np.array([True, False]),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    return dumps("demo", {"labels": ["+1", 1, "-1"], "c": 0.5}, arrays, {"note": "x"})


def test_round_trip_keeps_arrays_and_json_types() -> None:
    art = loads(_sample())
    assert art.kind == "demo" and art.format_version == artifact.FORMAT_VERSION
    assert art.params["labels"] == ["+1", 1, "-1"]  # str and int labels stay distinct
    assert art.meta == {"note": "x"}
    assert art.arrays["w"].dtype == np.float64 and art.arrays["w"].shape == (3, 4)
    assert np.array_equal(art.arrays["w"], np.arange(12.0).reshape(3, 4))
    assert art.arrays["idx"].dtype == np.int32 and art.arrays["idx"].tolist() == [1, 5, 9]
    assert art.arrays["flags"].tolist() == [True, False]
    assert art.arrays["empty"].shape == (0, 3)
    art.arrays["w"][0, 0] = 99.0  # loaded arrays are writable copies


def test_same_content_same_bytes() -> None:
    a = dumps("k", {"a": 1}, {"x": np.ones(3)}, created_at=1.0)
    b = dumps("k", {"a": 1}, {"x": np.ones(3)}, created_at=1.0)
    assert a == b


def test_wrong_magic() -> None:
    blob = bytearray(_sample())
    blob[0:8] = b"PK\x03\x04xxxx"
    with pytest.raises(ArtifactError, match="wrong magic"):
        loads(bytes(blob))


def test_unknown_version() -> None:
    blob = bytearray(_sample())
    struct.pack_into("<H", blob, 8, 99)
    with pytest.raises(ArtifactError, match="unsupported artifact format version 99"):
        loads(bytes(blob))


@pytest.mark.parametrize("cut", [0, 5, 30, 200, -1])
def test_truncated(cut: int) -> None:
    blob = _sample()
    with pytest.raises(ArtifactError, match="truncated"):
        loads(blob[:cut])


def test_flipped_byte_fails_checksum() -> None:
    blob = bytearray(_sample())
    blob[-40] ^= 0xFF
    with pytest.raises(ArtifactError, match="checksum"):
        loads(bytes(blob))


def test_trailing_bytes_refused() -> None:
    with pytest.raises(ArtifactError, match="trailing"):
        loads(_sample() + b"\x00")


def test_pickle_bytes_refused() -> None:
    import pickle

    with pytest.raises(ArtifactError):
        loads(pickle.dumps({"w": [1, 2, 3]}))


def test_object_arrays_refused() -> None:
    with pytest.raises(ArtifactError, match="unsupported dtype"):
        dumps("k", {}, {"o": np.array([object()], dtype=object)})


def test_expected_kind() -> None:
    with pytest.raises(ArtifactError, match="expected 'lambdamart'"):
        loads(_sample(), expected_kind="lambdamart")


def test_save_and_load_file(tmp_path) -> None:
    p = tmp_path / "m.lsart"
    artifact.save(p, _sample())
    assert artifact.load(p).kind == "demo"
    assert not list(tmp_path.glob("*.tmp"))
