"""Text fields of the records encoder against a plain-Python reading of the documented
rules (tokens, word n-grams with skips, character n-grams, weights), on Unicode text;
and the compiled MurmurHash3 against :func:`learners.feature_keys.murmurhash3_32`."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from learners.feature_keys import murmurhash3_32
from learners.records import RecordEncoder
from learners.records._hash_kernels import murmur3
from learners.records._unicode import lower_table, token_chars

TOK = token_chars()
LOW = lower_table()


def py_tokens(text: str, lower: bool = True) -> list[str]:
    if lower:
        text = "".join(chr(LOW[ord(c)]) for c in text)
    out, cur = [], ""
    for c in text:
        if TOK[ord(c)]:
            cur += c
        elif cur:
            out.append(cur)
            cur = ""
    return [*out, cur] if cur else out


def py_words(toks: list[str], n_max: int, skips: int) -> list[str]:
    out = []
    for n in range(1, n_max + 1):
        for start in range(len(toks)):
            seqs = [[start]]
            for _ in range(n - 1):
                seqs = [[*s, s[-1] + 1 + g] for s in seqs for g in range(skips + 1)]
            out += [" ".join(toks[i] for i in s) for s in seqs if s[-1] < len(toks)]
    return out


def py_chars(toks: list[str], lo: int, hi: int, across: bool) -> list[str]:
    if not toks:
        return []
    seqs = [" " + " ".join(toks) + " "] if across else [f" {t} " for t in toks]
    out = []
    for s in seqs:
        for n in range(lo, hi + 1):
            out += [s[i : i + n] for i in range(max(1, len(s) - n + 1))]
            if len(s) <= n:
                break
    return out


def text_encoder(bits: int = 18, intercept: bool = False, **text: Any) -> RecordEncoder:
    return RecordEncoder(
        {
            "kind": "records",
            "bits": bits,
            "intercept": intercept,
            "fields": {"t": {"type": "text", **text}},
        }
    )


def names_of(enc: RecordEncoder, text: str) -> list[str]:
    return [n for n, _, _ in enc.explain({"t": text})]


def test_tokens_on_unicode_text() -> None:
    text = "Hello, WÖRLD! naïve cafe\u0301 123 x_y हिन्दी İstanbul don't 東京タワー I ❤ NY 🎉"
    expect = ["hello", "wörld", "naïve", "cafe\u0301", "123", "x", "y", "हिन्दी", "istanbul",
              "don", "t", "東京タワー", "i", "ny"]  # fmt: skip
    assert py_tokens(text) == expect
    enc = text_encoder(normalize=False, weighting="binary")
    assert names_of(enc, text) == [f"t^{w}" for w in expect]
    upper = text_encoder(lowercase=False)
    assert names_of(upper, "Ab ab AB")[:3] == ["t^Ab", "t^ab", "t^AB"]


def test_unicode_tables_follow_python() -> None:
    for c in range(0, 0x110000, 97):  # a sample of every plane; U+0130 checked below
        ch = chr(c)
        if 0xD800 <= c < 0xE000:
            continue
        low = ch.lower()
        assert LOW[c] == (ord(low) if len(low) == 1 else ord(low[0])), hex(c)
        assert bool(TOK[c]) == (ch.isalnum() or __import__("unicodedata").category(ch)[0] == "M")
    assert chr(LOW[0x130]) == "i"


def test_word_ngrams_and_skips() -> None:
    enc = text_encoder(words={"ngrams": 2, "skips": 1}, weighting="binary", normalize=False)
    assert names_of(enc, "a b c d") == [
        "t^a", "t^b", "t^c", "t^d", "t^a b", "t^a c", "t^b c", "t^b d", "t^c d",
    ]  # fmt: skip
    tri = text_encoder(words={"ngrams": 3, "skips": 0}, weighting="binary", normalize=False)
    assert names_of(tri, "x y z")[-1] == "t^x y z"


def test_char_ngrams_within_and_across_words() -> None:
    enc = text_encoder(words=None, chars={"ngrams": [2, 4]}, weighting="binary")
    assert names_of(enc, "ab") == ["t~ a", "t~ab", "t~b ", "t~ ab", "t~ab ", "t~ ab "]
    across = text_encoder(words=None, chars={"ngrams": 3, "across_words": True})
    assert names_of(across, "ab, cd") == ["t~ ab", "t~ab ", "t~b c", "t~ cd", "t~cd "]
    assert names_of(across, "?!") == []  # no tokens: no features


def test_counts_weights_and_norm() -> None:
    text = "spam spam spam eggs"
    for weighting, w in (
        ("binary", [1, 1]),
        ("tf", [3, 1]),
        ("log_tf", [math.log(4), math.log(2)]),
    ):
        raw = text_encoder(weighting=weighting, normalize=False).explain({"t": text})
        assert [(n, v) for n, _, v in raw] == [("t^spam", w[0]), ("t^eggs", w[1])]
        normed = text_encoder(weighting=weighting).explain({"t": text})
        norm = math.hypot(*w)
        assert [v for _, _, v in normed] == pytest.approx([w[0] / norm, w[1] / norm], rel=1e-15)


def test_log_tf_is_the_c_librarys_log1p_of_every_count() -> None:
    """Counts below 64 are read from a table made with math.log1p, larger ones computed in
    the kernel: both must be exactly C's log1p (a replica or an older model's vectors)."""
    counts = [1, 2, 3, 7, 63, 64, 65, 200]
    text = " ".join(f"w{c} " * c for c in counts)
    feats = text_encoder(weighting="log_tf", normalize=False).explain({"t": text})
    assert [(n, v) for n, _, v in feats] == [(f"t^w{c}", math.log1p(c)) for c in counts]


ALPHABET = [*"abcAB  ,.-'1", "é", "e\u0301", "ß", "İ", "Σ", "ς", "ж", "東", "😀", "\t", "ि"]


def test_random_texts_match_the_python_rules() -> None:
    rng = np.random.default_rng(5)
    configs: list[dict[str, Any]] = [
        dict(words={"ngrams": 3, "skips": 2}, chars={"ngrams": [1, 4]}),
        dict(words={"ngrams": 2, "skips": 0}, chars={"ngrams": [3, 5], "across_words": True}),
        dict(words={"ngrams": 1}, lowercase=False, chars={"ngrams": 2}),
    ]
    for conf in configs:
        enc = text_encoder(bits=16, weighting="tf", normalize=False, **conf)
        lower = conf.get("lowercase", True)
        words, chars = conf["words"], conf["chars"]
        for _ in range(60):
            text = "".join(rng.choice(ALPHABET, size=int(rng.integers(0, 40))))
            toks = py_tokens(text, lower)
            expect = Counter(
                [f"t^{w}" for w in py_words(toks, words["ngrams"], words.get("skips", 0))]
                + [
                    f"t~{c}"
                    for c in py_chars(
                        toks, *_range(chars["ngrams"]), chars.get("across_words", False)
                    )
                ]
            )
            got = enc.explain({"t": text})
            assert {n: v for n, _, v in got} == {n: float(c) for n, c in expect.items()}, text
            assert len(got) == len(expect)  # each name once (distinct full hashes)
            for name, col, _ in got:
                assert col == murmurhash3_32(name) & 0xFFFF
            row = enc.encode([{"t": text}])
            assert np.all(np.diff(row.indices) > 0)  # canonical: ascending, distinct
            sums: dict[int, float] = {}
            for _, col, v in got:
                sums[col] = sums.get(col, 0.0) + v
            assert dict(zip(row.indices.tolist(), row.values.tolist(), strict=True)) == sums


def _range(n: Any) -> tuple[int, int]:
    return (n[0], n[1]) if isinstance(n, list) else (n, n)


def test_compiled_murmur_equals_python() -> None:
    rng = np.random.default_rng(0)
    for length in [*range(24), 100, 1001]:
        for _ in range(5):
            data = rng.integers(0, 256, size=length, dtype=np.uint8)
            buf = np.concatenate([rng.integers(0, 256, 3, dtype=np.uint8), data])
            assert murmur3(buf, 3, 3 + length) == murmurhash3_32(data.tobytes())
