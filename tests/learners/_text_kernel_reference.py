"""The text kernel as it was before issue 22's speed work (commit 583b267): one array per
step, each name built and hashed whole, distinct names by a table made per text. Kept as
the reference the fast kernel (:mod:`learners.records._text_kernel`) must equal bit for bit
(tests/learners/test_records_text_kernel.py)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from learners.records._hash_kernels import grow, murmur3, put_utf8


@numba.njit(cache=True, inline="always")
def _emit(
    tmp: np.ndarray,
    n_bytes: int,
    occ_h: np.ndarray,
    m: int,
    keep: bool,
    ob: np.ndarray,
    oo: np.ndarray,
) -> Any:
    """Record the name ``tmp[:n_bytes]`` as occurrence ``m``; returns (m + 1, ob)."""
    occ_h[m] = murmur3(tmp, 0, n_bytes)
    if keep:
        ob = grow(ob, oo[m] + n_bytes)
        for k in range(n_bytes):
            ob[oo[m] + k] = tmp[k]
        oo[m + 1] = oo[m] + n_bytes
    return m + 1, ob


@numba.njit(cache=True)
def _char_grams(
    pb: np.ndarray,
    po: np.ndarray,
    lp: int,
    cmin: int,
    cmax: int,
    tmp: np.ndarray,
    p0: int,
    occ_h: np.ndarray,
    m: int,
    keep: bool,
    ob: np.ndarray,
    oo: np.ndarray,
) -> Any:
    """The n-grams of the padded sequence whose code point ``k`` is bytes
    ``pb[po[k]:po[k+1]]`` (``lp`` code points); the name prefix is ``tmp[:p0]``."""
    for n in range(cmin, cmax + 1):
        for i in range(max(1, lp - n + 1)):
            a, b = po[i], po[min(i + n, lp)]
            for k in range(b - a):
                tmp[p0 + k] = pb[a + k]
            m, ob = _emit(tmp, p0 + b - a, occ_h, m, keep, ob, oo)
        if lp <= n:
            break
    return m, ob


@numba.njit(cache=True)
def reference_text_features(
    cps: np.ndarray,
    s: int,
    e: int,
    lower_tab: np.ndarray,
    tok_tab: np.ndarray,
    lowercase: bool,
    wn: int,
    skips: int,
    cmin: int,
    cmax: int,
    across: bool,
    wprefix: np.ndarray,
    cprefix: np.ndarray,
    keep: bool,
    max_occ: int,
) -> Any:
    """Distinct features of the text ``cps[s:e]``: (hashes, counts, names, name offsets);
    one hash -1 when the text could give more than ``max_occ`` n-gram occurrences."""
    L = e - s
    t = np.empty(L, dtype=np.int64)
    for i in range(L):
        c = cps[s + i]
        t[i] = lower_tab[c] if lowercase else c
    # tokens and the UTF-8 bytes of the (lower-cased) text, cpo[k] = byte of code point k
    ts = np.empty(L + 1, dtype=np.int64)
    te = np.empty(L + 1, dtype=np.int64)
    nt = 0
    tb = np.empty(4 * L + 1, dtype=np.uint8)
    cpo = np.empty(L + 1, dtype=np.int64)
    pos = 0
    inside = False
    for i in range(L):
        cpo[i] = pos
        pos = put_utf8(tb, pos, t[i])
        if tok_tab[t[i]]:
            if not inside:
                ts[nt] = i
                inside = True
        elif inside:
            te[nt] = i
            nt += 1
            inside = False
    cpo[L] = pos
    if inside:
        te[nt] = L
        nt += 1
    # an upper bound on occurrences, to size the hash array once
    bound = 0
    per_start = 1
    for _n in range(wn):
        bound += nt * per_start
        per_start *= skips + 1
    nc = cmax - cmin + 1 if cmin > 0 else 0
    token_cps = 0
    for k in range(nt):
        token_cps += te[k] - ts[k]
    bound += nc * (token_cps + 3 * nt + 2)
    if bound > max_occ:  # refused before the memory is taken: hash -1 says so
        return np.full(1, -1, dtype=np.int64), np.zeros(1, dtype=np.int64), tb[:0], cpo[:1]
    occ_h = np.empty(bound, dtype=np.int64)
    oo = np.zeros(bound + 1, dtype=np.int64)
    ob = np.empty(64 if keep else 0, dtype=np.uint8)
    m = 0
    pw, pc = wprefix.shape[0], cprefix.shape[0]
    tmp = np.empty(max(pw, pc) + pos + wn + 4 * cmax + 8, dtype=np.uint8)
    # word n-grams: an odometer over the gaps (each 0..skips) after each start token
    if wn > 0:
        tmp[:pw] = wprefix
        idx = np.empty(wn, dtype=np.int64)
        for n in range(1, wn + 1):
            combos = (skips + 1) ** (n - 1)
            for start in range(nt):
                for combo in range(combos):
                    c = combo
                    idx[0] = start
                    ok = True
                    for j in range(1, n):
                        idx[j] = idx[j - 1] + 1 + c % (skips + 1)
                        c //= skips + 1
                        if idx[j] >= nt:
                            ok = False
                            break
                    if not ok:
                        continue
                    q = pw
                    for j in range(n):
                        if j > 0:
                            tmp[q] = 32
                            q += 1
                        for k in range(cpo[ts[idx[j]]], cpo[te[idx[j]]]):
                            tmp[q] = tb[k]
                            q += 1
                    m, ob = _emit(tmp, q, occ_h, m, keep, ob, oo)
    if nc > 0 and nt > 0:
        tmp[:pc] = cprefix
        # padded sequence bytes pb, code point k at pb[po[k]:po[k+1]]
        pb = np.empty(pos + nt + 2, dtype=np.uint8)
        po = np.empty(token_cps + nt + 2, dtype=np.int64)
        first, last = 0, nt
        while first < nt:
            if not across:
                last = first + 1
            lp = 0
            q = 0
            po[0] = 0
            pb[0] = 32
            q = 1
            for k in range(first, last):
                for i in range(ts[k], te[k]):
                    lp += 1
                    po[lp] = q
                    for k in range(cpo[i], cpo[i + 1]):
                        pb[q] = tb[k]
                        q += 1
                lp += 1
                po[lp] = q
                pb[q] = 32
                q += 1
            lp += 1
            po[lp] = q
            m, ob = _char_grams(pb, po, lp, cmin, cmax, tmp, pc, occ_h, m, keep, ob, oo)
            first = last
    return _distinct(occ_h, m, keep, ob, oo)


@numba.njit(cache=True)
def _distinct(occ_h: np.ndarray, m: int, keep: bool, ob: np.ndarray, oo: np.ndarray) -> Any:
    """Distinct hashes of ``occ_h[:m]`` in order of first occurrence, with counts: one
    pass over an open-addressing table (slot -> distinct id), no sort."""
    size = 16
    while size < 2 * m:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    smask = size - 1
    hashes = np.empty(m, dtype=np.int64)
    counts = np.zeros(m, dtype=np.int64)
    firsts = np.empty(m, dtype=np.int64)
    u = 0
    for i in range(m):
        h = occ_h[i]
        s = h & smask  # a MurmurHash3 is already well mixed
        while table[s] >= 0 and hashes[table[s]] != h:
            s = (s + 1) & smask
        if table[s] < 0:
            table[s] = u
            hashes[u] = h
            firsts[u] = i
            u += 1
        counts[table[s]] += 1
    name_off = np.zeros(u + 1, dtype=np.int64)
    for k in range(u):
        o = firsts[k]
        name_off[k + 1] = name_off[k] + (oo[o + 1] - oo[o] if keep else 0)
    names = np.empty(name_off[u], dtype=np.uint8)
    if keep:
        for k in range(u):
            o = firsts[k]
            names[name_off[k] : name_off[k + 1]] = ob[oo[o] : oo[o + 1]]
    return hashes[:u].copy(), counts[:u].copy(), names, name_off
