"""Two pieces of the records row kernel (:mod:`learners.records._row_kernel`): the hashes of
the named features' strings, made once per batch before the rows, and a row's features
in canonical form (columns ascending, a repeated column summed in generation order).

numba keys a kernel's on-disk cache on the kernel's own source file: after a change here,
touch ``_row_kernel.py`` (or clear ``learners/records/__pycache__``) so it is recompiled.
"""

from __future__ import annotations

import numba
import numpy as np

from learners.records._hash_kernels import murmur3, put_utf8


@numba.njit(cache=True)
def _hash_named(
    n_atoms: int,
    a_field: np.ndarray,
    a_sidx: np.ndarray,
    s_off: np.ndarray,
    cps: np.ndarray,
    f_text: np.ndarray,
    f_ns: np.ndarray,
    keep_ns: np.ndarray,
    f_pre: np.ndarray,
    prefixes: np.ndarray,
    sid_hash: np.ndarray,
) -> None:
    """``sid_hash[sid]``: MurmurHash3 of the name (field prefix + string) of each named
    atom's string whose name the interactions do not need, each string once."""
    hb = np.empty(64, dtype=np.uint8)
    for k in range(n_atoms):
        f = a_field[k]
        sid = a_sidx[k]
        if f_text[f] >= 0 or keep_ns[f_ns[f]] or sid_hash[sid] >= 0:
            continue
        s, e = s_off[sid], s_off[sid + 1]
        p0, p1 = f_pre[f, 0], f_pre[f, 1]
        if p1 - p0 + 4 * (e - s) > hb.shape[0]:
            hb = np.empty(2 * (p1 - p0 + 4 * (e - s)), dtype=np.uint8)
        q = 0
        for i in range(p0, p1):
            hb[q] = prefixes[i]
            q += 1
        for i in range(s, e):
            q = put_utf8(hb, q, cps[i])
        sid_hash[sid] = murmur3(hb, 0, q)


@numba.njit(cache=True)
def _canonical(
    fh: np.ndarray,
    fv: np.ndarray,
    nf: int,
    mask: int,
    out_c: np.ndarray,
    out_v: np.ndarray,
    at: int,
    order: np.ndarray,
) -> int:
    """Write the row's columns ascending from ``at``, summing repeats (stable order);
    returns how many were written. ``order`` is scratch of at least ``2 * nf``."""
    if nf <= 32:  # a stable insertion sort of (column, index): small rows are the common case
        cs = order[nf:]  # the columns, moved with their indices
        for k in range(nf):
            c = fh[k] & mask
            j = k - 1
            while j >= 0 and cs[j] > c:
                order[j + 1] = order[j]
                cs[j + 1] = cs[j]
                j -= 1
            order[j + 1] = k
            cs[j + 1] = c
        w = at - 1
        for k in range(nf):
            c = cs[k]
            if w >= at and out_c[w] == c:
                out_v[w] += fv[order[k]]
            else:
                w += 1
                out_c[w] = c
                out_v[w] = fv[order[k]]
        return w + 1 - at
    # (column, index) packed in one int64 (column < 2**32, index < 2**24: nf is at most
    # max_features_per_record + 1 <= 10**6 + 1): the keys are distinct, so sorting them in
    # place (no allocation) gives exactly the stable order by column
    keys = order[:nf]
    for k in range(nf):
        keys[k] = ((fh[k] & mask) << 24) | k
    keys.sort()
    w = at - 1
    for k in range(nf):
        i = keys[k] & 0xFFFFFF
        c = keys[k] >> 24
        if w >= at and out_c[w] == c:
            out_v[w] += fv[i]
        else:
            w += 1
            out_c[w] = c
            out_v[w] = fv[i]
    return w + 1 - at
