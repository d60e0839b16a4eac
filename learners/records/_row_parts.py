"""Pieces of the records row kernel (:mod:`learners.records._row_kernel`): the hashes of
the named features' strings, made once per batch before the rows, a row's features in
canonical form (columns ascending, a repeated column summed in generation order), a row's
interactions, and a text field's values (weighting, idf, L2 norm).

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the row kernel.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from learners._numba_calls import called
from learners.records._borrow import borrowed
from learners.records._hash_kernels import murmur3, put_utf8
from learners.records._text_kernel import COUNT, HASH

_INT32_MAX = 2**31 - 1

# columns of the text parameter table ``tp`` (one row per text field)
TP_LOWER, TP_WN, TP_SKIPS, TP_CMIN, TP_CMAX, TP_ACROSS, TP_WEIGHT, TP_IDF, TP_NORM = range(9)
TP_WPRE_S, TP_WPRE_E, TP_CPRE_S, TP_CPRE_E = range(9, 13)
TP_COLS = 13
WEIGHT_BINARY, WEIGHT_TF, WEIGHT_LOG_TF = 0, 1, 2
# the row kernel's codes for a short buffer that _interact returns too: fh, fv, fns, fo; nb
NEED_F, NEED_NB = 10, 11
# log(1 + c) of the small counts c, as the C library's log1p gives them (math.log1p is
# that call, as numba's np.log1p): constants, not a call per repeated n-gram
_LOG1P = np.array([math.log1p(float(c)) for c in range(64)])


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


@numba.njit(cache=True, inline="always")
def _canonical(
    fh: np.ndarray,
    fv: np.ndarray,
    nf: int,
    mask: int,
    mask_bits: int,
    out_c: np.ndarray,
    out_v: np.ndarray,
    at: int,
    order: np.ndarray,
) -> int:
    """Write the row's columns ascending from ``at``, summing repeats (stable order);
    returns how many were written. ``mask`` is ``2**mask_bits - 1``; ``order`` is
    scratch of at least ``6 * nf + 8``.

    (column, index) packed in one int64 (column < 2**31, index < 2**24: nf is at most
    max_features_per_record + 1 <= 10**6 + 1): the keys are distinct, so sorting them
    gives exactly the stable order by column. No view is taken: this is inlined in the
    row loop, where each array made costs two atomic reference counts."""
    for k in range(nf):
        order[k] = ((fh[k] & mask) << 24) | k
    got = nf  # where the sorted keys are
    if nf <= 16:  # each key to its rank: n^2 comparisons without a branch (SIMD)
        for k in range(nf):
            v = order[k]
            rank = 0
            for j in range(nf):
                rank += order[j] < v
            order[nf + rank] = v
    elif nf <= 256:  # a counting sort on the columns' top bits (hashes: about one key a
        # bucket), then an insertion sort, which moves only keys that share a bucket.
        # 31 keys: ~260 ns against ~300 for ranks, 141: 1.1 us against 2.9 (issue 22).
        # (Bounded: at most 256**2 / 2 moves if every key shared one bucket.)
        # Two buckets a key (not one): fewer keys share one, and the insertion sort's
        # exits mispredict less (31 keys: 280 ns against 330).
        nb, lb = 8, 3
        while nb < 2 * nf:
            nb, lb = 2 * nb, lb + 1
        shift = 24 + max(0, mask_bits - lb)
        c0 = 2 * nf  # the bucket counts, then starts, at order[c0:c0 + nb + 1] (nb < 4 nf)
        for b in range(nb + 1):
            order[c0 + b] = 0
        for k in range(nf):
            order[c0 + 1 + (order[k] >> shift)] += 1
        for b in range(nb):
            order[c0 + b + 1] += order[c0 + b]
        for k in range(nf):
            b = c0 + (order[k] >> shift)
            order[nf + order[b]] = order[k]
            order[b] += 1
        for i in range(nf + 1, 2 * nf):  # (j >= nf - 1 >= 0: unsigned indexes, no
            # wraparound tests)
            v = order[np.uint64(i)]
            j = i - 1
            while j >= nf and order[np.uint64(j)] > v:
                order[np.uint64(j + 1)] = order[np.uint64(j)]
                j -= 1
            order[np.uint64(j + 1)] = v
    else:  # (order is borrowed in the row kernel: numba's sort then counts no references)
        order[:nf].sort()
        got = 0
    w = at - 1  # (indexed only from ``at`` >= 0 on: unsigned)
    for k in range(got, got + nf):
        key = order[np.uint64(k)]
        src = np.uint64(key & 0xFFFFFF)
        c = key >> 24
        if w >= at and out_c[np.uint64(w)] == c:
            out_v[np.uint64(w)] += fv[src]
        else:
            w += 1
            out_c[np.uint64(w)] = c
            out_v[np.uint64(w)] = fv[src]
    return w + 1 - at


@called  # (once a row and interaction; inlined, it was a good part of the row kernel's compile)
def _interact(
    inter: np.ndarray,
    t: int,
    n_plain: int,
    nf: int,
    fh: np.ndarray,
    fv: np.ndarray,
    fns: np.ndarray,
    fo: np.ndarray,
    nb: np.ndarray,
    max_feat: int,
    members: np.ndarray,
) -> tuple[int, int, int]:
    """Append the products of the namespaces ``inter[t]`` (2 or 3 ids, -1 padded) of the
    row's first ``n_plain`` features (names ``a*b``, ``a*b*c``; a namespace repeated
    takes only later features); stops once past ``max_feat``. Returns (nf, code, need):
    code 0, or NEED_F (fh, fv, fns, fo short) / NEED_NB (nb short) with the length ``need``, and
    then nothing is appended. ``members``: scratch of shape (5, >= max(3, n_plain))."""
    # (borrowed, as in text_features: the inlined helpers' copies count no references)
    inter, fh, fv, fns = borrowed(inter), borrowed(fh), borrowed(fv), borrowed(fns)
    fo, nb, members = borrowed(fo), borrowed(nb), borrowed(members)
    width = 3 if inter[t, 2] >= 0 else 2
    longest = 0  # the longest name of a combination
    for q in range(width):
        members[3, q] = 0
        members[4, q] = 0
        most = 0
        for i in range(n_plain):
            if fns[i] == inter[t, q]:
                members[q, members[3, q]] = i
                members[3, q] += 1
                most = max(most, fo[i + 1] - fo[i])
        if members[3, q] == 0:
            return nf, 0, 0
        longest += most + 1
    combos = 1
    for q in range(width):
        combos = min(combos * members[3, q], max_feat + 2)
    cap = min(combos, max_feat + 1 - nf)  # at most this many appended
    if cap <= 0:
        cap = 1
    if nf + cap > fh.shape[0] or nf + cap + 1 > fo.shape[0]:
        return nf, NEED_F, max(nf + cap, 2 * fh.shape[0])
    if fo[nf] + cap * longest > nb.shape[0]:
        return nf, NEED_NB, max(fo[nf] + cap * longest, 2 * nb.shape[0])
    # an odometer over the members
    while True:
        ok = True
        for q in range(1, width):
            for p in range(q):
                same_ns = inter[t, p] == inter[t, q]
                if same_ns and members[q, members[4, q]] <= members[p, members[4, p]]:
                    ok = False
        if ok:
            w = fo[nf]
            q0 = w
            val = 1.0
            for q in range(width):
                i = members[q, members[4, q]]
                if q > 0:
                    nb[w] = 42  # "*"
                    w += 1
                for b in range(fo[i], fo[i + 1]):
                    nb[w] = nb[b]
                    w += 1
                val *= fv[i]
            fh[nf], fv[nf], fns[nf], fo[nf + 1] = murmur3(nb, q0, w), val, -2, w
            nf += 1
            if nf > max_feat:
                return nf, 0, 0
        q = width - 1
        while q >= 0:
            members[4, q] += 1
            if members[4, q] < members[3, q]:
                break
            members[4, q] = 0
            q -= 1
        if q < 0:
            return nf, 0, 0


@numba.njit(cache=True, inline="always")
def _weights(
    so: np.ndarray,
    u: int,
    tp: np.ndarray,
    ti: int,
    df: np.ndarray,
    docs: np.ndarray,
    mask: int,
    update: bool,
    vals: np.ndarray,
    at: int,
    table: np.ndarray,
    undo: np.ndarray,
    n_undo: int,
) -> int:
    """A text field's values ``vals[at:at + u]`` from ``text_features``' ``u`` distinct
    hashes and counts in ``so`` (text field ``ti`` of ``tp``): weighting of the counts,
    idf, L2 norm; then counts the document into ``df`` / ``docs`` when ``update``, each
    count's flat index into ``df`` logged in ``undo`` from ``n_undo`` on (room for ``u``
    the caller's). Returns the count logged."""
    log1p = _LOG1P  # (a global array: a constant of the compiled code)
    # (the parameters read once: numba cannot tell that ``vals`` does not overlap ``tp``,
    # so a read in the loop would be made again after every store)
    weighting = tp[ti, TP_WEIGHT]
    counts = so[COUNT]
    for k in range(u):
        c = counts[k]
        if weighting == WEIGHT_BINARY:
            vals[at + k] = 1.0
        elif weighting == WEIGHT_TF:
            vals[at + k] = float(c)
        elif c < 64:
            vals[at + k] = log1p[c]
        else:
            vals[at + k] = np.log1p(float(c))
    slot = tp[ti, TP_IDF]
    if slot >= 0:
        n_docs = float(docs[slot])
        for k in range(u):
            idf = np.log((1.0 + n_docs) / (1.0 + float(df[slot, so[HASH, k] & mask]))) + 1.0
            vals[at + k] *= idf
        if update:  # a document counts once per column: the columns seen kept in table
            tmask = table.shape[0] - 1  # (a power of two over 2 u, all -1: left so)
            for k in range(u):
                col = so[HASH, k] & mask
                t = col & tmask
                while table[t] >= 0 and table[t] != col:
                    t = (t + 1) & tmask
                if table[t] < 0:
                    table[t] = col
                    if df[slot, col] < _INT32_MAX:
                        df[slot, col] += 1
                        undo[n_undo] = slot * df.shape[1] + col
                        n_undo += 1
            for k in range(u):  # each run of slots from a home slot on held only these
                t = (so[HASH, k] & mask) & tmask
                while table[t] >= 0:
                    table[t] = -1
                    t = (t + 1) & tmask
            if docs[slot] < 2**62:
                docs[slot] += 1
    if tp[ti, TP_NORM] and u > 0:
        sq = 0.0
        for k in range(u):
            sq += vals[at + k] * vals[at + k]
        norm = np.sqrt(sq)
        for k in range(u):
            vals[at + k] /= norm
    return n_undo
