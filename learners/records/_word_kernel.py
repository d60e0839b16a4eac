"""numba kernel of a text's word n-grams (:func:`_words`), the part of
:func:`learners.records._text_kernel.text_features` after the tokens: n = 1..``wn``,
tokens ``i0 < i1 < ...`` with at most ``skips`` tokens left out between neighbours,
named ``<field>^`` + the tokens joined by one space, each hashed as a stream of its
pieces (a word n-gram continues from the state after its first token, shared with that
token's unigram) and counted per distinct name in the documented order.

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the row kernel, which calls this.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from learners._numba_calls import called
from learners.records._borrow import borrowed
from learners.records._hash_kernels import feed, feed_span, finish, take
from learners.records._text_scratch import (
    _CPO,
    _GRAM,
    _IDX,
    _SCN,
    _SH,
    _SK,
    _TE,
    _TS,
    NOFF,
    _count,
    _put,
)


@numba.njit(cache=True, inline="always")
def _put_words(
    names: np.ndarray,
    at: int,
    pre: np.ndarray,
    p0: int,
    p1: int,
    tb: np.ndarray,
    si: np.ndarray,
    n: int,
) -> int:
    """Write the name of the word n-gram of tokens ``si[_IDX, :n]`` at ``names[at:]``;
    returns the end, or minus the length ``names`` needs when it is short (nothing
    written)."""
    need = at + p1 - p0 + n - 1
    for j in range(n):
        t = si[_IDX, j]
        need += si[_CPO, si[_TE, t]] - si[_CPO, si[_TS, t]]
    if need > names.shape[0]:
        return -need
    q = _put(names, at, pre, p0, p1)
    for j in range(n):
        if j > 0:
            names[q] = 32
            q += 1
        t = si[_IDX, j]
        q = _put(names, q, tb, si[_CPO, si[_TS, t]], si[_CPO, si[_TE, t]])
    return q


@called  # (once a text, from text_features)
def _words(
    tb: np.ndarray,
    si: np.ndarray,
    nt: int,
    wn: int,
    skips: int,
    pre: np.ndarray,
    p0: int,
    p1: int,
    keep: bool,
    so: np.ndarray,
    table: np.ndarray,
    smask: int,
    names: np.ndarray,
) -> int:
    """Word n-grams, n = 1..wn; an odometer over the gaps (each 0..skips) after each
    start. Returns the distinct count, or minus the length ``names`` needs."""
    # (borrowed, as in text_features: the inlined helpers' copies count no references)
    tb, si, pre, so = borrowed(tb), borrowed(si), borrowed(pre), borrowed(so)
    table, names = borrowed(table), borrowed(names)
    pw = p1 - p0
    h0, k0, c0 = feed_span(np.uint64(0), np.uint64(0), 0, pre, p0, p1)
    if (wn == 1 or (wn == 2 and skips == 0)) and not keep:
        return _words_and_pairs(tb, si, nt, wn == 2, pw, h0, k0, c0, so, table, smask)
    u = 0
    # (rows of si as views, unsigned indexes: no wraparound tests; see text_features)
    cpo, ts, te = si[_CPO], si[_TS], si[_TE]
    sh, sk, scn = si[_SH], si[_SK], si[_SCN]
    for t in range(nt):  # unigrams; each token's state kept for the longer n-grams
        ut = np.uint64(t)
        a, z = cpo[ts[ut]], cpo[te[ut]]
        h, k, cn = feed_span(h0, k0, c0, tb, a, z)
        sh[ut], sk[ut], scn[ut] = h, k, cn
        if _count(finish(h, k, cn, pw + z - a), so, table, smask, u) == u:
            if keep:
                si[_IDX, 0] = t
                q = _put_words(names, so[NOFF, u], pre, p0, p1, tb, si, 1)
                if q < 0:
                    return q
                so[NOFF, u + 1] = q
            u += 1
    if skips == 0 and not keep:  # contiguous n-grams (wn >= 3: 1 and 2 were made by
        # _words_and_pairs), no names: no odometer, the tokens' byte ranges and states
        # read straight from their rows
        for n in range(2, min(wn, nt) + 1):
            for start in range(nt - n + 1):
                st = np.uint64(start)
                h, k, cn = np.uint64(sh[st]), np.uint64(sk[st]), scn[st]
                length = pw + cpo[te[st]] - cpo[ts[st]]
                for t in range(start + 1, start + n):
                    ut = np.uint64(t)
                    a, z = cpo[ts[ut]], cpo[te[ut]]
                    h, k, cn = feed(h, k, cn, 32)
                    h, k, cn = feed_span(h, k, cn, tb, a, z)
                    length += 1 + z - a
                if _count(finish(h, k, cn, length), so, table, smask, u) == u:
                    u += 1
        return u
    for n in range(2, wn + 1):
        if n > nt:  # no n tokens (and si[_IDX] holds at most nt)
            break
        combos = 1  # (skips + 1) ** (n - 1): ``**`` is a call, which keeps reference counts
        for _j in range(n - 1):
            combos *= skips + 1
        for start in range(nt):
            for combo in range(combos):
                c = combo
                si[_IDX, 0] = start
                ok = True
                for j in range(1, n):
                    if skips == 0:  # contiguous: no division
                        si[_IDX, j] = si[_IDX, j - 1] + 1
                    else:
                        si[_IDX, j] = si[_IDX, j - 1] + 1 + c % (skips + 1)
                        c //= skips + 1
                    if si[_IDX, j] >= nt:
                        ok = False
                        break
                if not ok:
                    continue
                h, k, cn = np.uint64(si[_SH, start]), np.uint64(si[_SK, start]), si[_SCN, start]
                length = pw + si[_CPO, si[_TE, start]] - si[_CPO, si[_TS, start]]
                for j in range(1, n):
                    t = si[_IDX, j]
                    h, k, cn = feed(h, k, cn, 32)
                    a, z = si[_CPO, si[_TS, t]], si[_CPO, si[_TE, t]]
                    h, k, cn = feed_span(h, k, cn, tb, a, z)
                    length += 1 + z - a
                if _count(finish(h, k, cn, length), so, table, smask, u) == u:
                    if keep:
                        q = _put_words(names, so[NOFF, u], pre, p0, p1, tb, si, n)
                        if q < 0:
                            return q
                        so[NOFF, u + 1] = q
                    u += 1
    return u


@called  # (once a text, from _words)
def _words_and_pairs(
    tb: np.ndarray,
    si: np.ndarray,
    nt: int,
    pairs: bool,
    pw: int,
    h0: int,
    k0: int,
    c0: int,
    so: np.ndarray,
    table: np.ndarray,
    smask: int,
) -> int:
    """:func:`_words` of words (``wn`` 1) or words and contiguous pairs (``pairs``: ``wn``
    2, no skips), without names: each token's unigram and its pair with the token before
    hashed in one loop turn, then all counted in the documented order (unigrams, then
    pairs). Why: a streamed MurmurHash3 is one long chain of dependent multiplies; the
    count's probe branches between them kept the core from overlapping one token's chain
    with the next, and two independent chains a turn keep it busy while either waits
    (issue 22: SMS words 1-2). A pair's space is fed with the first bytes of its second
    token (:func:`_space_span`)."""
    tb, si, so, table = borrowed(tb), borrowed(si), borrowed(so), borrowed(table)  # (as _words)
    cpo, ts, te = si[_CPO], si[_TS], si[_TE]
    gram = so[_GRAM]  # (so's rows hold the occurrence bound + 1: 2 nt + 1 for pairs)
    ph, pk, pcn, plen = np.uint64(0), np.uint64(0), 0, 0
    for t in range(nt):
        ut = np.uint64(t)
        a, z = cpo[ts[ut]], cpo[te[ut]]
        h, k, cn = feed_span(h0, k0, c0, tb, a, z)
        length = pw + z - a
        gram[ut] = finish(h, k, cn, length)
        if pairs and t > 0:
            bh, bk, bcn = _space_span(ph, pk, pcn, tb, a, z)
            gram[np.uint64(nt + t - 1)] = finish(bh, bk, bcn, plen + 1 + z - a)
        ph, pk, pcn, plen = h, k, cn, length
    u = 0
    for i in range(max(0, 2 * nt - 1) if pairs else nt):
        if _count(gram[np.uint64(i)], so, table, smask, u) == u:
            u += 1
    return u


@numba.njit(cache=True, inline="always")
def _space_span(h: Any, k: Any, cn: int, buf: np.ndarray, a: int, z: int) -> Any:
    """``feed(32)`` then ``feed_span(buf[a:z])`` (``a < z``), the space and up to three
    of the span's bytes in one step."""
    r = min(4, 1 + z - a)
    w = np.uint64(32)
    for i in range(r - 1):  # (at most 3 loads; unrolled by LLVM)
        w |= np.uint64(buf[np.uint64(a + i)]) << np.uint64(8 * (i + 1))
    h, k, cn = take(h, k, cn, w, r)
    return feed_span(h, k, cn, buf, a + r - 1, z)
