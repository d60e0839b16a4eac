"""The records encoder: numeric transforms and bin edges, categoricals, interactions,
errors naming the field, limits, and the statistics (standardize, idf): encoded with the
records before, the same whatever the batches, and a JSON state exact to the bit."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from learners.csr_batch import FeatureError
from learners.feature_keys import murmurhash3_32
from learners.features import FeatureSpec
from learners.records import INTERCEPT_NAME, RecordEncoder


def enc_of(fields: dict[str, Any], **top: Any) -> RecordEncoder:
    return RecordEncoder(
        {"kind": "records", "bits": 16, "intercept": False, **top, "fields": fields}
    )


def named(enc: RecordEncoder, rec: dict[str, Any]) -> dict[str, float]:
    return {n: v for n, _, v in enc.explain(rec)}


def test_numeric_transforms() -> None:
    for tr, x, expect in [
        ("none", -2.5, {"a": -2.5}),
        ("log1p", 9.0, {"a": math.log(10.0)}),
        ("log1p", -9.0, {"a": -math.log(10.0)}),
        ("none", 0, {}),  # a zero value is no feature
    ]:
        assert named(enc_of({"a": {"type": "numeric", "transform": tr}}), {"a": x}) == expect


@pytest.mark.parametrize(
    ("x", "k"),
    [(-1e9, 0), (17.999, 0), (18, 1), (30.4, 1), (30.5, 2), (64.9, 2), (65, 3), (1e9, 3)],
)
def test_bin_edges(x: float, k: int) -> None:
    enc = enc_of({"age": {"type": "numeric", "transform": {"bins": [18, 30.5, 65]}}})
    assert named(enc, {"age": x}) == {f"age#{k}": 1.0}


def test_names_hash_as_documented_and_as_the_hashed_kind() -> None:
    enc = RecordEncoder({"kind": "records", "bits": 20, "fields": {
        "age": {"type": "numeric"}, "job": {"type": "categorical"}}})  # fmt: skip
    rec = {"age": 39, "job": "clerk"}
    got = enc.explain(rec)
    assert [n for n, _, _ in got] == [INTERCEPT_NAME, "age", "job=clerk"]
    for name, col, _ in got:
        assert col == murmurhash3_32(name) & (2**20 - 1)
    hashed = FeatureSpec.hashed(20).encode([rec])
    row = enc.encode([rec])
    assert set(hashed.indices.tolist()) <= set(row.indices.tolist())


def test_categorical_lists_are_one_hot_sets() -> None:
    enc = enc_of({"tags": {"type": "categorical"}})
    assert named(enc, {"tags": ["a", "b", "a", ""]}) == {"tags=a": 1, "tags=b": 1, "tags=": 1}
    assert named(enc, {"tags": []}) == {}


def test_interactions_pairs_and_triples() -> None:
    enc = enc_of(
        {"a": {"type": "numeric", "namespace": "n"}, "b": {"type": "numeric", "namespace": "n"},
         "c": {"type": "categorical", "namespace": "c"}},
        interactions=[["c", "n"], ["n", "n"], ["c", "n", "n"]],
    )  # fmt: skip
    got = named(enc, {"a": 2.0, "b": -3.0, "c": ["x", "y"]})
    assert got == {
        "a": 2.0, "b": -3.0, "c=x": 1.0, "c=y": 1.0,
        "c=x*a": 2.0, "c=x*b": -3.0, "c=y*a": 2.0, "c=y*b": -3.0,
        "a*b": -6.0,  # a repeated namespace: each unordered pair of distinct features once
        "c=x*a*b": -6.0, "c=y*a*b": -6.0,
    }  # fmt: skip


def test_rows_are_the_sums_of_their_explained_features() -> None:
    """A batch (strings shared between rows, hashed once) gives each row the canonical
    sum of what explain lists for the record alone (bits 6: many collisions)."""
    enc = RecordEncoder(
        {"kind": "records", "bits": 6,
         "fields": {"a": {"type": "numeric", "namespace": "n"},
                    "b": {"type": "numeric", "transform": {"bins": [0.0]}, "namespace": "n"},
                    "c": {"type": "categorical"}, "d": {"type": "categorical"},
                    "t": {"type": "text", "chars": {"ngrams": [2, 3]}}},
         "interactions": [["c", "n"], ["c", "d"]]}
    )  # fmt: skip
    rng = np.random.default_rng(1)
    cats = ["x", "y", "zé", "", "x y"]
    recs = []
    for _ in range(200):
        r: dict[str, Any] = {"a": float(rng.normal()), "b": float(rng.normal())}
        r["c"] = [str(rng.choice(cats)) for _ in range(int(rng.integers(0, 4)))]
        r["d"] = str(rng.choice(cats))
        if rng.random() < 0.3:
            r["t"] = " ".join(rng.choice(cats, size=3))
        recs.append(r)
    batch = enc.encode(recs)
    for i, rec in enumerate(recs):
        sums: dict[int, float] = {}
        for _, col, v in enc.explain(rec):
            sums[col] = sums.get(col, 0.0) + v
        idx, vals = batch.row(i)
        assert idx.tolist() == sorted(sums)
        assert vals.tolist() == pytest.approx([sums[c] for c in sorted(sums)], rel=1e-12)


def test_long_records_grow_every_buffer_and_keep_their_rows() -> None:
    """Records far past the row kernel's first buffer sizes (features, name bytes, the
    interactions' members, the output, the sort's scratch: each grown while the batch is
    made, the kernel going on where it stopped) give the rows explain gives one by one,
    in every mode: canonical, named (names in order), and with the statistics of idf."""
    enc = RecordEncoder(
        {"kind": "records", "bits": 18,
         "fields": {"a": {"type": "numeric", "namespace": "n"},
                    "c": {"type": "categorical", "namespace": "c"},
                    "t": {"type": "text", "namespace": "t", "words": {"ngrams": 2},
                          "chars": {"ngrams": [2, 4]}}},
         "interactions": [["c", "t"], ["n", "c", "c"]]}
    )  # fmt: skip
    rng = np.random.default_rng(7)
    vocab = ["w" * int(k) + "é" for k in rng.integers(1, 60, size=40)]  # names past 256 bytes
    recs = [{"a": float(rng.normal()), "c": [f"cat{int(k)}" for k in rng.integers(0, 50, size=12)],
             "t": " ".join(rng.choice(vocab, size=int(rng.integers(1, 40))))}
            for _ in range(30)]  # fmt: skip
    batch, names = enc.encode_named(recs)
    assert (batch.indptr == enc.encode(recs).indptr).all()
    made: list[str] = []
    for i, rec in enumerate(recs):
        sums: dict[int, float] = {}
        for name, col, v in enc.explain(rec):
            sums[col] = sums.get(col, 0.0) + v
            made.append(name)
        idx, vals = batch.row(i)
        assert len(sums) > 100  # far past the first sizes (16 features, 256 name bytes)
        assert idx.tolist() == sorted(sums)
        assert vals.tolist() == pytest.approx([sums[c] for c in sorted(sums)], rel=1e-12)
    assert names == list(dict.fromkeys(made))
    idf = RecordEncoder({**enc.to_config(), "fields": {**enc.to_config()["fields"], "t": {
        **enc.to_config()["fields"]["t"], "idf": True}}})  # fmt: skip
    one_by_one = RecordEncoder(idf.to_config())
    learned = idf.learn(recs)
    for i, rec in enumerate(recs):
        idx, vals = learned.row(i)
        alone = one_by_one.learn([rec])
        assert idx.tolist() == alone.indices.tolist()
        assert vals.tolist() == alone.values.tolist()
    assert idf.state_digest() == one_by_one.state_digest()


def test_missing_null_and_unknown_fields() -> None:
    fields = {"a": {"type": "numeric"}, "t": {"type": "text"}}
    enc = enc_of(fields)
    b = enc.encode([{}, {"a": None, "t": None}, {"a": None, "zzz": [1, 2]}])
    assert b.indptr.tolist() == [0, 0, 0, 0]
    assert enc.ignored_fields([{"a": 1, "zzz": 0}, {"t": "x", "zzz": 1, "b": 2}]) == {
        "zzz": 2,
        "b": 1,
    }
    # a record of nothing but unknown fields (every name a typo) is refused, not learned
    # as the intercept alone (issue 31 item 2); {} stays the explicit "nothing known"
    with pytest.raises(FeatureError, match=r"^examples\[1\]\.x: none of its fields") as e:
        enc.encode([{"a": 1}, {"A": 1, "tt": "x"}])
    assert "'A', 'tt'" in str(e.value) and "it reads a, t" in str(e.value)
    strict = enc_of(fields, unknown_fields="refuse")
    with pytest.raises(FeatureError, match=r"^examples\[1\]\.x\.zzz: unknown field"):
        strict.encode([{"a": 1}, {"a": 1, "zzz": 0}])


BAD_VALUES = [
    ({"a": "7"}, "examples[1].x.a", "must be a number, got str"),
    ({"a": True}, "examples[1].x.a", "must be a number, got a boolean"),
    ({"a": float("nan")}, "examples[1].x.a", "value is NaN"),
    ({"a": float("-inf")}, "examples[1].x.a", "value is infinite"),
    ({"a": 10**400}, "examples[1].x.a", "too large for a double"),
    ({"s": 1e200}, "examples[1].x.s", "cannot be standardized"),
    ({"c": 3}, "examples[1].x.c", "must be a string or a list of strings, got int"),
    ({"c": ["x", None]}, "examples[1].x.c[1]", "must be a string, got NoneType"),
    ({"t": ["x"]}, "examples[1].x.t", "must be a string, got list"),
    ({"t": "x" * 33}, "examples[1].x.t", "text of 33 UTF-8 bytes exceeds the limit of 32"),
    ({"t": "é" * 17}, "examples[1].x.t", "text of 34 UTF-8 bytes"),
    ({"t": "a\ud800b"}, "examples[1].x.t", "lone surrogate"),
    ({"c": "\udfff"}, "examples[1].x.c", "lone surrogate"),
    ({"my field": "x"}, 'examples[1].x["my field"]', "must be a number"),
]


@pytest.mark.parametrize(("rec", "loc", "problem"), BAD_VALUES, ids=[b[2] for b in BAD_VALUES])
def test_errors_name_the_field(rec: dict[str, Any], loc: str, problem: str) -> None:
    enc = enc_of(
        {"a": {"type": "numeric"}, "s": {"type": "numeric", "transform": "standardize"},
         "c": {"type": "categorical"}, "t": {"type": "text"}, "my field": {"type": "numeric"}},
        max_text_bytes=32,
    )  # fmt: skip
    state = enc.to_state()
    with pytest.raises(FeatureError) as e:
        enc.learn([{"a": 1, "s": 2.0, "t": "ok"}, rec])
    assert e.value.location == loc
    assert problem in e.value.problem
    assert enc.to_state() == state  # nothing learned from a batch with an error


def test_not_records() -> None:
    enc = enc_of({"a": {"type": "numeric"}})
    with pytest.raises(FeatureError, match=r"^examples\[0\]\.x: must be an object, got list"):
        enc.encode([[1.0]])
    with pytest.raises(FeatureError, match="no examples"):
        enc.encode([])


def test_limit_on_features_per_record() -> None:
    text = {"t": {"type": "text", "chars": {"ngrams": [1, 3]}}, "c": {"type": "categorical"}}
    enc = enc_of(text, max_features_per_record=20, interactions=[["c", "t"]])
    with pytest.raises(FeatureError) as e:
        enc.encode([{"t": "ab"}, {"t": "abcdefghij"}])
    assert e.value.location == "examples[1].x.t" and "max_features_per_record = 20" in str(e.value)
    assert len(enc.explain({"t": "ab"})) == 9  # ab; " ", a, b; " a", ab, "b "; " ab", "ab "
    with pytest.raises(FeatureError, match=r"^examples\[0\]\.x: the interactions make more"):
        enc.encode([{"t": "ab", "c": ["p", "q"]}])  # 9 + 2 + 18 > 20
    enc.encode([{"t": "ab", "c": ["p"]}])  # 9 + 1 + 9 <= 20


def test_a_text_of_too_many_ngrams_is_refused_before_it_is_read() -> None:
    words = {"t": {"type": "text", "words": {"ngrams": 5, "skips": 4}}}
    enc = enc_of(words, max_features_per_record=100)
    assert len(enc.explain({"t": "a " * 4})) == 4  # 4 * 781 <= 3200 occurrences, 4 distinct
    with pytest.raises(FeatureError) as e:  # 2000 * (1 + 5 + 25 + 125 + 625) > 32 * 100
        enc.encode([{"t": "a " * 2000}])
    assert e.value.location == "examples[0].x.t" and "more than 3200 n-grams" in e.value.problem


STATEFUL = {
    "kind": "records", "bits": 12,
    "fields": {
        "x": {"type": "numeric", "transform": "standardize"},
        "y": {"type": "numeric", "transform": "standardize"},
        "t": {"type": "text", "idf": True, "chars": {"ngrams": [2, 3]}},
        "u": {"type": "text", "idf": True, "weighting": "binary", "normalize": False},
    },
}  # fmt: skip


def stream(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    words = ["free", "call", "now", "ok", "lar", "ü", "win", "😀"]
    out = []
    for _ in range(n):
        r: dict[str, Any] = {"x": float(rng.normal(50, 10)), "y": float(rng.lognormal(3, 2))}
        if rng.random() < 0.8:
            r["t"] = " ".join(rng.choice(words, size=int(rng.integers(0, 8))))
        if rng.random() < 0.5:
            r["u"] = " ".join(rng.choice(words, size=3))
        if rng.random() < 0.1:
            r["x"] = None
        out.append(r)
    return out


def same_batch(a: Any, b: Any) -> None:
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.values.view(np.uint64), b.values.view(np.uint64))


def test_statistics_do_not_depend_on_batching() -> None:
    recs = stream(100)
    one = RecordEncoder(STATEFUL)
    whole = one.learn(recs)
    many = RecordEncoder(STATEFUL)
    split = RecordEncoder(STATEFUL)
    rows, rows2 = [], []
    for i in range(100):
        rows.append(many.learn(recs[i : i + 1]))
    for a, b in [(0, 7), (7, 8), (8, 60), (60, 100)]:
        rows2.append(split.encode(recs[a:b], sequential=True))
        split.observe(recs[a:b])
    from learners.csr_batch import concat

    same_batch(whole, concat(rows))
    same_batch(whole, concat(rows2))
    assert one.state_bytes() == many.state_bytes() == split.state_bytes()


def test_encoded_with_the_records_before() -> None:
    enc = RecordEncoder(STATEFUL)
    recs = stream(30)
    enc.learn(recs[:29])
    before = enc.encode(recs[29:])  # predict: the statistics of the 29 before
    assert enc.encode(recs[29:]).values.tolist() == before.values.tolist()  # unchanged
    same_batch(enc.learn(recs[29:]), before)  # the update sees the same row
    assert enc.encode(recs[29:]).values.tolist() != before.values.tolist()  # now counted
    # a predict batch: every row with the same statistics (no row sees another)
    both = enc.encode([recs[0], recs[0]])
    assert both.values[: both.indptr[1]].tolist() == both.values[both.indptr[1] :].tolist()


def test_standardize_is_welford_of_the_values_before() -> None:
    enc = enc_of({"x": {"type": "numeric", "transform": "standardize"}})
    xs = [3.0, 5.0, 6.0, 10.0, -1.0]
    got = [v for i in range(len(xs)) for v in enc.learn([{"x": xs[i]}]).values.tolist()]
    expect = [(x - np.mean(xs[:i])) / np.std(xs[:i]) for i, x in enumerate(xs) if i >= 2]
    assert got == pytest.approx(expect, rel=1e-14)
    st = enc.to_state()["standardize"]["x"]
    assert st["n"] == 5 and float.fromhex(st["mean"]) == pytest.approx(np.mean(xs))


def test_idf_counts_documents_and_columns() -> None:
    enc = enc_of({"t": {"type": "text", "idf": True, "weighting": "tf", "normalize": False}})
    enc.learn([{"t": "a b"}, {"t": "a a"}, {"t": None}, {"t": ""}])
    st = enc.to_state()["idf"]["t"]
    col = {n: c for n, c, _ in enc.explain({"t": "a b c"})}
    assert st["documents"] == 3  # a present text is a document, even an empty one
    assert dict(zip(st["columns"], st["df"], strict=True)) == {col["t^a"]: 2, col["t^b"]: 1}
    got = named(enc, {"t": "a a b c"})
    idf = {w: math.log(4 / (1 + df)) + 1 for w, df in (("a", 2), ("b", 1), ("c", 0))}
    assert got == pytest.approx({"t^a": 2 * idf["a"], "t^b": idf["b"], "t^c": idf["c"]})


def test_idf_counts_in_place_and_taken_back_when_not_kept() -> None:
    """Learning counts into the encoder's own table (no copy of a (fields, 2**bits)
    table per call: 64 MB a field at bits 24, issue 32 item 8); a dry run (sequential
    encode) and a refused batch leave the counts as they were, with the same table."""
    enc = enc_of(
        {"t": {"type": "text", "idf": True}, "u": {"type": "text", "idf": True}},
        max_features_per_record=40,
    )
    enc.learn([{"t": "a b", "u": "x"}, {"t": "b c"}])
    df, docs = enc._state.df, enc._state.docs
    before = (df.copy(), docs.copy(), enc.state_digest())
    long_text = " ".join(f"w{i}" for i in range(200))  # words 50.. trip the limit
    many = [{"t": f"n{i} m{i} k{i}", "u": f"v{i}"} for i in range(300)]  # > 64 counts
    dry = enc.encode(many, sequential=True)  # statistics of the rows before each row
    assert dry.values.shape[0] > 0
    with pytest.raises(FeatureError, match="max_features_per_record"):
        enc.learn([*many, {"t": long_text}])  # the refusal comes after 300 counted rows
    assert enc._state.df is df and enc._state.docs is docs
    assert np.array_equal(df, before[0]) and np.array_equal(docs, before[1])
    assert enc.state_digest() == before[2]
    learned = enc.learn(many)  # as the dry run said, and now kept in the same table
    assert np.array_equal(learned.values, dry.values)
    assert enc._state.df is df and int(docs[0]) == int(before[1][0]) + 300
    assert enc.to_state()["idf"]["t"]["documents"] == 302


def test_state_round_trip_is_bit_exact() -> None:
    enc = RecordEncoder(STATEFUL)
    recs = stream(200, seed=9)
    enc.learn(recs[:150])
    state = json.loads(json.dumps(enc.to_state()))  # through JSON text
    back = RecordEncoder.from_state(STATEFUL, state)
    assert back.state_bytes() == enc.state_bytes() and back.state_digest() == enc.state_digest()
    same_batch(back.learn(recs[150:]), enc.learn(recs[150:]))
    assert back.state_bytes() == enc.state_bytes()
    assert RecordEncoder(STATEFUL).state_digest() != enc.state_digest()


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s.update(version=2), "state.version"),
        (lambda s: s["standardize"].pop("y"), "state.standardize: missing keys ['y']"),
        (lambda s: s["standardize"]["x"].update(mean=1.5), "state.standardize.x.mean"),
        (lambda s: s["standardize"]["x"].update(m2="-0x1p+0"), "m2 is negative"),
        (lambda s: s["idf"]["t"].update(df=[1]), "same length"),
        (lambda s: s["idf"]["t"]["columns"].reverse(), "increasing columns"),
        (lambda s: s["idf"]["t"]["df"].__setitem__(0, 10**6), "counts must be in"),
    ],
)
def test_bad_states_are_refused(edit: Any, problem: str) -> None:
    enc = RecordEncoder(STATEFUL)
    enc.learn(stream(20))
    state = enc.to_state()
    edit(state)
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        RecordEncoder.from_state(STATEFUL, state)


def test_names_are_the_distinct_explained_names_and_new_filters_them_by_hash() -> None:
    enc = enc_of(
        {"age": {"type": "numeric", "transform": {"bins": [30, 50]}, "namespace": "n"},
         "job": {"type": "categorical", "namespace": "c"},
         "note": {"type": "text", "chars": {"ngrams": [2, 3]}}},
        interactions=[["c", "n"]],
    )  # fmt: skip
    recs = [{"age": 39, "job": ["é", "b"], "note": "Zoë naïve"}, {"job": "é", "note": "zoë"}]
    every = [n for r in recs for n, _, _ in enc.explain(r)]
    assert enc.names(recs) == list(dict.fromkeys(every))
    assert {"age#1", "job=é*age#1", "note~zoë", "note~ë "} <= set(every)
    known = {murmurhash3_32(n) for n in every[:5]}
    seen: list[np.ndarray] = []

    def new(full: np.ndarray) -> np.ndarray:
        seen.append(full)
        return np.array([h for h in full.tolist() if h not in known], dtype=np.int64)

    assert enc.names(recs, new) == [n for n in dict.fromkeys(every) if n not in every[:5]]
    assert seen[0].tolist() == [murmurhash3_32(n) for n in every]  # the full 32-bit hashes
    assert enc.names(recs, lambda full: full[:0]) == []


@pytest.mark.parametrize(
    "module",
    [
        "learners.records.config",
        "learners.records.encoder",
        "learners.records.state",
        "learners.records._unicode",
        "learners.records._hash_kernels",
        "learners.records._name_hashes",
        "learners.records._scan_tables",
        "learners.io.records",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), verbose=False)
    assert result.attempted > 0 and result.failed == 0
