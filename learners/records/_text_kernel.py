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

from typing import Any

import numba
import numpy as np

from learners.records._hash_kernels import feed, feed_span, finish, put_utf8, take

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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


@numba.njit(cache=True, inline="always")
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


@numba.njit(cache=True, inline="always")
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
    if skips == 0 and not keep:  # contiguous n-grams, no names: no odometer, the tokens'
        # byte ranges and states read straight from their rows (issue 22: the SMS
        # bigrams' share of an SMS message's time: 38 % -> 35 %)
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


@numba.njit(cache=True, inline="always")
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
    cpo, ts, te = si[_CPO], si[_TS], si[_TE]
    gram = so[_GRAM]  # (so's rows hold 2 nt + 1: the occurrence bound of wn 2, no skips)
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


@numba.njit(cache=True, inline="always")
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
