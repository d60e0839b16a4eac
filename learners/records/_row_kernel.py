"""numba kernel of a batch of records: from "atoms" (one per present field value, made
by :mod:`learners.records.encoder`) to the features of each row, in one compiled pass.

An atom is a named feature (its name's code points ``cps[start:end]`` and its value)
or a text (``cps[start:end]``, read by :func:`text_features`). Per row, in order: the
intercept, each atom's features (a text field's weighted, idf-scaled, L2-normalised
counts), then the interactions (products of the features of 2 or 3 namespaces, named
``a*b`` / ``a*b*c``, a namespace repeated giving each unordered pair once). Every
column is MurmurHash3 of the feature's UTF-8 name masked to ``bits``.

idf: ``df[slot, column]`` counts the documents (present values of text field ``slot``)
holding the column, ``docs[slot]`` the documents; with ``update`` each row is weighted
with the counts of the rows before it and then counted (the arrays are changed in place:
the caller passes copies).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from learners.records._hash_kernels import grow, murmur3, put_utf8
from learners.records._row_parts import _canonical, _hash_named
from learners.records._text_kernel import (
    COUNT,
    HASH,
    NOFF,
    occ_cap,
    occ_room,
    text_features,
    text_room,
)

OK = 0
TOO_MANY = 1  # err_field: the field being read, or -1 for the interactions
TOO_MANY_NGRAMS = 2  # a text that could give more than NGRAMS_PER_FEATURE * max_feat n-grams
NGRAMS_PER_FEATURE = 32
_INT32_MAX = 2**31 - 1

# columns of the text parameter table ``tp`` (one row per text field)
TP_LOWER, TP_WN, TP_SKIPS, TP_CMIN, TP_CMAX, TP_ACROSS, TP_WEIGHT, TP_IDF, TP_NORM = range(9)
TP_WPRE_S, TP_WPRE_E, TP_CPRE_S, TP_CPRE_E = range(9, 13)
TP_COLS = 13
WEIGHT_BINARY, WEIGHT_TF, WEIGHT_LOG_TF = 0, 1, 2
# what encode_rows gives: canonical rows; the features as made with their names; or the
# features as made with their full 32-bit hashes (unmasked) and no names
CANONICAL, NAMED, HASHES = 0, 1, 2


@numba.njit(cache=True)
def _weights(
    so: np.ndarray,
    u: int,
    p: np.ndarray,
    df: np.ndarray,
    docs: np.ndarray,
    mask: int,
    update: bool,
    vals: np.ndarray,
    at: int,
) -> None:
    """A text field's values ``vals[at:at + u]`` from ``text_features``' ``u`` distinct
    hashes and counts in ``so``: weighting of the counts, idf, L2 norm; then counts the
    document into ``df`` / ``docs`` when ``update``."""
    log2 = np.log1p(1.0)  # most n-grams occur once: the same call's value, made once
    for k in range(u):
        c = so[COUNT, k]
        if p[TP_WEIGHT] == WEIGHT_BINARY:
            vals[at + k] = 1.0
        elif p[TP_WEIGHT] == WEIGHT_TF:
            vals[at + k] = float(c)
        elif c == 1:
            vals[at + k] = log2
        else:
            vals[at + k] = np.log1p(float(c))
    slot = p[TP_IDF]
    if slot >= 0:
        n_docs = float(docs[slot])
        for k in range(u):
            idf = np.log((1.0 + n_docs) / (1.0 + float(df[slot, so[HASH, k] & mask]))) + 1.0
            vals[at + k] *= idf
        if update:
            cols = np.unique(so[HASH, :u] & mask)  # a document counts once per column
            for col in cols:
                if df[slot, col] < _INT32_MAX:
                    df[slot, col] += 1
            if docs[slot] < 2**62:
                docs[slot] += 1
    if p[TP_NORM] and u > 0:
        sq = 0.0
        for k in range(u):
            sq += vals[at + k] * vals[at + k]
        norm = np.sqrt(sq)
        for k in range(u):
            vals[at + k] /= norm


@numba.njit(cache=True)
def encode_rows(
    n_rows: int,
    cps: np.ndarray,
    a_row: np.ndarray,
    a_field: np.ndarray,
    s_off: np.ndarray,
    a_sidx: np.ndarray,
    a_val: np.ndarray,
    f_text: np.ndarray,
    f_ns: np.ndarray,
    f_pre: np.ndarray,
    tp: np.ndarray,
    prefixes: np.ndarray,
    lower_tab: np.ndarray,
    tok_tab: np.ndarray,
    inter: np.ndarray,
    keep_ns: np.ndarray,
    intercept: np.ndarray,
    df: np.ndarray,
    docs: np.ndarray,
    update: bool,
    mask: int,
    max_feat: int,
    mode: int,
) -> Any:
    """(status, err_row, err_field, indptr, columns, values, names, name offsets): the
    rows in canonical form (columns ascending and distinct), or (``mode`` NAMED) the
    features as generated, one per name, with their UTF-8 names, or (HASHES) as
    generated with each name's full 32-bit hash as its column. ``intercept`` is the
    intercept's UTF-8 name (empty for none); ``keep_ns[ns]`` says a namespace's names are needed for
    the interactions."""
    want_names = mode == NAMED
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    out_h = np.empty(16, dtype=np.int64)
    out_v = np.empty(16, dtype=np.float64)
    out_nb = np.empty(16, dtype=np.uint8)
    out_no = np.zeros(17, dtype=np.int64)
    # one row's features: full hash, value, namespace, name span in nb
    # Room for every named atom of a row (+ the intercept) from the start, kept after a
    # text's features: the named-feature branch then never reassigns these arrays (a
    # reassignment there costs numba's reference counting per feature, taken or not).
    # The text kernel's scratch too is sized here for the longest text: no array
    # assigned in the row loop lives from one atom to the next but those four and nb.
    n_atoms = a_row.shape[0]
    named = 0
    at_row = -1
    run = 0
    longest = 0
    occ = 0
    for k in range(n_atoms):
        if a_row[k] != at_row:
            at_row, run = a_row[k], 0
        if f_text[a_field[k]] < 0:
            run += 1
            named = max(named, run)
        else:
            p = tp[f_text[a_field[k]]]
            length = s_off[a_sidx[k] + 1] - s_off[a_sidx[k]]
            longest = max(longest, length)
            occ = max(occ, occ_cap(length, p[TP_WN], p[TP_SKIPS], p[TP_CMIN], p[TP_CMAX],
                                   NGRAMS_PER_FEATURE * max_feat))  # fmt: skip
    si, sb = text_room(longest)
    so, table = occ_room(occ)
    size = max(16, named + 2)
    fh = np.empty(size, dtype=np.int64)
    fv = np.empty(size, dtype=np.float64)
    fns = np.empty(size, dtype=np.int64)
    fo = np.zeros(size + 1, dtype=np.int64)
    nb = np.empty(256, dtype=np.uint8)
    n_out = 0
    a = 0
    sid_hash = np.full(s_off.shape[0] - 1, -1, dtype=np.int64)  # a string's name, hashed once
    pre_i = intercept.shape[0]
    pre_h = murmur3(intercept, 0, pre_i)  # hashed once, not per row
    order = np.empty(64, dtype=np.int64)  # _canonical's scratch (2 per feature)
    if not want_names:  # the named features whose names are not kept: hashed once, here
        _hash_named(n_atoms, a_field, a_sidx, s_off, cps, f_text, f_ns, keep_ns, f_pre,
                    prefixes, sid_hash)  # fmt: skip
    for r in range(n_rows):
        nf = 0
        if pre_i > 0:
            nb[:pre_i] = intercept
            fh[0], fv[0], fns[0], fo[1] = pre_h, 1.0, -1, pre_i
            nf = 1
        while a < n_atoms and a_row[a] == r:
            f = a_field[a]
            sid = a_sidx[a]
            s, e = s_off[sid], s_off[sid + 1]
            if f_text[f] < 0 and not (want_names or keep_ns[f_ns[f]]):  # hashed above
                fh[nf], fv[nf], fns[nf], fo[nf + 1] = sid_hash[sid], a_val[a], f_ns[f], fo[nf]
                nf += 1
            elif f_text[f] < 0:  # a named feature: prefix (e.g. "job=") + the string
                q = fo[nf]  # (room made: see ``named``)
                if want_names or keep_ns[f_ns[f]] or sid_hash[sid] < 0:
                    p0, p1 = f_pre[f, 0], f_pre[f, 1]
                    if q + p1 - p0 + 4 * (e - s) > nb.shape[0]:
                        nb = grow(nb, q + p1 - p0 + 4 * (e - s))
                    for i in range(p0, p1):
                        nb[q] = prefixes[i]
                        q += 1
                    for i in range(s, e):
                        q = put_utf8(nb, q, cps[i])
                    if sid_hash[sid] < 0:
                        sid_hash[sid] = murmur3(nb, fo[nf], q)
                    if not (want_names or keep_ns[f_ns[f]]):
                        q = fo[nf]  # the name is not needed: only its hash
                fh[nf], fv[nf], fns[nf], fo[nf + 1] = sid_hash[sid], a_val[a], f_ns[f], q
                nf += 1
            else:
                p = tp[f_text[f]]
                keep = want_names or keep_ns[f_ns[f]]
                base = fo[nf]
                u, nb = text_features(cps, s, e, lower_tab, tok_tab, p[TP_LOWER] != 0,
                                      p[TP_WN], p[TP_SKIPS], p[TP_CMIN], p[TP_CMAX],
                                      p[TP_ACROSS] != 0, prefixes[p[TP_WPRE_S] : p[TP_WPRE_E]],
                                      prefixes[p[TP_CPRE_S] : p[TP_CPRE_E]], keep,
                                      NGRAMS_PER_FEATURE * max_feat, si, sb, so, table, nb,
                                      base)  # fmt: skip
                if u == -1:
                    return TOO_MANY_NGRAMS, r, f, indptr, out_h, out_v, out_nb, out_no
                if nf + u > max_feat:
                    return TOO_MANY, r, f, indptr, out_h, out_v, out_nb, out_no
                if _short(fh, fo, nf + u + named + 1):  # and the named atoms after it
                    fh, fv, fns, fo = _room(fh, fv, fns, fo, nf + u + named + 1)
                _weights(so, u, p, df, docs, mask, update, fv, nf)
                for k in range(u):  # names, when kept, are in nb from base on
                    fh[nf + k], fns[nf + k] = so[HASH, k], f_ns[f]
                    fo[nf + k + 1] = so[NOFF, k + 1] if keep else base
                nf += u
            if nf > max_feat:
                return TOO_MANY, r, f, indptr, out_h, out_v, out_nb, out_no
            a += 1
        n_plain = nf
        for t in range(inter.shape[0]):
            nf, fh, fv, fns, fo, nb = _interact(
                inter[t], n_plain, nf, fh, fv, fns, fo, nb, max_feat
            )
            if nf > max_feat:
                return TOO_MANY, r, -1, indptr, out_h, out_v, out_nb, out_no
        if n_out + nf > out_h.shape[0]:
            out_h = grow(out_h, n_out + nf)
            out_v = grow(out_v, n_out + nf)
        if mode == HASHES:  # as generated, without names
            for k in range(nf):
                out_h[n_out + k] = fh[k]
                out_v[n_out + k] = fv[k]
        elif want_names:  # as generated: one entry per name
            out_h[n_out : n_out + nf] = fh[:nf] & mask
            out_v[n_out : n_out + nf] = fv[:nf]
            out_no = grow(out_no, n_out + nf + 1)
            out_nb = grow(out_nb, out_no[n_out] + fo[nf])
            out_nb[out_no[n_out] : out_no[n_out] + fo[nf]] = nb[: fo[nf]]
            for k in range(nf):
                out_no[n_out + k + 1] = out_no[n_out] + fo[k + 1]
        else:  # canonical: columns ascending, a repeated column summed in generation order
            if 2 * nf > order.shape[0]:
                order = np.empty(2 * nf, dtype=np.int64)
            nf = _canonical(fh, fv, nf, mask, out_h, out_v, n_out, order)
        n_out += nf
        indptr[r + 1] = n_out
    names = out_nb[: out_no[n_out]].copy() if want_names else out_nb[:0].copy()
    return OK, -1, -1, indptr, out_h[:n_out].copy(), out_v[:n_out].copy(), names, out_no


@numba.njit(cache=True, inline="always")
def _short(fh: np.ndarray, fo: np.ndarray, need: int) -> bool:
    """Whether :func:`_room` would grow a buffer (fv and fns are fh's length): calling
    it only then spares the reference counting of four returned arrays per feature."""
    return need > fh.shape[0] or need + 1 > fo.shape[0]


@numba.njit(cache=True)
def _room(fh: np.ndarray, fv: np.ndarray, fns: np.ndarray, fo: np.ndarray, need: int) -> Any:
    return grow(fh, need), grow(fv, need), grow(fns, need), grow(fo, need + 1)


@numba.njit(cache=True)
def _interact(
    spec: np.ndarray,
    n_plain: int,
    nf: int,
    fh: np.ndarray,
    fv: np.ndarray,
    fns: np.ndarray,
    fo: np.ndarray,
    nb: np.ndarray,
    max_feat: int,
) -> Any:
    """Append the products of the namespaces ``spec`` (2 or 3 ids, -1 padded) of the
    row's first ``n_plain`` features; stops once past ``max_feat``."""
    width = 3 if spec[2] >= 0 else 2
    members = np.empty((3, n_plain), dtype=np.int64)
    sizes = np.zeros(3, dtype=np.int64)
    for q in range(width):
        for i in range(n_plain):
            if fns[i] == spec[q]:
                members[q, sizes[q]] = i
                sizes[q] += 1
    pos = np.zeros(3, dtype=np.int64)
    for q in range(width):
        if sizes[q] == 0:
            return nf, fh, fv, fns, fo, nb
    # an odometer over the members; a namespace repeated later takes only later features
    while True:
        ok = True
        for q in range(1, width):
            for p in range(q):
                if spec[p] == spec[q] and members[q, pos[q]] <= members[p, pos[p]]:
                    ok = False
        if ok:
            if _short(fh, fo, nf + 1):
                fh, fv, fns, fo = _room(fh, fv, fns, fo, nf + 1)
            q0 = fo[nf]
            total = 0
            for q in range(width):
                i = members[q, pos[q]]
                total += fo[i + 1] - fo[i] + 1
            if q0 + total > nb.shape[0]:
                nb = grow(nb, q0 + total)
            w = q0
            val = 1.0
            for q in range(width):
                i = members[q, pos[q]]
                if q > 0:
                    nb[w] = 42  # "*"
                    w += 1
                nb[w : w + fo[i + 1] - fo[i]] = nb[fo[i] : fo[i + 1]]
                w += fo[i + 1] - fo[i]
                val *= fv[i]
            fh[nf], fv[nf], fns[nf], fo[nf + 1] = murmur3(nb, q0, w), val, -2, w
            nf += 1
            if nf > max_feat:
                return nf, fh, fv, fns, fo, nb
        q = width - 1
        while q >= 0:
            pos[q] += 1
            if pos[q] < sizes[q]:
                break
            pos[q] = 0
            q -= 1
        if q < 0:
            return nf, fh, fv, fns, fo, nb
