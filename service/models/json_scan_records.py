"""The record reader of the records scanner (:mod:`service.models.fast_json_records`):
one record object to atoms (:func:`_record`), with its pieces: a value skipped (an
ignored field), a key matched against the config's field names, and a string value put
in the batch's string table (a repeated
plain string of a field stored once, so the row kernel hashes a repeated category once
per batch, as the encoder's own string table does).

Every helper returns -1 (as the index) for "not read here" and never raises; the record
reader and its string reader are inlined into the kernel at numba IR level, the rarer
paths (a value skipped, a key looked up, an escaped string decoded) and the number
reader are compiled once and called. numba's on-disk cache of a kernel follows every
module it inlines (``learners._kernel_cache``).
"""

from __future__ import annotations

import math

import numpy as np

from learners.records._scan_tables import CATEGORICAL, NUM_BINS, NUM_LOG1P, TEXT
from service.models.json_scan_bytes import (
    _after_element,
    _after_member,
    _at,
    _Buf,
    _inline,
    _kernel,
    _string_end,
    _ws,
)
from service.models.json_scan_keys import _text_ok
from service.models.json_scan_numbers import _number
from service.models.json_scan_strings import _decode
from service.models.json_scan_words import _ascii, _is_name, _plain_end, _same_part

_U1 = np.uint64(1)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


@_kernel  # (an ignored field: compiled once, called)
def _skip_value(buf: _Buf, i: int, n: int, cps: np.ndarray, nc: int) -> int:
    """Past the value at ``buf[i]`` of a field the config ignores: a string, a number,
    true, false or null (anything else, an object or array, gives -1: the general path
    reads it). The string is decoded into ``cps[nc:]`` only to check it."""
    c = _at(buf, i)
    if c == 34:
        return _decode(buf, i + 1, n, cps, nc)[0]
    if c == 45 or 48 <= c <= 57:
        return _number_call(buf, i, n)[0]
    if c == 116 and i + 4 <= n and _at(buf, i + 1) == 114 and _at(buf, i + 2) == 117:
        return i + 4 if _at(buf, i + 3) == 101 else -1  # true
    if c == 102 and i + 5 <= n and _at(buf, i + 1) == 97 and _at(buf, i + 2) == 108:
        return i + 5 if _at(buf, i + 3) == 115 and _at(buf, i + 4) == 101 else -1  # false
    if _null(buf, i, n):
        return i + 4
    return -1


@_inline
def _null(buf: _Buf, i: int, n: int) -> bool:
    return (
        i + 4 <= n
        and _at(buf, i) == 110
        and _at(buf, i + 1) == 117
        and _at(buf, i + 2) == 108
        and _at(buf, i + 3) == 108
    )


@_kernel  # (a key not the one expected)
def _field_of(
    buf: _Buf, ks: int, ke: int, names: np.ndarray, offsets: np.ndarray, hint: int
) -> int:
    """The field whose name is the key ``buf[ks:ke]`` (escape-free), tried from field
    ``hint`` on, or -1; -2 for a key that is not valid UTF-8."""
    nf = offsets.shape[0] - 1
    ln = ke - ks
    for t in range(nf):
        j = hint + t
        if j >= nf:
            j -= nf
        a = offsets[j]
        if offsets[j + 1] - a != ln:
            continue
        same = True
        for q in range(ln):
            if _at(buf, ks + q) != names[a + q]:
                same = False
                break
        if same:
            return j
    return -1 if _text_ok(buf, ks, ke) else -2


@_inline
def _string(
    buf: _Buf,
    i: int,
    n: int,
    field: int,
    cps: np.ndarray,
    s_off: np.ndarray,
    s_field: np.ndarray,
    s_raw: np.ndarray,
    table: np.ndarray,
    ns: int,
) -> tuple[int, int, int, int]:
    """The string whose opening quote is at ``buf[i]``, as a string of the batch's table:
    (index after it, its string index, the new string count, its UTF-8 length), or
    (-1, 0, ns, 0). A plain string (printable ASCII, no escape) equal to an earlier one
    of the same field is that one, found by its bytes and not decoded again (``table``,
    a power of two, -1 empty, maps a hash to a string index; half full, it takes no
    more; the hash only picks where a string is looked for: a string is in the table
    once, so which one matches does not depend on it); any other is decoded into a new
    string (a plain one's code points are its bytes). (A string stored twice changes no
    feature: the row kernel hashes each string index once.)"""
    s = i + 1
    k, plain, h = _plain_end(buf, s, n, (np.uint64(field) + _U1) * _GOLD)
    if k >= n:
        return -1, 0, ns, 0
    size = table.shape[0]
    tmask = np.uint64(size - 1)
    free = -1
    ln = k - s
    if plain:
        slot = h & tmask
        for _probe in range(size):
            sid = table[slot]
            if sid < 0:
                free = np.int64(slot)  # type: ignore[assignment]  # (numba: one int64)
                break
            if (
                s_field[sid] == field
                and s_raw[2 * sid + 1] == ln
                and _same_part(buf, s_raw[2 * sid], n, buf, s, n, ln)
            ):
                return k + 1, sid, ns, ln
            slot = (slot + _U1) & tmask
        # a plain string's code points are its bytes
        e, nc, nbytes = k + 1, _ascii(buf, s, ln, cps, s_off[ns]), ln
        if nc < 0:
            return -1, 0, ns, 0
    else:
        e, nc, nbytes = _decode(buf, s, n, cps, s_off[ns])
        if e < 0:
            return -1, 0, ns, 0
    s_off[ns + 1] = nc
    s_field[ns] = field
    s_raw[2 * ns] = s
    s_raw[2 * ns + 1] = ln
    if free >= 0 and 2 * (ns + 1) < size:
        table[free] = ns
    return e, ns, ns + 1, nbytes


@_inline  # (a call passes ~25 arrays as structs: per record, it shows)
def _record(
    buf: _Buf,
    i: int,
    n: int,
    row: int,
    t_names: np.ndarray,
    t_off: np.ndarray,
    t_kind: np.ndarray,
    t_base: np.ndarray,
    t_edges: np.ndarray,
    t_eoff: np.ndarray,
    refuse: bool,
    max_text: int,
    plain_keys: bool,
    cps: np.ndarray,
    s_off: np.ndarray,
    s_field: np.ndarray,
    s_raw: np.ndarray,
    table: np.ndarray,
    seen: np.ndarray,
    follow: np.ndarray,
    a_row: np.ndarray,
    a_field: np.ndarray,
    a_sidx: np.ndarray,
    a_val: np.ndarray,
    na: int,
    ns: int,
) -> tuple[int, int, int]:
    """The record object whose ``{`` is at ``buf[i]``: its atoms appended (row ``row``),
    then ordered by field (stable); returns (index after the ``}``, atoms, strings), or
    (-1, ...) for anything the general path must read. ``plain_keys``: no field name
    holds a quote, backslash or control byte, so a key can be compared with the name
    expected next in place (its closing quote included) before it is scanned."""
    fail = (-1, na, ns)
    acap = a_row.shape[0]
    scap = s_off.shape[0] - 1
    na0 = na
    i = _ws(buf, i + 1, n)
    if i < n and _at(buf, i) == 125:  # {}: no field
        return i + 1, na, ns
    # the field tried first: the one that followed the previous key in an earlier
    # record (``follow[nf]`` the first key's), as records of a stream share their order
    nf = follow.shape[0] - 1
    prev = nf
    while True:
        if i >= n or _at(buf, i) != 34:
            return fail
        ks = i + 1
        j = follow[prev]
        ln = t_off[j + 1] - t_off[j] if j < nf else -1
        if plain_keys and ln >= 0 and _is_name(buf, ks, n, t_names, t_off[j], ln):
            ke = ks + ln  # the key the records before had here
        else:
            ke = _string_end(buf, ks, n)
            if ke < 0:  # an escape or a control character in the key
                return fail
            j = _field_of(buf, ks, ke, t_names, t_off, j)
        i = _ws(buf, ke + 1, n)
        if j == -2 or i >= n or _at(buf, i) != 58:
            return fail
        i = _ws(buf, i + 1, n)
        if i >= n:
            return fail
        if j < 0:
            if refuse:
                return fail
            i = _skip_value(buf, i, n, cps, s_off[ns])
            if i < 0:
                return fail
        else:
            if seen[j] == row:  # a repeated key: orjson keeps the last value
                return fail
            seen[j] = row
            follow[prev] = j
            prev = j
            kind = t_kind[j]
            c = _at(buf, i)
            if _null(buf, i, n):
                i += 4
            elif kind <= NUM_BINS:
                if not (c == 45 or 48 <= c <= 57):
                    return fail
                i, x = _number_call(buf, i, n)
                if i < 0:
                    return fail
                sidx = t_base[j]
                if kind == NUM_BINS:
                    b = 0
                    for k in range(t_eoff[j], t_eoff[j + 1]):
                        if t_edges[k] <= x:
                            b += 1
                    sidx += b
                    x = 1.0
                elif kind == NUM_LOG1P:
                    x = math.copysign(math.log1p(abs(x)), x)
                if x != 0.0:
                    if na >= acap:
                        return fail
                    a_row[na], a_field[na], a_sidx[na], a_val[na] = row, j, sidx, x
                    na += 1
            elif c == 34 or (c == 91 and kind == CATEGORICAL):
                in_list = c == 91
                more = True
                first = na
                if in_list:
                    i = _ws(buf, i + 1, n)
                    if i < n and _at(buf, i) == 93:  # []
                        i += 1
                        more = False
                while more:
                    if i >= n or _at(buf, i) != 34 or ns >= scap or na >= acap:
                        return fail
                    i, sid, ns, nbytes = _string(
                        buf, i, n, j, cps, s_off, s_field, s_raw, table, ns
                    )
                    if i < 0 or (kind == TEXT and nbytes > max_text):
                        return fail
                    dup = False
                    for k in range(first, na):  # a list's repeated string: one feature
                        p, q = a_sidx[k], sid
                        if p == q or (
                            s_off[p + 1] - s_off[p] == s_off[q + 1] - s_off[q]
                            and _same(cps, s_off[p], s_off[q], s_off[q + 1] - s_off[q])
                        ):
                            dup = True
                            break
                    if not dup:
                        a_row[na], a_field[na], a_sidx[na] = row, j, sid
                        a_val[na] = 0.0 if kind == TEXT else 1.0
                        na += 1
                    if not in_list:
                        break
                    i, closed = _after_element(buf, i, n)
                    if i < 0:
                        return fail
                    if closed:
                        break
            else:
                return fail
        i, closed = _after_member(buf, i, n)
        if i < 0:
            return fail
        if closed:
            break
        i = _ws(buf, i, n)
    # the encoder's order: by field, stable (a list's strings keep theirs)
    for k in range(na0 + 1, na):
        f, s, v = a_field[k], a_sidx[k], a_val[k]
        q = k - 1
        while q >= na0 and a_field[q] > f:
            a_field[q + 1], a_sidx[q + 1], a_val[q + 1] = a_field[q], a_sidx[q], a_val[q]
            q -= 1
        a_field[q + 1], a_sidx[q + 1], a_val[q + 1] = f, s, v
    return i, na, ns


@_kernel
def _number_call(buf: _Buf, i: int, n: int) -> tuple[int, float]:
    """:func:`_number` compiled once and called (a record's numbers: not inlined into
    the record reader, whose compile it would make much larger; a call is a few ns)."""
    return _number(buf, i, n)


@_kernel
def _same(cps: np.ndarray, a: int, b: int, ln: int) -> bool:
    for t in range(ln):  # noqa: SIM110 - a loop numba compiles well
        if cps[a + t] != cps[b + t]:
            return False
    return True
