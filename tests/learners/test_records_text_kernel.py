"""The fast text kernel (scratch made once, names hashed as streamed pieces, distinct
names counted as they come) against the kernel it replaced
(``_text_kernel_reference``), bit for bit: hashes, counts and names, on the real SMS
texts and on fuzzed Unicode texts, for words with skips, character n-grams within and
across words, lower-casing or not, names kept or not; and the canonical rows' in-place
sort against a stable argsort."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners.records._row_parts import _canonical
from learners.records._text_kernel import (
    COUNT,
    HASH,
    NOFF,
    ascii_table,
    occ_cap,
    occ_room,
    text_features,
    text_room,
)
from learners.records._unicode import lower_table, token_chars
from tests.learners._text_kernel_reference import reference_text_features

pytest_plugins = ["tests.learners.test_records_quality"]  # the sms fixture

LOW, TOK = lower_table(), token_chars()
ASC = ascii_table(LOW, TOK)
WPRE = np.frombuffer(b"text^", np.uint8).copy()
CPRE = np.frombuffer("t\u00e9xt~".encode(), np.uint8).copy()  # a prefix of 6 bytes
# (lowercase, wn, skips, cmin, cmax, across)
SETTINGS = [
    (True, 2, 0, 0, 0, False),  # VW's --ngram 2 features
    (True, 1, 0, 3, 5, False),  # the served SMS config
    (False, 3, 2, 2, 4, True),
    (True, 2, 1, 1, 6, False),
    (True, 0, 0, 4, 4, True),
]


def fast(cps: np.ndarray, setting: tuple[Any, ...], keep: bool, max_occ: int = 10**6) -> Any:
    """One text through the fast kernel, scratch sized as the row kernel sizes it; the
    names written after 3 bytes already in the buffer (as after earlier features)."""
    low, wn, skips, cmin, cmax, across = setting
    si, tb, pb = text_room(cps.shape[0])
    so, table = occ_room(occ_cap(cps.shape[0], wn, skips, cmin, cmax, max_occ))
    names = np.full(3, 7, np.uint8)  # short: the kernel asks for more, as the row kernel grows it
    pre = np.concatenate([WPRE, CPRE])
    w1 = WPRE.shape[0]
    while True:
        u, need = text_features(
            cps, 0, cps.shape[0], LOW, TOK, ASC, low, wn, skips, cmin, cmax, across,
            pre, 0, w1, w1, pre.shape[0], keep, max_occ, si, tb, pb, so, table, names, 3,
        )  # fmt: skip
        if u != -2:
            break
        assert (table == -1).all() and need > names.shape[0]
        names = np.concatenate([names, np.zeros(need - names.shape[0], np.uint8)])
    assert (table == -1).all()  # left clear for the next text
    if u < 0:
        return u, None, None, None
    assert (names[:3] == 7).all()
    offs = so[NOFF, : u + 1] - 3 if keep else np.zeros(u + 1, np.int64)
    return u, so[HASH, :u].copy(), so[COUNT, :u].copy(), (names[3 : 3 + offs[-1]].copy(), offs)


def check(cps: np.ndarray, setting: tuple[Any, ...], max_occ: int = 10**6) -> None:
    low, wn, skips, cmin, cmax, across = setting
    for keep in (False, True):
        h, c, nm, no = reference_text_features(
            cps,
            0,
            cps.shape[0],
            LOW,
            TOK,
            low,
            wn,
            skips,
            cmin,
            cmax,
            across,
            WPRE,
            CPRE,
            keep,
            max_occ,
        )
        u, fh, fc, names = fast(cps, setting, keep, max_occ)
        if h.shape[0] == 1 and h[0] < 0:
            assert u == -1
            continue
        assert u == h.shape[0]
        assert fh.tobytes() == h.tobytes() and fc.tobytes() == c.tobytes()
        if keep:
            assert names[0].tobytes() == nm.tobytes() and names[1].tobytes() == no.tobytes()


def codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), np.uint32).copy()


@pytest.mark.parametrize("setting", SETTINGS)
def test_real_sms_texts_equal_the_reference(sms: Any, setting: tuple[Any, ...]) -> None:
    tr, _, te, _ = sms
    for rec in (tr + te)[::3]:
        check(codes(rec["text"]), setting)


def test_fuzzed_texts_equal_the_reference() -> None:
    rng = np.random.default_rng(22)
    alphabet = list("aAbB zZ,.-'\u00e9\u00c9\u0130\u0301\u4e2d\u0928\u093f \U0001f600\n\t1234")
    for i in range(3000):
        n = int(rng.integers(0, 40))
        text = (
            "".join(rng.choice(alphabet, n))
            if i % 4
            else "".join(
                chr(int(c)) for c in rng.integers(1, 0x10FFFF, n) if not 0xD800 <= c < 0xE000
            )
        )
        check(codes(text), SETTINGS[i % len(SETTINGS)])


def test_texts_over_the_limit_are_refused_as_before() -> None:
    text = codes("a b c d e f g h i j k l m n o p")
    for max_occ in (5, 16, 17, 40, 200):
        for setting in SETTINGS:
            check(text, setting, max_occ)


@pytest.mark.parametrize("nf", [1, 5, 16, 17, 31, 32, 33, 60, 255, 256, 257, 500])
@pytest.mark.parametrize("bits", [3, 8, 20, 31])
def test_canonical_rows_equal_a_stable_sort(nf: int, bits: int) -> None:
    """Every sort _canonical picks (ranks, buckets, numba's sort), with few columns (many
    repeats, summed in generation order) and many, and keys crowded into one bucket."""
    rng = np.random.default_rng(nf * 100 + bits)
    mask = 2**bits - 1
    for trial in range(50):
        fh = rng.integers(0, 2**32, nf)
        if trial % 5 == 0:  # all in the lowest bucket: the insertion sort does the work
            fh = fh & (2 ** max(0, bits - 9) - 1)
        fv = rng.standard_normal(nf)
        out_c, out_v = np.zeros(nf, np.int64), np.zeros(nf)
        scratch = np.full(6 * nf + 8, -7, np.int64)
        w = _canonical(fh, fv, nf, mask, bits, out_c, out_v, 0, scratch)
        order = np.argsort(fh & mask, kind="stable")
        cols, vals = [], []
        for i in order:
            if cols and cols[-1] == fh[i] & mask:
                vals[-1] += fv[i]
            else:
                cols.append(int(fh[i] & mask))
                vals.append(float(fv[i]))
        assert out_c[:w].tolist() == cols
        assert out_v[:w].tobytes() == np.array(vals).tobytes()
