"""From a wire feature key to a column: :func:`sparse_index` reads a sparse key (an index
in canonical decimal), :func:`murmurhash3_32` hashes a feature name (MurmurHash3 x86
32-bit, seed 0, of its UTF-8 bytes: the same name lands on the same column on every
machine and in every run, which Python's salted ``hash()`` would not give), and their
batch forms :func:`sparse_indices` / :func:`hashed_indices` remember the keys and names
they have seen (vocabularies repeat; a dict lookup is a fraction of the parse).

>>> murmurhash3_32("hello")
613153351
>>> sparse_index("17"), int(hashed_indices(["hello"], 15)[0])
(17, 7)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["hashed_index", "hashed_indices", "murmurhash3_32", "sparse_index", "sparse_indices"]


def murmurhash3_32(data: bytes | str, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data`` (UTF-8 for ``str``), as an unsigned int."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    c1, c2 = 0xCC9E2D51, 0x1B873593
    length = len(data)
    h = seed & 0xFFFFFFFF
    nblocks = length // 4
    for block_start in range(0, nblocks * 4, 4):
        k = int.from_bytes(data[block_start : block_start + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[nblocks * 4 :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


@lru_cache(maxsize=1 << 18)
def hashed_index(name: str, mask: int) -> int:
    # Feature vocabularies are small and repetitive; the cache makes hashing cheap.
    return murmurhash3_32(name) & mask


# index key (a JSON object key is a string) -> sparse_index(key): vocabularies repeat,
# and a dict lookup is a fraction of the parse. Cleared when it grows past the bound.
_INDEX_OF: dict[Any, int] = {}
_INDEX_CACHE_MAX = 1 << 18


def sparse_index(key: Any) -> int:
    """The feature index a sparse key names: an ``int`` (not a bool) as is, or a string
    in canonical decimal (ASCII digits, no sign, space, underscore or leading zero but
    ``"0"``); ``ValueError`` for anything else. Stricter than ``int()``, which reads
    ``" 1"``, ``"+1"``, ``"01"``, ``"1_0"`` and ``"٣"`` as numbers: two spellings of one
    index would be two keys of one JSON object, and a client sending them has a bug."""
    if type(key) is str:
        if key.isascii() and key.isdigit() and (key[0] != "0" or len(key) == 1):
            return int(key)
    elif isinstance(key, int | np.integer) and not isinstance(key, bool):
        return int(key)
    raise ValueError(f"not a canonical feature index: {key!r}")


def sparse_indices(keys: list[Any]) -> np.ndarray:
    """``[sparse_index(k) for k in keys]`` as int64 (raises as it does, or OverflowError)."""
    try:
        return np.fromiter(map(_INDEX_OF.__getitem__, keys), np.int64, count=len(keys))
    except KeyError:  # a new key: parse them all, then remember them
        idx = np.fromiter(map(sparse_index, keys), np.int64, count=len(keys))
    if len(_INDEX_OF) > _INDEX_CACHE_MAX:
        _INDEX_OF.clear()
    # string keys only: an int key would also answer for True and 1.0 (equal, same hash)
    _INDEX_OF.update((k, j) for k, j in zip(keys, idx.tolist(), strict=True) if type(k) is str)
    return idx


# feature name -> its full 32-bit hash (masked per model), as _INDEX_OF: an lru_cache
# call costs ~3x a dict lookup. One table for every model, whatever its bits.
_HASH_OF: dict[str, int] = {}


def hashed_indices(names: list[str], mask: int) -> np.ndarray:
    """``[hashed_index(name, mask) for name in names]`` as int64."""
    try:
        full = np.fromiter(map(_HASH_OF.__getitem__, names), np.int64, count=len(names))
    except KeyError:  # a new name: hash them all, then remember them
        full = np.fromiter(map(murmurhash3_32, names), np.int64, count=len(names))
        if len(_HASH_OF) > _INDEX_CACHE_MAX:
            _HASH_OF.clear()
        _HASH_OF.update(zip(names, full.tolist(), strict=True))
    return full & mask
