"""numba kernel of one text value: tokens, word n-grams (with skips) and character
n-grams, each hashed by its feature name, counted per distinct name.

The text arrives as code points (``uint32``); names are UTF-8 bytes hashed with
MurmurHash3 (:mod:`learners.records._hash_kernels`). The rules (also in
:mod:`learners.records`):

- lower-case each code point first when asked (``_unicode.lower_table``);
- a token is a maximal run of token characters (``_unicode.token_chars``);
- word n-grams, n = 1..``wn``: tokens ``i0 < i1 < ...`` with at most ``skips`` tokens
  left out between neighbours, named ``<field>^`` + the tokens joined by one space
  (an n-gram skipping a token and an adjacent one of the same words are one feature);
- character n-grams, n = ``cmin``..``cmax`` code points, of each token padded with one
  space each side (``" word "``), or with ``across`` of all tokens joined by one space
  and padded (``" two words "``), named ``<field>~`` + the n-gram; a padded sequence no
  longer than n gives itself once (as scikit-learn's ``char_wb``).

Occurrences of one name are counted; distinct names come out in order of first
occurrence with their full 32-bit hash and count (and their UTF-8 names if asked).

Speed (issue 22: as fast as Vowpal Wabbit's parser): no array is allocated per text.
The caller owns the scratch arrays, made once per batch for its longest text
(:func:`text_room`, :func:`occ_room` of :func:`occ_cap`). A name is hashed as a
stream of its pieces (prefix, tokens, spaces) without building its bytes; a word
n-gram continues from the state after its first token (shared with that token's
unigram), a character n-gram from the state after its shorter one at the same start
(n-grams of one start are hashed together, kept, then counted in the documented
order). Distinct names are counted as they come, in an open-addressing table on the
hash that is cleared after the text.
"""

from __future__ import annotations

import numba
import numpy as np

from learners._numba_calls import called
from learners.records._borrow import borrowed
from learners.records._hash_kernels import feed_span, finish, put_utf8
from learners.records._text_scratch import (  # (the scratch's layout, re-exported)
    _CPO,
    _GRAM,
    _PO,
    _TE,
    _TS,
    COUNT,
    HASH,
    NOFF,
    SPREAD,
    _count,
    _put,
    occ_cap,
    occ_room,
    text_room,
)
from learners.records._word_kernel import _words

__all__ = [
    "COUNT",
    "HASH",
    "NOFF",
    "ascii_table",
    "occ_cap",
    "occ_room",
    "text_features",
    "text_room",
]


@numba.njit(cache=True, inline="always")
def _put_chars(
    names: np.ndarray, at: int, pre: np.ndarray, p0: int, p1: int, pb: np.ndarray, a: int, b: int
) -> int:
    """As :func:`_put_words`, for the character n-gram ``pb[a:b]``."""
    need = at + p1 - p0 + b - a
    if need > names.shape[0]:
        return -need
    return _put(names, _put(names, at, pre, p0, p1), pb, a, b)


@numba.njit(cache=True)
def ascii_table(lower_tab: np.ndarray, tok_tab: np.ndarray) -> np.ndarray:
    """(2, 128) int64: for each ASCII code point ``c``, row 0 ``c | token flag << 8`` and
    row 1 the same of its lower case (ASCII too). Made once per batch: the tokenizer reads
    one entry instead of two dependent tables for the code points that are ASCII."""
    out = np.empty((2, 128), np.int64)
    for c in range(128):
        lc = lower_tab[c]
        if lc >= 128:
            raise ValueError("ascii_table: an ASCII code point lower-cases outside ASCII")
        out[0, c] = c | (np.int64(tok_tab[c]) << 8)
        out[1, c] = lc | (np.int64(tok_tab[lc]) << 8)
    return out


@called  # (once a text: a call is a few ns; inlined, the row kernel took ~50 s to compile)
def text_features(
    cps: np.ndarray,
    s: int,
    e: int,
    lower_tab: np.ndarray,
    tok_tab: np.ndarray,
    asc: np.ndarray,
    lowercase: bool,
    wn: int,
    skips: int,
    cmin: int,
    cmax: int,
    across: bool,
    pre: np.ndarray,
    w0: int,
    w1: int,
    c0: int,
    c1: int,
    keep: bool,
    max_occ: int,
    si: np.ndarray,
    tb: np.ndarray,
    pb: np.ndarray,
    so: np.ndarray,
    table: np.ndarray,
    names: np.ndarray,
    at: int,
) -> tuple[int, int]:
    """(u, need): the text ``cps[s:e]``'s ``u`` distinct features (``asc``:
    :func:`ascii_table` of the two tables), full hashes in
    ``so[HASH, :u]``, counts in ``so[COUNT, :u]`` and (``keep``) UTF-8 names
    ``names[so[NOFF, k]:so[NOFF, k + 1]]`` written from ``names[at]`` on; the word and
    character n-grams' name prefixes are ``pre[w0:w1]`` and ``pre[c0:c1]``. ``u`` is -1
    when the text could give more than ``max_occ`` n-gram occurrences, and -2 when
    ``names`` is short: then ``need`` is a length it must have at least (the caller
    grows it and calls again). The scratch: ``si, tb, pb = text_room(e - s)`` (or larger),
    ``so, table = occ_room(occ_cap(e - s, ...))`` (or larger), ``table`` all -1 (and left
    so). No array is allocated, returned or rebound here (numba's reference counting of
    a rebound array costs two atomic operations per loop turn); the three row views of
    ``si`` taken per text count none when ``si`` is borrowed, as in the row kernel."""
    # (borrowed: the caller holds them; the inlined helpers' copies then count no references)
    cps, lower_tab, tok_tab, asc, pre = (borrowed(cps), borrowed(lower_tab), borrowed(tok_tab),
                                         borrowed(asc), borrowed(pre))  # fmt: skip
    si, tb, pb, so, table, names = (borrowed(si), borrowed(tb), borrowed(pb), borrowed(so),
                                    borrowed(table), borrowed(names))  # fmt: skip
    L = e - s
    # tokens and the UTF-8 bytes of the (lower-cased) text, cpo[k] = byte of code point k
    # Without a branch on the token boundaries (a mispredicted branch per token edge
    # cost more than the rest of the loop): each position is written as the next start
    # and the next end, kept when the token flag changes there.
    n_start = 0
    nt = 0
    pos = 0
    prev = 0
    # (rows of si as views and unsigned indexes: numba tests every signed index for
    # wraparound; a view of a borrowed array counts no references)
    cpo, ts, te = si[_CPO], si[_TS], si[_TE]
    arow = 1 if lowercase else 0
    for i in range(L):
        c = np.uint64(cps[np.uint64(s + i)])
        cpo[np.uint64(i)] = pos
        if c < 128:  # one table entry: (lower-cased) byte and token flag
            v = asc[arow, c]
            tb[np.uint64(pos)] = v & 0xFF
            pos += 1
            t = int(v >> 8)
        else:
            if lowercase:
                c = np.uint64(lower_tab[c])
            pos = put_utf8(tb, pos, int(c))
            t = int(tok_tab[c])
        ts[np.uint64(n_start)] = i
        n_start += t & (1 - prev)
        te[np.uint64(nt)] = i
        nt += prev & (1 - t)
        prev = t
    si[_CPO, L] = pos
    si[_TE, nt] = L
    nt += prev
    # an upper bound on occurrences (the limit's measure; sizes the scratch)
    bound = 0
    per_start = 1
    for _n in range(wn):
        bound += nt * per_start
        per_start *= skips + 1
    nc = cmax - cmin + 1 if cmin > 0 else 0
    token_cps = 0
    for k in range(nt):
        token_cps += si[_TE, k] - si[_TS, k]
    bound += nc * (token_cps + 3 * nt + 2)
    if bound > max_occ:  # refused before any memory is taken
        return -1, 0
    size = 16
    while size < SPREAD * bound:
        size *= 2
    if so.shape[1] < bound + 1 or table.shape[0] < size:
        raise ValueError("text_features: the occurrence scratch is short")
    smask = size - 1
    u = 0
    so[NOFF, 0] = at
    if wn > 0 and nt > 0:
        u = _words(tb, si, nt, wn, skips, pre, w0, w1, keep, so, table, smask, names)
    if nc > 0 and nt > 0 and u >= 0:
        u = _chars(
            tb, pb, si, nt, cmin, cmax, across, pre, c0, c1, keep, so, table, smask, u, names
        )
    for k in range(size):  # (a slice would be an array made per text)
        table[k] = -1
    if u < 0:  # -(the length names needs)
        return -2, max(-u, 2 * names.shape[0])
    return u, 0


@called  # (once a text, from text_features)
def _chars(
    tb: np.ndarray,
    pb: np.ndarray,
    si: np.ndarray,
    nt: int,
    cmin: int,
    cmax: int,
    across: bool,
    pre: np.ndarray,
    p0: int,
    p1: int,
    keep: bool,
    so: np.ndarray,
    table: np.ndarray,
    smask: int,
    u: int,
    names: np.ndarray,
) -> int:
    """Character n-grams of each padded token (or of all tokens, ``across``); returns
    the distinct count, or minus the length ``names`` needs."""
    # (borrowed, as in text_features: the inlined helpers' copies count no references)
    tb, pb, si, pre, so = borrowed(tb), borrowed(pb), borrowed(si), borrowed(pre), borrowed(so)
    table, names = borrowed(table), borrowed(names)
    pc = p1 - p0
    h0, k0, c0 = feed_span(np.uint64(0), np.uint64(0), 0, pre, p0, p1)
    first, last = 0, nt
    while first < nt:
        if not across:
            last = first + 1
        # padded sequence bytes pb, code point k at pb[si[_PO, k]:si[_PO, k+1]]
        lp = 0
        si[_PO, 0] = 0
        pb[0] = 32
        q = 1
        for t in range(first, last):
            for i in range(si[_TS, t], si[_TE, t]):
                lp += 1
                si[_PO, lp] = q
                for b in range(si[_CPO, i], si[_CPO, i + 1]):
                    pb[q] = tb[b]
                    q += 1
            lp += 1
            si[_PO, lp] = q
            pb[q] = 32
            q += 1
        lp += 1
        si[_PO, lp] = q
        # n = cmin.., n-gram i = code points i..min(i + n, lp); stop after the first
        # n >= lp (the sequence itself, once)
        n_hi = cmin if lp <= cmin else min(cmax, lp)
        width = max(1, lp - cmin + 1)  # starts of the shortest n, the most
        for i in range(width):  # the n-grams of one start together, as a stream
            h, k, cn = h0, k0, c0
            at = si[_PO, i]
            for n in range(cmin, n_hi + 1):
                if i >= max(1, lp - n + 1):
                    break
                end = si[_PO, min(i + n, lp)]
                h, k, cn = feed_span(h, k, cn, pb, at, end)
                at = end
                so[_GRAM, (n - cmin) * width + i] = finish(h, k, cn, pc + end - si[_PO, i])
        for n in range(cmin, n_hi + 1):  # counted in the documented order
            for i in range(max(1, lp - n + 1)):
                if _count(so[_GRAM, (n - cmin) * width + i], so, table, smask, u) == u:
                    if keep:
                        a, z = si[_PO, i], si[_PO, min(i + n, lp)]
                        w = _put_chars(names, so[NOFF, u], pre, p0, p1, pb, a, z)
                        if w < 0:
                            return w
                        so[NOFF, u + 1] = w
                    u += 1
        first = last
    return u
