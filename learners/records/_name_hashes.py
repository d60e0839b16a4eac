"""The full 32-bit MurmurHash3 of each name in a table of names (UTF-8 bytes back to
back, ``offsets[k]:offsets[k + 1]`` the k-th): what :class:`~learners.feature_names.
FeatureNames` keys names by, computed without making a Python string of each.

>>> import numpy as np
>>> from learners.feature_keys import murmurhash3_32
>>> h = span_hashes(np.frombuffer(b"agejob=a", np.uint8), np.array([0, 3, 8]))
>>> h.tolist() == [murmurhash3_32("age"), murmurhash3_32("job=a")]
True
"""

from __future__ import annotations

import numba
import numpy as np

from learners.records._hash_kernels import murmur3


@numba.njit(cache=True)
def span_hashes(utf8: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    n = offsets.shape[0] - 1
    out = np.empty(max(n, 0), dtype=np.int64)
    for k in range(n):
        out[k] = murmur3(utf8, offsets[k], offsets[k + 1])
    return out
