"""numba kernels of :mod:`learners.feature_names`: a set of 32-bit feature hashes.

The set is an open-addressing table (``int64``, a power of two in size, ``-1`` for
an empty slot; a hash is in ``[0, 2**32)``), kept at most half full by its owner.
Asking which hashes of a batch are unknown is one pass over the batch (no Python
per feature): what keeps recording names cheap on the service's fast path.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

EMPTY = -1
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_U32 = np.uint64(32)


@numba.njit(cache=True)
def _slot(h: int, mask: int) -> Any:
    return np.int64(((np.uint64(h) * _GOLD) >> _U32) & np.uint64(mask))


@numba.njit(cache=True)
def insert(table: np.ndarray, h: Any) -> bool:
    """Add ``h``; False when it was there already."""
    mask: Any = np.int64(table.shape[0] - 1)
    s = _slot(h, mask)
    while table[s] != EMPTY:
        if table[s] == h:
            return False
        s = (s + 1) & mask
    table[s] = h
    return True


@numba.njit(cache=True)
def insert_all(table: np.ndarray, hashes: np.ndarray) -> None:
    for i in range(hashes.shape[0]):
        insert(table, hashes[i])


@numba.njit(cache=True)
def unknown(table: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """The hashes of ``hashes`` not in the table, each once, in first-seen order."""
    mask: Any = np.int64(table.shape[0] - 1)
    out = np.empty(hashes.shape[0], dtype=np.int64)
    n = 0
    seen = np.full(16, EMPTY, dtype=np.int64)  # the unknown ones so far (grows)
    for i in range(hashes.shape[0]):
        h = hashes[i]
        s = _slot(h, mask)
        found = False
        while table[s] != EMPTY:
            if table[s] == h:
                found = True
                break
            s = (s + 1) & mask
        if found:
            continue
        if 2 * (n + 1) > seen.shape[0]:
            bigger = np.full(2 * seen.shape[0], EMPTY, dtype=np.int64)
            for j in range(n):
                insert(bigger, out[j])
            seen = bigger
        if insert(seen, h):
            out[n] = h
            n += 1
    return out[:n].copy()
