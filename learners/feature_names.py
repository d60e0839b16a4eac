"""Which names a hashed model has seen: a bounded map from hashes to feature names.

A hashed model (``FeatureSpec.hashed``) keeps only ``2**bits`` weights; the names
that produced them are gone. :class:`FeatureNames` remembers them, as Vowpal
Wabbit's ``--invert_hash`` and Jubatus' weight dumps do, so that a weight can be
shown as ``"age"`` rather than ``index 123456``, and an index that several names
share (a hash collision) lists all of them.

Names are kept with their full 32-bit MurmurHash3 (the hash ``FeatureSpec`` masks
to ``bits``), so one map serves any ``bits``; at most ``limit`` of them, the first
ones recorded (deterministic: the same names in the same order give the same map).
Two names with the same full 32-bit hash (about one pair among 100k names) are
one entry: the first one recorded.

>>> names = FeatureNames(limit=10)
>>> names.add(["age", "job=clerk", "age"])
2
>>> i = FeatureSpec.hashed(20).encode([{"age": 1.0}]).indices[0]
>>> names.names_at([i], bits=20) == {i: ["age"]}
True
>>> names.by_index(bits=1)  # 2 dimensions: both names on index 1, a collision
{1: ['age', 'job=clerk']}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from learners import _names_kernels as K
from learners.feature_keys import hashed_indices
from learners.features import FeatureSpec

__all__ = ["MAX_FEATURE_NAMES", "FeatureNames", "names_of_rows"]

# The most names a map can hold (what a loader accepts): 2**20 names of ~20 bytes
# are ~40 MB with their Python objects.
MAX_FEATURE_NAMES = 1 << 20
_FULL = 0xFFFFFFFF
ARRAYS = ("feature_names_hash", "feature_names_offsets", "feature_names_utf8")


def names_of_rows(rows: Iterable[Any]) -> list[str]:
    """The feature names of ``{name: value}`` rows as ``FeatureSpec.hashed`` hashes
    them: ``name`` for a number, ``"name=value"`` for a string value; in order,
    repeats included. Rows that are not mappings are skipped (the encoder refuses them)."""
    maps = [r for r in rows if isinstance(r, Mapping)]
    if not any(type(v) is str for v in chain.from_iterable(m.values() for m in maps)):
        return list(map(str, chain.from_iterable(maps)))
    return [f"{k}={v}" if type(v) is str else str(k) for m in maps for k, v in m.items()]


class FeatureNames:
    """A bounded, insertion-ordered map ``name -> 32-bit hash`` with a fast
    "which of these hashes are new" test (:meth:`unknown_hashes`)."""

    def __init__(self, limit: int = 100_000) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit: must be a non-negative integer, got {limit!r}")
        self.limit = min(limit, MAX_FEATURE_NAMES)
        self._hash: dict[str, int] = {}
        self._table = np.full(64, K.EMPTY, dtype=np.int64)
        self._arrays: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._hash)

    def __contains__(self, name: object) -> bool:
        return name in self._hash

    @property
    def full(self) -> bool:
        return len(self._hash) >= self.limit

    def names(self) -> list[str]:
        """Every recorded name, in the order recorded."""
        return list(self._hash)

    # ------------------------------------------------------------------ recording

    def add(self, names: Iterable[str]) -> int:
        """Record the names not known yet, in order, while under ``limit``; returns
        how many were added."""
        new = self.unknown(names)
        if not new:
            return 0
        room = self.limit - len(self._hash)
        new = new[: max(room, 0)]
        hashes = hashed_indices(new, _FULL)
        for name, h in zip(new, hashes.tolist(), strict=True):
            self._hash[name] = h
        if 2 * len(self._hash) > self._table.shape[0]:
            self._rehash()
        else:
            K.insert_all(self._table, hashes)
        self._arrays = None
        return len(new)

    def add_hashed(self, names: Sequence[str], hashes: Sequence[int]) -> int:
        """:meth:`add` of names whose column is not their own hash (a decision model's
        crossed features, :mod:`service.models.decision_names`): each name with the
        32-bit value its index is masked from (``hashes[i] & (2**bits - 1)``)."""
        room = self.limit - len(self._hash)
        known = self._hash
        new: dict[str, int] = {}
        for name, h in zip(names, hashes, strict=True):
            if len(new) >= room:
                break
            if name not in known and name not in new:
                new[name] = int(h) & _FULL
        if not new:
            return 0
        known.update(new)
        if 2 * len(known) > self._table.shape[0]:
            self._rehash()
        else:
            K.insert_all(self._table, np.fromiter(new.values(), np.int64, len(new)))
        self._arrays = None
        return len(new)

    def unknown(self, names: Iterable[str]) -> list[str]:
        """The names not recorded, each once, in first-seen order."""
        known = self._hash
        return [n for n in dict.fromkeys(names) if n not in known]

    def unknown_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """The distinct 32-bit hashes (int64) of ``hashes`` that no recorded name has."""
        return K.unknown(self._table, np.ascontiguousarray(hashes, dtype=np.int64))

    def _rehash(self) -> None:
        size = self._table.shape[0]
        while size < 2 * len(self._hash):
            size *= 2
        table = np.full(size, K.EMPTY, dtype=np.int64)
        K.insert_all(table, np.fromiter(self._hash.values(), np.int64, len(self._hash)))
        self._table = table  # one assignment: a concurrent reader sees old or new

    # ------------------------------------------------------------------ queries

    def index_of(self, name: str, bits: int) -> int:
        return int(hashed_indices([name], (1 << bits) - 1)[0])

    def by_index(self, bits: int) -> dict[int, list[str]]:
        """Every recorded name under its index for ``2**bits`` dimensions."""
        return self.names_at(None, bits)

    def names_at(
        self, indices: Sequence[int] | np.ndarray | None, bits: int
    ) -> dict[int, list[str]]:
        """The recorded names of each of ``indices`` (all indices when None) for a
        model of ``2**bits`` dimensions; several names on one index are a collision.
        Indices without a recorded name are absent."""
        if not self._hash:
            return {}
        names = list(self._hash)
        idx = np.fromiter(self._hash.values(), np.int64, len(names)) & ((1 << bits) - 1)
        if indices is not None:
            sel = np.flatnonzero(np.isin(idx, np.asarray(indices, dtype=np.int64)))
        else:
            sel = np.arange(len(names))
        out: dict[int, list[str]] = {}
        for j in sel.tolist():
            out.setdefault(int(idx[j]), []).append(names[j])
        return out

    # ------------------------------------------------------------------ artifact form

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for an artifact (cached until the next :meth:`add`)."""
        if self._arrays is None:
            encoded = [n.encode("utf-8") for n in self._hash]
            offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
            np.cumsum([len(e) for e in encoded], out=offsets[1:])
            self._arrays = {
                "feature_names_hash": np.fromiter(self._hash.values(), np.uint32, len(encoded)),
                "feature_names_offsets": offsets,
                "feature_names_utf8": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            }
        return self._arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], limit: int) -> FeatureNames:
        """Read :meth:`to_arrays`' form; ``ValueError`` naming what is inconsistent."""
        h, off, raw = (np.asarray(arrays[k]) for k in ARRAYS)
        n = h.shape[0] if h.ndim == 1 else -1
        if n < 0 or off.ndim != 1 or raw.ndim != 1 or off.shape[0] != n + 1:
            raise ValueError("feature names: arrays have inconsistent shapes")
        if h.dtype != np.uint32 or off.dtype != np.int64 or raw.dtype != np.uint8:
            raise ValueError("feature names: arrays have the wrong dtypes")
        if n > MAX_FEATURE_NAMES:
            raise ValueError(f"feature names: {n} names, more than {MAX_FEATURE_NAMES}")
        if off[0] != 0 or off[-1] != raw.shape[0] or np.any(np.diff(off) < 0):
            raise ValueError("feature names: offsets do not cut the names' bytes")
        data = raw.tobytes()
        try:
            names = [
                data[a:b].decode("utf-8")
                for a, b in zip(off[:-1].tolist(), off[1:].tolist(), strict=True)
            ]
        except UnicodeDecodeError:
            raise ValueError("feature names: a name is not valid UTF-8") from None
        if len(set(names)) != n:
            raise ValueError("feature names: a name appears twice")
        out = cls(max(limit, n))
        out._hash = dict(zip(names, h.astype(np.int64).tolist(), strict=True))
        out._rehash()
        return out


def artifact_extras(
    features: FeatureSpec | None, names: FeatureNames | None
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What a learner adds to its artifact: ``meta["features"]`` (the spec's config)
    and the names' arrays (plus ``meta["feature_names_limit"]``)."""
    meta: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    if features is not None:
        meta["features"] = features.to_config()
    if names is not None:
        meta["feature_names_limit"] = names.limit
        arrays.update(names.to_arrays())
    return meta, arrays


def read_extras(
    meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], dim: int
) -> tuple[FeatureSpec | None, FeatureNames | None]:
    """The spec and names an artifact carries (``ValueError`` if inconsistent)."""
    spec = None
    cfg = meta.get("features")
    if cfg is not None:
        if not isinstance(cfg, dict):
            raise ValueError(f"meta.features must be an object, got {type(cfg).__name__}")
        spec = FeatureSpec.from_config(cfg)
        if spec.dim != dim:
            raise ValueError(f"meta.features has dimension {spec.dim}, the model {dim}")
    names = None
    present = [k in arrays for k in ARRAYS]
    if any(present):
        if not all(present):
            raise ValueError("feature names: some of their arrays are missing")
        limit = meta.get("feature_names_limit", MAX_FEATURE_NAMES)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"meta.feature_names_limit must be an integer >= 0, got {limit!r}")
        names = FeatureNames.from_arrays(arrays, min(limit, MAX_FEATURE_NAMES))
    return spec, names
