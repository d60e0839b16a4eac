"""service/models/fast_json_maps.py: the numba scanner of sparse/hashed /update bodies
gives bit for bit the batch orjson + FeatureSpec.encode give whenever it answers,
answers for the common bodies, and answers None for every other shape."""

from __future__ import annotations

import doctest
import json
import math
import random
import struct
from typing import Any

import numpy as np
import orjson
import pytest

from learners.features import Batch, FeatureSpec, murmurhash3_32
from service.models import fast_json_maps, json_scan_keys
from service.models.fast_json_maps import scan_map_examples, warmup
from service.models.json_scan_keys import murmurhash3_32_nb
from tests.service.test_fast_json import same_labels

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def label_of(y: Any) -> Any:
    """The label the general path keeps: a whole float below 2**53 is its integer."""
    return int(y) if type(y) is float and y.is_integer() and abs(y) < 2**53 else y


def spec_of(kind: str, dim: int) -> FeatureSpec:
    return FeatureSpec.hashed(dim.bit_length() - 1) if kind == "hashed" else FeatureSpec.sparse(dim)


def reference(
    raw: bytes, kind: str, dim: int, max_examples: int, max_features: int
) -> tuple[str, Batch, list[Any]]:
    """What the general path reads, asserting the body has the supported shape."""
    body = orjson.loads(raw)
    assert type(body) is dict and set(body) == {"model", "examples"}
    assert type(body["model"]) is str
    examples = body["examples"]
    assert type(examples) is list and 1 <= len(examples) <= max_examples
    for ex in examples:
        assert type(ex) is dict and set(ex) == {"x", "y"}
        y = ex["y"] = label_of(ex["y"])
        assert (
            (type(y) is str and y)
            or (type(y) is int and INT64_MIN <= y <= INT64_MAX)
            or (type(y) in (int, float) and math.isfinite(y))  # a regressor's target
        )
    batch = spec_of(kind, dim).encode([ex["x"] for ex in examples], max_features=max_features)
    return body["model"], batch, [ex["y"] for ex in examples]


def assert_same(got: Any, raw: bytes, kind: str, dim: int, mex: int, mf: int) -> None:
    model, batch, labels = reference(raw, kind, dim, mex, mf)
    gm, gb, gl, gw = got
    assert gw is None
    assert gm == model and type(gm) is str
    assert gb.dim == batch.dim == dim
    for a, b in ((gb.indptr, batch.indptr), (gb.indices, batch.indices)):
        assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b), raw
    assert gb.values.dtype == np.float64
    assert np.array_equal(gb.values.view(np.uint64), batch.values.view(np.uint64)), raw
    assert same_labels(gl, labels), (gl, labels)


# ------------------------------------------------------------------ generators

WS = ["", "", "", " ", "\n", "\t", "\r\n  "]
NAMES = ["age", "job", "town", "w17", "é", "中文", "🙂", "a b", "x=y", "", "0", "17", "a/b",
         "\x7f", "ñandú", "k" * 40]  # fmt: skip
STRINGS = ["clerk", "", "é", "中", "🙂🙂", "a=b", "1", "true", "x" * 30]
NUMBERS = ["0", "-0", "-0.0", "0.0", "1", "-7", "39", "0.25", "1e3", "-1.5E-7", "1e22",
           "9007199254740993", "123456789012345678", "0.30000000000000004",
           "9999999999999999999", "-9223372036854775809", "18446744073709551615"]  # fmt: skip


def rand_name(rng: random.Random) -> str:
    k = rng.randrange(4)
    if k == 0:
        return rng.choice(NAMES)
    if k == 1:
        return f"w{rng.randrange(300)}"
    # random unicode (no surrogates, no control characters, no quote/backslash)
    out = []
    for _ in range(rng.randint(0, 9)):
        c = rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x7FF),
                        rng.randint(0x800, 0xD7FF), rng.randint(0xE000, 0xFFFF),
                        rng.randint(0x10000, 0x10FFFF)])  # fmt: skip
        if chr(c) not in '"\\':
            out.append(chr(c))
    return "".join(out)


def rand_number(rng: random.Random) -> str:
    k = rng.randrange(6)
    if k == 0:
        return rng.choice(NUMBERS)
    if k == 1:  # repr of a random double: often 17 significant digits
        return repr(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30))
    if k == 2:
        while True:
            v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            if np.isfinite(v) and (v == 0 or abs(v) > 2.3e-308):
                return repr(v)
    if k == 3:
        return str(rng.randint(-(2**62), 2**62) >> rng.randrange(63))
    if k == 4:
        return f"{rng.gauss(0, 1) * 10 ** rng.randint(-20, 20):.{rng.randint(0, 16)}e}"
    return f"{rng.gauss(0, 10):.4f}"


def fmt_label(rng: random.Random) -> str:
    k = rng.randrange(6)
    if k == 5:  # a whole float label as files give them (1.0, -1.0)
        return rng.choice(["1.0", "-1.0", "0.0", "-0.0", "3.00", "-42.000"])
    if k < 2:
        return json.dumps(rng.choice(["+1", "-1", "spam", "é", "中文"]), ensure_ascii=False)
    if k == 2:
        return str(rng.randint(-3, 3))
    if k == 3:
        return str(rng.choice([INT64_MAX, INT64_MIN, 0, -1]))
    return str(rng.randint(INT64_MIN, INT64_MAX))


def build(rng: random.Random, kind: str, dim: int, n: int, nf: int) -> bytes:
    def ws() -> str:
        return rng.choice(WS)

    def obj(items: list[tuple[str, str]]) -> str:
        rng.shuffle(items)
        inner = ",".join(f"{ws()}{k}{ws()}:{ws()}{v}{ws()}" for k, v in items)
        return "{" + inner + "}"

    def q(s: str) -> str:
        return json.dumps(s, ensure_ascii=False)

    examples = []
    for _ in range(n):
        k = rng.randint(1, nf) if rng.random() < 0.9 else 0  # 0: no features, x is {}
        if kind == "sparse":
            keys = [str(j) for j in rng.sample(range(dim), min(k, dim))]
            items = [(q(j), rand_number(rng)) for j in keys]
        else:
            keys = list(dict.fromkeys(rand_name(rng) for _ in range(k)))
            items = [
                (q(name), q(rng.choice([*STRINGS, rand_name(rng)]))
                 if rng.random() < 0.3 else rand_number(rng))
                for name in keys
            ]  # fmt: skip
        examples.append(obj([('"x"', obj(items)), ('"y"', fmt_label(rng))]))
    body = obj(
        [
            ('"model"', q(rng.choice(["adult", "m", "modèle", ""]))),
            ('"examples"', "[" + ",".join(ws() + e + ws() for e in examples) + "]"),
        ]
    )
    return (ws() + body + ws()).encode()


# ------------------------------------------------------------------ equivalence


def test_warmup_and_doc_example() -> None:
    warmup()
    result = doctest.testmod(fast_json_maps)
    assert result.attempted > 0 and result.failed == 0
    raw = b'{"model": "m", "examples": [{"x": {"age": 39, "job": "clerk"}, "y": "+1"}]}'
    got = scan_map_examples(raw, "hashed", 1 << 20, 10, 10)
    assert got is not None
    mask = (1 << 20) - 1
    assert sorted(got[1].indices.tolist()) == sorted(
        [murmurhash3_32("age") & mask, murmurhash3_32("job=clerk") & mask]
    )
    assert_same(got, raw, "hashed", 1 << 20, 10, 10)


@pytest.mark.parametrize("kind", ["hashed", "sparse"])
@pytest.mark.parametrize("seed", range(2))
def test_random_bodies_match_orjson_and_encode(kind: str, seed: int) -> None:
    rng = random.Random(seed * 10 + (kind == "sparse"))
    accepted = 0
    for t in range(400):
        # small dims: many hash collisions (summed duplicates) in hashed rows
        dim = rng.choice([2, 4, 16, 1 << 20]) if kind == "hashed" else rng.choice([1, 3, 50, 10**6])
        n = rng.choice([1, 2, 3, 10])
        raw = build(rng, kind, dim, n, rng.choice([1, 3, 14]))
        got = scan_map_examples(raw, kind, dim, 10, 14)
        if got is not None:
            accepted += 1
            assert_same(got, raw, kind, dim, 10, 14)
        else:
            reference(raw, kind, dim, 10, 14)  # the generator writes only the right shape
    assert accepted > 200


def test_collisions_summed_as_encode_does() -> None:
    """dim 2: every row repeats indices; -0.0, 17-digit floats and ints in the sums."""
    rng = random.Random(5)
    for _ in range(200):
        x = {f"f{k}": rng.choice([-0.0, 0.0, 1, -3, 0.1 + 0.2, rng.uniform(-1, 1), "v"])
             for k in range(rng.randint(1, 9))}  # fmt: skip
        raw = orjson.dumps({"model": "m", "examples": [{"x": x, "y": 1}, {"x": x, "y": 2}]})
        got = scan_map_examples(raw, "hashed", 2, 10, 10)
        assert got is not None
        assert_same(got, raw, "hashed", 2, 10, 10)


def test_named_feature_bodies_like_the_benchmark() -> None:
    rng = np.random.default_rng(0)
    jobs, towns = ["clerk", "exec"], [f"town{k}" for k in range(50)]
    examples = []
    for _ in range(100):
        x: dict[str, Any] = {"age": int(rng.integers(18, 90)), "job": jobs[int(rng.integers(2))]}
        x["town"] = towns[int(rng.integers(0, 50))]
        for k in rng.choice(1000, 11, replace=False).tolist():
            x[f"w{k}"] = round(float(rng.random()), 4)
        examples.append({"x": x, "y": "+1" if rng.random() < 0.5 else "-1"})
    for raw in (orjson.dumps({"model": "h", "examples": examples}),
                json.dumps({"model": "h", "examples": examples}, indent=2).encode()):  # fmt: skip
        got = scan_map_examples(raw, "hashed", 1 << 20, 1000, 100)
        assert got is not None
        assert_same(got, raw, "hashed", 1 << 20, 1000, 100)
    sparse = [{"x": {str(j): 0.5 for j in rng.choice(1000, 14, replace=False).tolist()}, "y": 1}]
    raw = orjson.dumps({"model": "s", "examples": sparse * 50})
    got = scan_map_examples(raw, "sparse", 1000, 1000, 100)
    assert got is not None
    assert_same(got, raw, "sparse", 1000, 1000, 100)


@pytest.mark.parametrize("kind", ["hashed", "sparse"])
def test_mutated_bodies_never_accepted_differently(kind: str) -> None:
    """Flip, drop or insert a byte of valid bodies: whatever the scanner still accepts
    must be read identically by the general path (and have the supported shape)."""
    rng = random.Random(100 + len(kind))
    alphabet = b' \t\n{}[]:,"\\-+.eE0123456789xyabmodelxamplesnutrf=\x00\x1f\xc3\xa9\xff'
    dim = 16 if kind == "hashed" else 20
    for _ in range(1500):
        raw = bytearray(build(rng, kind, dim, rng.choice([1, 2]), 3))
        for _ in range(rng.randint(1, 2)):
            pos = rng.randrange(len(raw) + 1)
            op = rng.randrange(3)
            b = alphabet[rng.randrange(len(alphabet))]
            if op == 0 and pos < len(raw):
                raw[pos] = b
            elif op == 1 and pos < len(raw):
                del raw[pos]
            else:
                raw.insert(pos, b)
        data = bytes(raw)
        got = scan_map_examples(data, kind, dim, 2, 3)
        if got is not None:
            assert_same(got, data, kind, dim, 2, 3)


def test_murmurhash_matches_python_on_random_unicode() -> None:
    rng = random.Random(9)
    datas = [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", b"=", bytes(range(256))]
    for _ in range(3000):
        datas.append(rand_name(rng).encode())
        datas.append(rng.randbytes(rng.randint(0, 40)))
    for d in datas:
        assert murmurhash3_32_nb(d) == murmurhash3_32(d), d


def test_key_value_hash_over_the_concatenation() -> None:
    rng = random.Random(10)
    for _ in range(2000):
        k, v = rand_name(rng).encode(), rand_name(rng).encode()
        buf = b'"' + k + b'":"' + v + b'"'
        a, c = 1, len(k) + 4
        h = json_scan_keys._murmur_of(buf, a, a + len(k), True, c, c + len(v))
        assert int(h) == murmurhash3_32(k + b"=" + v), (k, v)


def test_utf8_validation_matches_python() -> None:
    rng = random.Random(11)
    cases = [b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf5"]
    cases += [b"\xc3", b"\xe2\x82", b"\xf0\x9f\x99", b"\xf0\x9f\x99\x82", b"\xef\xbf\xbf"]
    pool = [0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC2, 0xC3, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5]
    for _ in range(20000):
        cases.append(bytes(rng.choice(pool) for _ in range(rng.randint(1, 6))))
    for b in cases:
        try:
            b.decode("utf-8")
            ok = True
        except UnicodeDecodeError:
            ok = False
        assert bool(json_scan_keys._utf8_ok(b, 0, len(b))) == ok, b


# ------------------------------------------------------------------ refused shapes


def hbody(x: str, y: str = '"a"') -> str:
    return f'{{"model": "m", "examples": [{{"x": {x}, "y": {y}}}]}}'


GOOD_H = hbody('{"age": 39, "job": "clerk", "w": -0.5}')
GOOD_S = hbody('{"0": 1, "3": -2.5}')

HASHED_NONE = {
    "unknown top key": '{"model": "m", "examples": [{"x": {"a": 1}, "y": 1}], "z": 1}',
    "missing model": '{"examples": [{"x": {"a": 1}, "y": 1}]}',
    "duplicate model": '{"model": "m", "model": "m", "examples": [{"x": {"a": 1}, "y": 1}]}',
    "extra example key": '{"model": "m", "examples": [{"x": {"a": 1}, "y": 1, "w": 2}]}',
    "duplicate x": '{"model": "m", "examples": [{"x": {"a": 1}, "x": {"a": 1}, "y": 1}]}',
    "missing y": '{"model": "m", "examples": [{"x": {"a": 1}}]}',
    "too many examples": '{"model": "m", "examples": [{"x": {"a": 1}, "y": 1}, '
    '{"x": {"a": 1}, "y": 1}, {"x": {"a": 1}, "y": 1}]}',
    "x array": hbody("[1, 2]"),
    "x null": hbody("null"),
    "too many features": hbody('{"a": 1, "b": 2, "c": 3, "d": 4}'),
    "duplicate key": hbody('{"a": 1, "b": 2, "a": 3}'),
    "duplicate key, string values": hbody('{"a": "u", "a": "v"}'),
    "duplicate empty key": hbody('{"": 1, "": 2}'),
    "bool value": hbody('{"a": true}'),
    "false value": hbody('{"a": false}'),
    "null value": hbody('{"a": null}'),
    "nested object": hbody('{"a": {"b": 1}}'),
    "nested array": hbody('{"a": [1]}'),
    "escaped key": hbody('{"a\\u0062": 1}'),
    "escaped quote in key": hbody('{"a\\"": 1}'),
    "control char in key": hbody('{"a\tb": 1}'),
    "escaped value": hbody('{"a": "b\\n"}'),
    "control char in value": hbody('{"a": "b\x01"}'),
    "NaN": hbody('{"a": NaN}'),
    "Infinity": hbody('{"a": Infinity}'),
    "1e400": hbody('{"a": 1e400}'),
    "leading zero number": hbody('{"a": 01}'),
    "plus number": hbody('{"a": +1}'),
    "20 digits": hbody('{"a": 12345678901234567890}'),
    "subnormal": hbody('{"a": 5e-324}'),
    "trailing comma x": hbody('{"a": 1,}'),
    "missing colon": hbody('{"a" 1}'),
    "unquoted key": hbody("{a: 1}"),
    "number key": hbody("{1: 1}"),
    "y bool": hbody('{"a": 1}', "true"),
    "y empty": hbody('{"a": 1}', '""'),
    "y escaped": hbody('{"a": 1}', '"\\u00e9"'),
    "truncated": GOOD_H[:-1],
    "trailing garbage": GOOD_H + "x",
    "empty": "",
}

SPARSE_NONE = {
    "index >= dim": hbody('{"4": 1}'),
    "far index": hbody('{"99999999999": 1}'),
    "leading zero key": hbody('{"01": 1}'),
    "00": hbody('{"00": 1}'),
    "plus key": hbody('{"+1": 1}'),
    "minus key": hbody('{"-1": 1}'),
    "minus zero key": hbody('{"-0": 1}'),
    "space key": hbody('{" 1": 1}'),
    "trailing space key": hbody('{"1 ": 1}'),
    "underscore key": hbody('{"1_0": 1}'),
    "float key": hbody('{"1.0": 1}'),
    "empty key": hbody('{"": 1}'),
    "name key": hbody('{"age": 1}'),
    "fullwidth digit key": hbody('{"１": 1}'),
    "duplicate index": hbody('{"1": 1, "2": 2, "1": 3}'),
    "string value": hbody('{"1": "a"}'),
    "empty string value": hbody('{"1": ""}'),
    "bool value": hbody('{"1": true}'),
    "null value": hbody('{"1": null}'),
    "nested": hbody('{"1": {"2": 1}}'),
    "too many features": hbody('{"0": 1, "1": 2, "2": 3, "3": 4}'),
    "dense x": hbody("[1, 2, 3, 4]"),
}


@pytest.mark.parametrize(("kind", "dim"), [("hashed", 16), ("sparse", 4)])
def test_examples_with_no_features_are_taken(kind: str, dim: int) -> None:
    """``{}`` (LIBSVM's all-zero rows) is the zero vector, read as the general path reads it."""
    key = '"a"' if kind == "hashed" else '"1"'
    for x in ("{}", "{ }", "{\n}"):
        raw = (
            f'{{"model": "m", "examples": [{{"x": {x}, "y": 1.0}}, {{"x": {{{key}: 2}}, "y": -1}}, '
            f'{{"y": "a", "x": {x}}}]}}'
        ).encode()
        got = scan_map_examples(raw, kind, dim, 3, 3)
        assert got is not None, raw
        assert got[1].indptr.tolist() == [0, 0, 1, 1] and got[2] == [1, -1, "a"]
        assert_same(got, raw, kind, dim, 3, 3)


def test_good_bodies_accepted() -> None:
    for raw, kind, dim in ((GOOD_H, "hashed", 16), (GOOD_S, "sparse", 4)):
        got = scan_map_examples(raw.encode(), kind, dim, 2, 3)
        assert got is not None
        assert_same(got, raw.encode(), kind, dim, 2, 3)


@pytest.mark.parametrize("case", list(HASHED_NONE))
def test_hashed_refused(case: str) -> None:
    assert scan_map_examples(HASHED_NONE[case].encode(), "hashed", 16, 2, 3) is None


@pytest.mark.parametrize("case", list(SPARSE_NONE))
def test_sparse_refused(case: str) -> None:
    assert scan_map_examples(SPARSE_NONE[case].encode(), "sparse", 4, 2, 3) is None
    # also no sparse-only rule that hashed has: the hashed scanner reads these or not,
    # but never differently from the general path
    raw = SPARSE_NONE[case].encode()
    got = scan_map_examples(raw, "hashed", 16, 2, 3)
    if got is not None:
        assert_same(got, raw, "hashed", 16, 2, 3)


def test_empty_string_value_is_the_name_with_an_equals_sign() -> None:
    raw = hbody('{"k": "", "": ""}').encode()
    got = scan_map_examples(raw, "hashed", 1 << 16, 2, 3)
    assert got is not None
    assert_same(got, raw, "hashed", 1 << 16, 2, 3)
    mask = (1 << 16) - 1
    assert sorted(got[1].indices.tolist()) == sorted(
        [murmurhash3_32("k=") & mask, murmurhash3_32("=") & mask]
    )


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "examples": [{"x": {"\xff": 1}, "y": 1}]}',
        b'{"model": "m", "examples": [{"x": {"a": "\xc3"}, "y": 1}]}',
        b'{"model": "m", "examples": [{"x": {"\xed\xa0\x80": 1}, "y": 1}]}',  # surrogate
        b'{"model": "m", "examples": [{"x": {"a": "\xc0\xaf"}, "y": 1}]}',  # overlong
        b'{"model": "\xff", "examples": [{"x": {"a": 1}, "y": 1}]}',
        b'{"model": "m", "examples": [{"x": {"a": 1}, "y": "\xc3"}]}',
    ],
)
def test_invalid_utf8_refused(raw: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)
    assert scan_map_examples(raw, "hashed", 16, 2, 3) is None


def test_many_colliding_slots_still_right() -> None:
    """A row of many features (the duplicate-key table probes), and a repeat far apart."""
    x = {f"f{k}": k for k in range(3000)}
    raw = orjson.dumps({"model": "m", "examples": [{"x": x, "y": 1}]})
    got = scan_map_examples(raw, "hashed", 1 << 10, 2, 5000)
    assert got is not None
    assert_same(got, raw, "hashed", 1 << 10, 2, 5000)
    dup = raw.replace(b'"f2999"', b'"f0"')
    assert scan_map_examples(dup, "hashed", 1 << 10, 2, 5000) is None
    sx = {str(k): 1.0 for k in range(3000)}
    raw = orjson.dumps({"model": "m", "examples": [{"x": sx, "y": 1}, {"x": sx, "y": 2}]})
    got = scan_map_examples(raw, "sparse", 3000, 2, 5000)
    assert got is not None
    assert_same(got, raw, "sparse", 3000, 2, 5000)
    assert scan_map_examples(raw.replace(b'"2999"', b'"7"'), "sparse", 3000, 2, 5000) is None


def test_bad_arguments() -> None:
    raw = GOOD_H.encode()
    assert scan_map_examples(raw, "dense", 16, 2, 3) is None
    assert scan_map_examples(raw, "hashed", 12, 2, 3) is None  # not a power of two
    assert scan_map_examples(raw, "hashed", 16, 0, 3) is None
    assert scan_map_examples(raw, "hashed", 16, 2, 0) is None
    assert scan_map_examples(raw, "hashed", 16, 2, 2) is None  # 3 features
