"""The text kernels' scratch (:mod:`learners.records._text_kernel`,
:mod:`learners.records._word_kernel`): the rows of its arrays, their sizes, and the
open-addressing table that counts a text's distinct names. The caller owns the arrays,
made once per batch for its longest text (:func:`text_room`, :func:`occ_room` of
:func:`occ_cap`): no array is allocated per text.

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the row kernel, which inlines this.
"""

from __future__ import annotations

import numba
import numpy as np

from learners._numba_calls import called

# rows of the int64 scratch ``si`` (``text_room``): per code point, per token, per n-gram
_CPO, _TS, _TE, _SH, _SK, _SCN, _IDX, _PO = range(8)
# rows of the occurrence scratch ``so`` (``occ_room``): distinct hashes, counts, name
# offsets, the character n-grams' hashes of one padded sequence
HASH, COUNT, NOFF, _GRAM = range(4)
# the count table's slots per possible occurrence (a power of two): at most a quarter of
# it full, so a new name's probe mostly finds its first slot free (at half full, SMS's
# probes went on past a taken slot often enough to cost ~2 % of a message); it is
# cleared after each text, ~1 KB for a 16-word message
SPREAD = 4


@called  # (one copy: encode_rows's first size is typed as the literal 0)
def text_room(length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fresh scratch for texts of up to ``length`` code points: (si, tb, pb): ``tb`` for
    the text's UTF-8 bytes, ``pb`` for a padded sequence's."""
    return (np.empty((8, 2 * length + 2), np.int64), np.empty(5 * length + 8, np.uint8),
            np.empty(5 * length + 8, np.uint8))  # fmt: skip


@numba.njit(cache=True)
def occ_cap(length: int, wn: int, skips: int, cmin: int, cmax: int, max_occ: int) -> int:
    """An upper bound of :func:`text_features`' occurrence bound for a text of ``length``
    code points (tokens at most every other code point), or ``max_occ`` if less (a text
    over ``max_occ`` is refused before the scratch is used)."""
    most = (length + 1) // 2
    bound = 0
    per_start = 1
    for _n in range(wn):
        bound += most * per_start
        if bound >= max_occ:
            return max_occ
        per_start *= skips + 1
    nc = cmax - cmin + 1 if cmin > 0 else 0
    return min(max_occ, bound + nc * (length + 3 * most + 2))


@called  # (one copy: encode_rows's first size is typed as the literal 0)
def occ_room(bound: int) -> tuple[np.ndarray, np.ndarray]:
    """Fresh occurrence scratch for up to ``bound`` n-gram occurrences: (so, table)."""
    size = 16
    while size < SPREAD * bound:
        size *= 2
    return np.empty((4, bound + 1), np.int64), np.full(size, -1, np.int64)


@numba.njit(cache=True, inline="always")
def _count(h: int, so: np.ndarray, table: np.ndarray, smask: int, u: int) -> int:
    """Count hash ``h``; returns its distinct id (``u`` when it is new: the caller adds it)."""
    s = h & smask  # a MurmurHash3 is already well mixed
    while True:
        d = table[np.uint64(s)]
        if d < 0:
            table[s] = u
            so[HASH, u] = h
            so[COUNT, u] = 1
            return u
        if so[HASH, d] == h:
            so[COUNT, d] += 1
            return d
        s = (s + 1) & smask


@numba.njit(cache=True, inline="always")
def _put(names: np.ndarray, q: int, src: np.ndarray, a: int, b: int) -> int:
    """Copy ``src[a:b]`` to ``names[q:]`` (room checked by the caller); the end."""
    for i in range(a, b):
        names[q] = src[i]
        q += 1
    return q
