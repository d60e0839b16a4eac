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

from learners.records._borrow import borrowed
from learners.records._hash_kernels import grow, murmur3, put_utf8
from learners.records._row_parts import (  # (the text parameter table's layout, re-exported)
    NEED_F,
    NEED_NB,
    TP_ACROSS,
    TP_CMAX,
    TP_CMIN,
    TP_CPRE_E,
    TP_CPRE_S,
    TP_IDF,
    TP_LOWER,
    TP_SKIPS,
    TP_WN,
    TP_WPRE_E,
    TP_WPRE_S,
    _canonical,
    _hash_named,
    _interact,
    _weights,
)
from learners.records._text_kernel import (
    HASH,
    NOFF,
    ascii_table,
    occ_cap,
    occ_room,
    text_features,
    text_room,
)

OK = 0
TOO_MANY = 1  # err_field: the field being read, or -1 for the interactions
TOO_MANY_NGRAMS = 2  # a text that could give more than NGRAMS_PER_FEATURE * max_feat n-grams
NGRAMS_PER_FEATURE = 32
# what encode_rows gives: canonical rows; the features as made with their names; or the
# features as made with their full 32-bit hashes (unmasked) and no names
CANONICAL, NAMED, HASHES = 0, 1, 2


# what _rows stopped for, besides OK / TOO_MANY / TOO_MANY_NGRAMS: a buffer is short
# (``cur[_NEED]`` says how long it must be); encode_rows grows it and calls again
_NEED_F, _NEED_NB = NEED_F, NEED_NB  # (_interact's too)
_NEED_OUT, _NEED_NAMES, _NEED_ORDER, _NEED_MEMBERS, _NEED_UNDO = range(12, 17)
# _rows' cursor ``cur``: where to go on, kept there when it stops
_R, _A, _NF, _PHASE, _T, _NPLAIN, _NOUT, _NEED, _EF = range(9)
_NAMED = 9  # (in, not a cursor: an argument of its own was typed as the literal 0 in
# one compilation and int64 in another: _rows, the largest kernel, compiled twice)
_NUNDO = 10  # idf counts made so far, each logged in ``undo`` (see encode_rows)
# a row's phases: not begun, its atoms, its interactions, written out
_BEGIN, _ATOMS, _INTER, _OUT = range(4)


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
    keep: bool,
    mask: int,
    max_feat: int,
    mode: int,
) -> Any:
    """(status, err_row, err_field, indptr, columns, values, names, name offsets): the
    rows in canonical form (columns ascending and distinct), or (``mode`` NAMED) the
    features as generated, one per name, with their UTF-8 names, or (HASHES) as
    generated with each name's full 32-bit hash as its column. ``intercept`` is the
    intercept's UTF-8 name (empty for none); ``keep_ns[ns]`` says a namespace's names are needed for
    the interactions.

    The rows are made by :func:`_rows`, which never makes or rebinds an array (numba's
    reference counting of a rebound array costs two atomic operations per loop turn, more
    than the rest of a named feature's work): when a buffer is short it stops, saying
    which and how long, and goes on from where it stopped once this has grown it.

    idf counts (``update``) are made in ``df`` / ``docs`` themselves, each logged, and
    taken back before this returns unless ``keep`` and every row was made: a refused
    batch or a dry run leaves them as they were, and no table is copied (at ``bits`` 24 a
    field's table is 64 MB). One compiled call holding the GIL: no other thread sees the
    counts of half a batch."""
    # Sizes from the atoms: the most named atoms of a row (room for them all from the
    # start) and the text kernel's scratch for the longest text.
    n_atoms = a_row.shape[0]
    named = 0
    at_row = -1
    run = 0
    longest = 0
    occ = 0
    for k in range(n_atoms):
        if a_row[k] != at_row:
            at_row, run = a_row[k], 0
        ti = f_text[a_field[k]]
        if ti < 0:
            run += 1
            named = max(named, run)
        else:
            length = s_off[a_sidx[k] + 1] - s_off[a_sidx[k]]
            longest = max(longest, length)
            occ = max(occ, occ_cap(length, tp[ti, TP_WN], tp[ti, TP_SKIPS], tp[ti, TP_CMIN],
                                   tp[ti, TP_CMAX], NGRAMS_PER_FEATURE * max_feat))  # fmt: skip
    si, tb, pb = text_room(longest)
    so, table = occ_room(occ)
    size = max(16, named + 2)
    fh = np.empty(size, dtype=np.int64)
    fv = np.empty(size, dtype=np.float64)
    fns = np.empty(size, dtype=np.int64)
    fo = np.zeros(size + 1, dtype=np.int64)
    nb = np.empty(max(256, intercept.shape[0]), dtype=np.uint8)
    guess = n_atoms + n_rows + 16
    out_h = np.empty(guess, dtype=np.int64)
    out_v = np.empty(guess, dtype=np.float64)
    out_nb = np.empty(16, dtype=np.uint8)
    out_no = np.zeros(guess + 1 if mode == NAMED else 17, dtype=np.int64)
    order = np.empty(6 * size + 8, dtype=np.int64)  # _canonical's scratch
    members = np.empty((5, max(3, named + 2)), dtype=np.int64)  # _interact's scratch
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    sid_hash = np.full(s_off.shape[0] - 1, -1, dtype=np.int64)  # a string's name, hashed once
    if mode != NAMED:  # the named features whose names are not kept: hashed once, here
        _hash_named(n_atoms, a_field, a_sidx, s_off, cps, f_text, f_ns, keep_ns, f_pre,
                    prefixes, sid_hash)  # fmt: skip
    pre_h = murmur3(intercept, 0, intercept.shape[0])  # hashed once, not per row
    asc = ascii_table(lower_tab, tok_tab)
    cur = np.zeros(11, dtype=np.int64)
    cur[_NAMED] = named
    docs0 = docs.copy()
    undo = np.empty(64 if update and df.shape[0] > 0 else 0, dtype=np.int64)
    while True:
        code = _rows(n_rows, cps, a_row, a_field, s_off, a_sidx, a_val, f_text, f_ns, f_pre,
                     tp, prefixes, lower_tab, tok_tab, asc, inter, keep_ns, intercept, pre_h, df,
                     docs, update, mask, max_feat, mode, sid_hash, si, tb, pb, so, table,
                     fh, fv, fns, fo, nb, out_h, out_v, out_nb, out_no, order, members, indptr,
                     undo, cur)  # fmt: skip
        need = cur[_NEED]
        if code == OK:
            break
        if code in (TOO_MANY, TOO_MANY_NGRAMS):
            _take_back(df, docs, docs0, undo, cur[_NUNDO])
            return code, cur[_R], cur[_EF], indptr, out_h, out_v, out_nb, out_no
        if code == _NEED_F:
            fh, fv, fns, fo = grow(fh, need), grow(fv, need), grow(fns, need), grow(fo, need + 1)
        elif code == _NEED_NB:
            nb = grow(nb, need)
        elif code == _NEED_OUT:
            # Sized for the whole batch at the rate of the rows made so far, at most 16x
            # at a time: the first guess counts one feature an atom, and a text gives ~30
            # (doubling copied the output 4-5 times: ~5 % of an SMS batch, issue 22).
            done = max(cur[_R], 1)
            need = max(need, min(need * n_rows // done + n_rows, 16 * out_h.shape[0]))
            out_h, out_v = grow(out_h, need), grow(out_v, need)
            if mode == NAMED:
                out_no = grow(out_no, need + 1)
        elif code == _NEED_NAMES:
            out_nb = grow(out_nb, need)
        elif code == _NEED_ORDER:
            order = np.empty(6 * need + 8, dtype=np.int64)
        elif code == _NEED_UNDO:
            undo = grow(undo, need)
        else:  # _NEED_MEMBERS
            members = np.empty((5, need), dtype=np.int64)
    if not keep:
        _take_back(df, docs, docs0, undo, cur[_NUNDO])
    n_out = cur[_NOUT]
    names = out_nb[: out_no[n_out]].copy() if mode == NAMED else out_nb[:0].copy()
    if 4 * n_out >= 3 * out_h.shape[0]:  # at least 3/4 used: views, not copies (copying
        # a text batch's columns and values was ~3 % of its time)
        return OK, -1, -1, indptr, out_h[:n_out], out_v[:n_out], names, out_no
    return OK, -1, -1, indptr, out_h[:n_out].copy(), out_v[:n_out].copy(), names, out_no


@numba.njit(cache=True)
def _take_back(df: np.ndarray, docs: np.ndarray, docs0: np.ndarray, undo: np.ndarray,
               n: int) -> None:  # fmt: skip
    """Undo the idf counts ``undo[:n]`` logged (flat indexes into ``df``), and ``docs``."""
    dim = df.shape[1]
    for k in range(n):
        df[undo[k] // dim, undo[k] % dim] -= 1
    for k in range(docs.shape[0]):
        docs[k] = docs0[k]


@numba.njit(cache=True)
def _rows(
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
    asc: np.ndarray,
    inter: np.ndarray,
    keep_ns: np.ndarray,
    intercept: np.ndarray,
    pre_h: int,
    df: np.ndarray,
    docs: np.ndarray,
    update: bool,
    mask: int,
    max_feat: int,
    mode: int,
    sid_hash: np.ndarray,
    si: np.ndarray,
    tb: np.ndarray,
    pb: np.ndarray,
    so: np.ndarray,
    table: np.ndarray,
    fh: np.ndarray,
    fv: np.ndarray,
    fns: np.ndarray,
    fo: np.ndarray,
    nb: np.ndarray,
    out_h: np.ndarray,
    out_v: np.ndarray,
    out_nb: np.ndarray,
    out_no: np.ndarray,
    order: np.ndarray,
    members: np.ndarray,
    indptr: np.ndarray,
    undo: np.ndarray,
    cur: np.ndarray,
) -> int:
    """The rows from the cursor ``cur`` on (see :func:`encode_rows`): OK when all are
    made, a refusal, or a short buffer (nothing of the step that found it short done)."""
    # Every array borrowed (learners.records._borrow): the inlined helpers' copies of
    # them then cost no atomic reference counts. This call's caller holds them.
    cps, lower_tab, tok_tab, prefixes = (borrowed(cps), borrowed(lower_tab),
                                         borrowed(tok_tab), borrowed(prefixes))  # fmt: skip
    si, tb, pb, so, table = borrowed(si), borrowed(tb), borrowed(pb), borrowed(so), borrowed(table)
    tp, df, docs, nb, asc = borrowed(tp), borrowed(df), borrowed(docs), borrowed(nb), borrowed(asc)
    fh, fv, fns, fo = borrowed(fh), borrowed(fv), borrowed(fns), borrowed(fo)
    a_row, a_field, a_sidx, a_val = (borrowed(a_row), borrowed(a_field), borrowed(a_sidx),
                                     borrowed(a_val))  # fmt: skip
    s_off, f_text, f_ns, f_pre = borrowed(s_off), borrowed(f_text), borrowed(f_ns), borrowed(f_pre)
    inter, keep_ns, intercept, sid_hash = (borrowed(inter), borrowed(keep_ns),
                                           borrowed(intercept), borrowed(sid_hash))  # fmt: skip
    out_h, out_v, out_nb, out_no = (borrowed(out_h), borrowed(out_v), borrowed(out_nb),
                                    borrowed(out_no))  # fmt: skip
    order, members = borrowed(order), borrowed(members)
    indptr, cur, undo = borrowed(indptr), borrowed(cur), borrowed(undo)
    want_names = mode == NAMED
    pre_i = intercept.shape[0]
    mask_bits = 0  # mask is 2**mask_bits - 1
    while (mask >> mask_bits) > 0:
        mask_bits += 1
    n_atoms = a_row.shape[0]
    r, a, nf, phase = cur[_R], cur[_A], cur[_NF], cur[_PHASE]
    t, n_plain, n_out, n_undo = cur[_T], cur[_NPLAIN], cur[_NOUT], cur[_NUNDO]
    named = cur[_NAMED]  # the most named atoms of a row
    code = OK
    need = 0
    err_f = -1
    while r < n_rows:
        if phase == _BEGIN:  # (nb and fh hold the intercept from the start)
            nf = 0
            if pre_i > 0:
                for i in range(pre_i):  # (a slice would be an array made per row)
                    nb[i] = intercept[i]
                fh[0], fv[0], fns[0], fo[1] = pre_h, 1.0, -1, pre_i
                nf = 1
            phase = _ATOMS
        if phase == _ATOMS:
            while a < n_atoms and a_row[a] == r:
                f = a_field[a]
                sid = a_sidx[a]
                s, e = s_off[sid], s_off[sid + 1]
                ti = f_text[f]
                keep = want_names or keep_ns[f_ns[f]]
                if ti < 0 and not keep:  # hashed before the rows
                    fh[nf], fv[nf], fns[nf], fo[nf + 1] = sid_hash[sid], a_val[a], f_ns[f], fo[nf]
                    nf += 1
                elif ti < 0:  # a named feature: prefix (e.g. "job=") + the string
                    q = fo[nf]  # (fh has room: see ``named``)
                    p0, p1 = f_pre[f, 0], f_pre[f, 1]
                    if q + p1 - p0 + 4 * (e - s) > nb.shape[0]:
                        code, need = _NEED_NB, q + p1 - p0 + 4 * (e - s)
                        break
                    for i in range(p0, p1):
                        nb[q] = prefixes[i]
                        q += 1
                    for i in range(s, e):
                        q = put_utf8(nb, q, cps[i])
                    if sid_hash[sid] < 0:
                        sid_hash[sid] = murmur3(nb, fo[nf], q)
                    fh[nf], fv[nf], fns[nf], fo[nf + 1] = sid_hash[sid], a_val[a], f_ns[f], q
                    nf += 1
                else:
                    u, short = text_features(
                        cps, s, e, lower_tab, tok_tab, asc, tp[ti, TP_LOWER] != 0, tp[ti, TP_WN],
                        tp[ti, TP_SKIPS], tp[ti, TP_CMIN], tp[ti, TP_CMAX],
                        tp[ti, TP_ACROSS] != 0, prefixes, tp[ti, TP_WPRE_S], tp[ti, TP_WPRE_E],
                        tp[ti, TP_CPRE_S], tp[ti, TP_CPRE_E], keep,
                        NGRAMS_PER_FEATURE * max_feat, si, tb, pb, so, table, nb, fo[nf],
                    )  # fmt: skip
                    if u == -1:
                        code, err_f = TOO_MANY_NGRAMS, f
                        break
                    if u == -2:
                        code, need = _NEED_NB, short
                        break
                    if nf + u > max_feat:
                        code, err_f = TOO_MANY, f
                        break
                    if _short(fh, fo, nf + u + named + 1):  # and the named atoms after it
                        code, need = _NEED_F, max(nf + u + named + 1, 2 * fh.shape[0])
                        break
                    if update and tp[ti, TP_IDF] >= 0 and n_undo + u > undo.shape[0]:
                        code, need = _NEED_UNDO, max(n_undo + u, 2 * undo.shape[0])
                        break
                    n_undo = _weights(so, u, tp, ti, df, docs, mask, update, fv, nf, table,
                                      undo, n_undo)  # fmt: skip
                    base, ns = fo[nf], f_ns[f]
                    for k in range(u):  # names, when kept, are in nb from base on
                        fh[nf + k], fns[nf + k] = so[HASH, k], ns
                        fo[nf + k + 1] = so[NOFF, k + 1] if keep else base
                    nf += u
                if nf > max_feat:
                    code, err_f = TOO_MANY, f
                    break
                a += 1
            if code != OK:
                break
            n_plain = nf
            t = 0
            phase = _INTER
        if phase == _INTER:
            if inter.shape[0] > 0 and members.shape[1] < n_plain:
                code, need = _NEED_MEMBERS, 2 * n_plain
                break
            while t < inter.shape[0]:
                nf, code, need = _interact(inter, t, n_plain, nf, fh, fv, fns, fo, nb, max_feat,
                                           members)  # fmt: skip
                if code != OK:
                    break
                if nf > max_feat:
                    code, err_f = TOO_MANY, -1
                    break
                t += 1
            if code != OK:
                break
            phase = _OUT
        # _OUT: the row written out
        if n_out + nf > out_h.shape[0]:
            code, need = _NEED_OUT, max(n_out + nf, 2 * out_h.shape[0])
            break
        if mode == HASHES:  # as generated, without names
            for k in range(nf):
                out_h[n_out + k] = fh[k]
                out_v[n_out + k] = fv[k]
        elif want_names:  # as generated: one entry per name
            if out_no[n_out] + fo[nf] > out_nb.shape[0]:
                code, need = _NEED_NAMES, max(out_no[n_out] + fo[nf], 2 * out_nb.shape[0])
                break
            for k in range(nf):
                out_h[n_out + k] = fh[k] & mask
                out_v[n_out + k] = fv[k]
            for i in range(fo[nf]):  # (a slice assignment calls a shape check)
                out_nb[out_no[n_out] + i] = nb[i]
            for k in range(nf):
                out_no[n_out + k + 1] = out_no[n_out] + fo[k + 1]
        else:  # canonical: columns ascending, a repeated column summed in generation order
            if 6 * nf + 8 > order.shape[0]:
                code, need = _NEED_ORDER, nf
                break
            nf = _canonical(fh, fv, nf, mask, mask_bits, out_h, out_v, n_out, order)
        n_out += nf
        indptr[r + 1] = n_out
        r += 1
        phase = _BEGIN
    cur[_R], cur[_A], cur[_NF], cur[_PHASE] = r, a, nf, phase
    cur[_T], cur[_NPLAIN], cur[_NOUT], cur[_NEED], cur[_EF] = t, n_plain, n_out, need, err_f
    cur[_NUNDO] = n_undo
    return code


@numba.njit(cache=True, inline="always")
def _short(fh: np.ndarray, fo: np.ndarray, need: int) -> bool:
    """Whether fh (and fv, fns: fh's length) and fo lack room for ``need`` features."""
    return need > fh.shape[0] or need + 1 > fo.shape[0]
