"""service/models/fast_json.py: the numba scanner of dense /update bodies agrees bit
for bit with orjson + numpy whenever it answers, answers for the common bodies, and
answers None for every other shape."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import numpy as np
import orjson
import pytest

from service.models import json_scan_numbers
from service.models.fast_json import DenseExamples, scan_dense_examples, warmup

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def label_of(y: Any) -> Any:
    """The label the general path keeps: a whole float below 2**53 is its integer."""
    return int(y) if type(y) is float and y.is_integer() and abs(y) < 2**53 else y


def same_labels(got: list[Any], want: list[Any]) -> bool:
    """The scanner's labels are the general path's: a string or an int64 as it is; any
    other number (``1.5``, ``1e3``, an integer beyond int64) as the float orjson reads,
    which a classifier sends back to the general path and a regressor takes."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if type(g) is float:
            if type(w) not in (int, float) or float(w) != g:
                return False
        elif type(g) is not type(w) or g != w:
            return False
    return True


def reference(raw: bytes, dim: int, max_examples: int) -> tuple[str, np.ndarray, list[Any]]:
    """What the slow path reads, asserting the body has exactly the supported shape."""
    body = orjson.loads(raw)
    assert type(body) is dict and set(body) == {"model", "examples"}
    assert type(body["model"]) is str
    examples = body["examples"]
    assert type(examples) is list and 1 <= len(examples) <= max_examples
    for ex in examples:
        assert type(ex) is dict and set(ex) == {"x", "y"}
        assert type(ex["x"]) is list and len(ex["x"]) == dim
        assert all(type(v) in (int, float) for v in ex["x"])
        y = ex["y"] = label_of(ex["y"])
        assert (
            (type(y) is str and y)
            or (type(y) is int and INT64_MIN <= y <= INT64_MAX)
            or (type(y) in (int, float) and math.isfinite(y))  # a regressor's target
        )
    X = np.array([ex["x"] for ex in examples], dtype=np.float64).reshape(len(examples), dim)
    assert np.isfinite(X).all()
    return body["model"], X, [ex["y"] for ex in examples]


def assert_same(got: DenseExamples, raw: bytes, dim: int, max_examples: int) -> None:
    model, X, labels = reference(raw, dim, max_examples)
    assert got.model == model and type(got.model) is str
    assert got.X.dtype == np.float64 and got.X.flags.c_contiguous
    assert got.X.shape == X.shape
    assert np.array_equal(got.X.view(np.uint64), X.view(np.uint64)), raw
    assert same_labels(got.labels, labels), (got.labels, labels)


# ------------------------------------------------------------------ generators

WS = ["", "", "", " ", "  ", "\n", "\t", "\r\n  ", " \n\t "]
SPECIAL = [
    "0", "-0", "0.0", "-0.0", "-0e0", "0e99", "-0.000e-400", "1e22", "1e23", "-1e22",
    "1e-22", "1e-23", "5e-324", "1.7976931348623157e308", "2.2250738585072014e-308",
    "9007199254740992", "9007199254740993", "-9007199254740992", "123456789012345678",
    "18446744073709551615", "1E+5", "1e-05", "1.0E-5", "3.14159", "100", "-7",
    "0.1", "0.30000000000000004", "12345678901234567890123", "1.5e37", "9007199254740991e1",
    "4.35e30", "123.456e20", "1e0", "1E0", "0.000000000000000000000000001",
]  # fmt: skip


def fmt_number(rng: random.Random) -> str:
    k = rng.randrange(12)
    if k == 0:
        return rng.choice(SPECIAL)
    if k == 1:  # repr of a random double (often 17 significant digits)
        return repr(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30))
    if k == 2:  # repr of any bit pattern that is finite
        while True:
            v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            if np.isfinite(v):
                return repr(v)
    if k == 3:
        return f"{rng.gauss(0, 10):.5f}"
    if k == 4:
        return f"{rng.gauss(0, 1) * 10 ** rng.randint(-10, 10):g}"
    if k == 5:
        return f"{rng.gauss(0, 1) * 10 ** rng.randint(-40, 40):.{rng.randint(0, 16)}e}"
    if k == 6:
        return f"{rng.gauss(0, 1) * 10 ** rng.randint(-25, 25):.{rng.randint(0, 8)}E}"
    if k == 7:
        return str(rng.randint(-(2**60), 2**60) >> rng.randrange(64))
    if k == 8:  # random decimal digits, point and exponent
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 22)))
        digits = digits.lstrip("0") or "0"
        s = digits
        if rng.random() < 0.6:
            s = f"{digits}.{''.join(rng.choice('0123456789') for _ in range(rng.randint(1, 20)))}"
        if rng.random() < 0.5:
            s += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 40))
        return rng.choice(["", "-"]) + s
    if k == 9:
        return f"{rng.uniform(-1000, 1000):.3f}"
    if k == 10:  # <= 15 significant digits, magnitude 1e-3..1e3
        return repr(float(f"{rng.uniform(1e-3, 1e3):.{rng.randint(1, 15)}g}"))
    return repr(round(rng.gauss(0, 1), rng.randint(0, 8)))


MODELS = ["adult", "m", "modèle", "a/b", ""]
LABELS = ["s", "b", "spam", "é", "中文", "🙂x", "a b", "+1", "-1", "\x7f", "long label " * 5]


def fmt_label(rng: random.Random) -> str:
    k = rng.randrange(7)
    if k == 6:  # a whole float label as files give them (1.0, -1.0)
        return rng.choice(["1.0", "-1.0", "0.0", "-0.0", "3.00", "-42.000"])
    if k < 3:
        return json.dumps(rng.choice(LABELS), ensure_ascii=False)
    if k == 3:
        return str(rng.randint(-5, 5))
    if k == 4:
        return str(rng.choice([INT64_MAX, INT64_MIN, 0, -1, 10**18, -(10**18), 2**62]))
    return str(rng.randint(INT64_MIN, INT64_MAX))


def build(rng: random.Random, dim: int, n: int, number: Any = fmt_number) -> bytes:
    def ws() -> str:
        return rng.choice(WS)

    def obj(items: list[tuple[str, str]]) -> str:
        rng.shuffle(items)
        inner = ",".join(f'{ws()}"{k}"{ws()}:{ws()}{v}{ws()}' for k, v in items)
        return "{" + inner + "}"

    examples = []
    for _ in range(n):
        x = "[" + ",".join(f"{ws()}{number(rng)}{ws()}" for _ in range(dim)) + "]"
        examples.append(obj([("x", x), ("y", fmt_label(rng))]))
    body = obj(
        [
            ("model", json.dumps(rng.choice(MODELS), ensure_ascii=False)),
            ("examples", "[" + ",".join(ws() + e + ws() for e in examples) + "]"),
        ]
    )
    return (ws() + body + ws()).encode()


# ------------------------------------------------------------------ equivalence


def test_warmup_and_doc_example() -> None:
    warmup()
    r = scan_dense_examples(b'{"model":"m","examples":[{"x":[1.5,-2],"y":"a"}]}', 2, 10)
    assert r is not None and r.model == "m" and r.labels == ["a"]
    assert r.X.tolist() == [[1.5, -2.0]]


@pytest.mark.parametrize("seed", range(4))
def test_random_bodies_match_orjson(seed: int) -> None:
    rng = random.Random(seed)
    accepted = 0
    for _ in range(800):
        dim = rng.choice([1, 2, 3, 5, 28])
        n = rng.choice([1, 1, 2, 3, 10])
        raw = build(rng, dim, n)
        got = scan_dense_examples(raw, dim, 10)
        if got is not None:
            accepted += 1
            assert_same(got, raw, dim, 10)
        else:
            reference(raw, dim, 10)  # the generator only writes bodies of the right shape
    assert accepted > 50  # some bodies with only fast-path numbers get through


@pytest.mark.parametrize("seed", range(3))
def test_mutated_bodies_never_accepted_differently(seed: int) -> None:
    """Flip, drop or insert one byte of valid bodies: whatever the scanner still
    accepts must be read identically by orjson (and have the supported shape)."""
    rng = random.Random(100 + seed)
    alphabet = b' \t\n\r{}[]:,"\\-+.eE0123456789xyabmodelxamplesnutrf\x00\x1f\xc3\xa9\xff'
    for _ in range(1000):
        dim = rng.choice([1, 2, 3])
        raw = bytearray(build(rng, dim, rng.choice([1, 2, 3]), number=_common_number))
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
        got = scan_dense_examples(data, dim, 3)
        if got is not None:
            assert_same(got, data, dim, 3)


def _common_number(rng: random.Random) -> str:
    k = rng.randrange(3)
    if k == 0:
        return f"{rng.gauss(0, 10):.5f}"
    if k == 1:
        return repr(float(f"{rng.uniform(1e-3, 1e3):.{rng.randint(1, 15)}g}"))
    return str(rng.randint(-1000, 1000))


@pytest.mark.parametrize("seed", range(3))
def test_common_bodies_take_the_fast_path(seed: int) -> None:
    rng = random.Random(200 + seed)
    for _ in range(300):
        dim = rng.choice([1, 4, 28])
        n = rng.randint(1, 50)
        raw = build(rng, dim, n, number=_common_number)
        got = scan_dense_examples(raw, dim, 50)
        assert got is not None, raw
        assert_same(got, raw, dim, 50)


def test_json_dumps_of_rounded_floats() -> None:
    """What the benchmark and typical clients send: json.dumps of np.round(x, 5)."""
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(200, 28)) * rng.uniform(0.01, 100, size=28), 5)
    labels: list[str | int] = ["s" if v > 0 else "h" for v in X[:, 0]]
    labels[5] = 3
    body = {"model": "adult", "examples": [{"x": r, "y": y} for r, y in zip(X.tolist(), labels)]}
    for raw in (json.dumps(body).encode(), orjson.dumps(body), json.dumps(body, indent=2).encode()):
        got = scan_dense_examples(raw, 28, 1000)
        assert got is not None
        assert_same(got, raw, 28, 1000)
        assert np.array_equal(got.X, X) and got.labels == labels


def test_signed_zeros_and_exact_boundaries() -> None:
    def one(xs: str, dim: int) -> np.ndarray:
        r = scan_dense_examples(
            f'{{"model":"m","examples":[{{"x":[{xs}],"y":1}}]}}'.encode(), dim, 1
        )
        assert r is not None, xs
        return r.X[0]

    z = one("-0, -0.0, 0.0, -0e5, 0e-5, -0E+0", 6)
    assert np.signbit(z).tolist() == [False, True, False, True, False, True]
    v = one("9007199254740992, -9007199254740992, 1e22, 1e23, 1e-22, 4.35e30", 6)
    assert v.tolist() == [2.0**53, -(2.0**53), 1e22, 1e23, 1e-22, 4.35e30]
    big = one("123.456e30", 1)  # w * 10**(e-22) still <= 2**53
    assert big[0] == 123.456e30


@pytest.mark.parametrize(
    ("y", "expect"),
    [
        ("9223372036854775807", INT64_MAX),
        ("-9223372036854775808", INT64_MIN),
        ("922337203685477580", 922337203685477580),
        ("-0", 0),
        ("0", 0),
        ("1.0", 1),  # a float label as load_svmlight_file gives it: the integer
        ("-1.0", -1),
        ("-0.0", 0),
        ("3.000", 3),
        ("9007199254740991.0", 2**53 - 1),
        ('"0"', "0"),
        ('"é"', "é"),
    ],
)
def test_label_values(y: str, expect: Any) -> None:
    raw = f'{{"examples":[{{"y":{y},"x":[1]}}],"model":"m"}}'.encode()
    r = scan_dense_examples(raw, 1, 1)
    assert r is not None
    assert r.labels == [expect] and type(r.labels[0]) is type(expect)
    assert_same(r, raw, 1, 1)


def test_many_distinct_labels() -> None:
    """More distinct labels than the kernel deduplicates: still right, in order."""
    labels: list[str | int] = [f"l{i % 150}" for i in range(400)] + list(range(100))
    body = {"model": "m", "examples": [{"x": [float(i)], "y": y} for i, y in enumerate(labels)]}
    raw = orjson.dumps(body)
    r = scan_dense_examples(raw, 1, 1000)
    assert r is not None and r.labels == labels
    assert_same(r, raw, 1, 1000)


# ------------------------------------------------------------------ full precision


def test_pow5_table_against_python_integers() -> None:
    """The 128-bit powers of five, normalized to 2**127 <= t < 2**128: 5**q (q >= 0)
    truncated, exactly; for q < 0 the reciprocal within one unit of the last place."""
    hi, lo = json_scan_numbers._POW5_HI, json_scan_numbers._POW5_LO
    assert hi.dtype == lo.dtype == np.uint64 and len(hi) == 308 + 342 + 1
    for k, q in enumerate(range(-342, 309)):
        t = (int(hi[k]) << 64) | int(lo[k])
        assert 1 << 127 <= t < 1 << 128, q
        if q >= 0:
            p = 5**q
            sh = 127 - (p.bit_length() - 1)  # t = floor(p * 2**sh)
            assert t == (p << sh if sh >= 0 else p >> -sh), q
        else:
            p = 5**-q
            # t ~ 2**b / p for the b that puts the top bit at 127
            b = 127 + p.bit_length()
            exact_num, den = 1 << b, p
            assert exact_num // den >= 1 << 127 and exact_num // den < 1 << 128
            # |t - 2**b / p| < 1: the reciprocal truncated or rounded up
            assert exact_num - den < t * den <= exact_num + den, q
    assert (int(hi[342]) << 64 | int(lo[342])) == 1 << 127  # 5**0


def test_mul64_against_python_integers() -> None:
    rng = random.Random(7)
    cases = [(0, 0), (2**64 - 1, 2**64 - 1), (2**64 - 1, 1), (2**63, 2), (2**32, 2**32)]
    cases += [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(2000)]
    cases += [(rng.getrandbits(rng.randint(1, 64)), rng.getrandbits(64)) for _ in range(500)]
    for a, b in cases:
        hi, lo = json_scan_numbers._mul64(np.uint64(a), np.uint64(b))
        assert (int(hi) << 64) | int(lo) == a * b, (a, b)
    # all integer arithmetic stays uint64 (a float64 promotion would show here)
    sig = json_scan_numbers._mul64.nopython_signatures[0]
    assert [str(t) for t in sig.args] == ["uint64", "uint64"]
    assert str(sig.return_type) == "UniTuple(uint64 x 2)"
    assert json_scan_numbers._eisel_lemire(np.uint64(1), 23) == 1e23
    assert json_scan_numbers._eisel_lemire(np.uint64(2**64 - 1), -20) == float(
        "18446744073709551615e-20"
    )
    sig = json_scan_numbers._eisel_lemire.nopython_signatures[0]
    assert [str(t) for t in sig.args] == ["uint64", "int64"] and str(sig.return_type) == "float64"


def _num(s: str) -> float | None:
    b = np.frombuffer(s.encode(), np.uint8)
    i, v = json_scan_numbers._number(b, 0, len(b))
    return v if i == len(b) else None


def _bits(v: float) -> bytes:
    return struct.pack("<d", v)


HARD = [
    "2.2250738585072011e-308", "2.2250738585072012e-308", "2.2250738585072014e-308",
    "9007199254740993", "9007199254740995", "18014398509481985", "1.7976931348623157e308",
    "1.7976931348623158e308", "1.7976931348623159e308", "5e-324", "4.9406564584124654e-324",
    "2.4703282292062328e-324", "0.1", "0.2", "0.3", "1e23", "1e22", "8.98846567431158e307",
    "9007199254740993.0", "1.00000000000000011102230246251565404236316680908203125",
    "1.0000000000000002220446049250313080847263336181640625", "7.2057594037927933e16",
    "1e-342", "1e-343", "9999999999999999999e-343", "1e308", "1e-307", "1e-308",
    "4.4501477170144023e-308", "123456789012345678", "1234567890123456789",
    "9999999999999999999", "18446744073709551615", "3.0000000000000004", "4.35e30",
    "0.30000000000000004", "9.109383632e-31", "6.02214076e23", "1.602176634e-19",
]  # fmt: skip


def test_full_precision_numbers_match_float() -> None:
    """Whatever the number parser accepts is float(s) bit for bit (Python's float()
    rounds correctly): random bit patterns, random decimal strings and hard cases."""
    rng = random.Random(11)
    strs: list[str] = []
    for s in HARD:
        strs += [s, "-" + s]
    for _ in range(120_000):  # uniform over the bit patterns of finite doubles
        v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if v == v and abs(v) != float("inf"):
            strs.append(repr(v))
    digits = "0123456789"
    for _ in range(100_000):  # 1-19 random digits, a point somewhere, exponent -350..310
        nd = rng.randint(1, 19)
        d = rng.choice("123456789") + "".join(rng.choice(digits) for _ in range(nd - 1))
        p = rng.randint(0, nd)
        m = d if p == nd else (d[:p] or "0") + "." + d[p:]
        strs.append(f"{m}e{rng.randint(-350, 310)}")
    accepted = 0
    for s in strs:
        got = _num(s)
        if got is not None:
            accepted += 1
            assert _bits(got) == _bits(float(s)), s
    assert accepted > 0.97 * len(strs)
    for s in ["1e23", "9007199254740993", "1.7976931348623157e308", "8.98846567431158e307"]:
        assert _num(s) == float(s)
    for s in ["5e-324", "1.7976931348623159e308", "1e309", "0.12345678901234567890"]:
        assert _num(s) is None


def test_repr_of_normal_doubles_accepted() -> None:
    rng = random.Random(12)
    n = 0
    none = 0
    while n < 100_000:
        v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if not (2.2250738585072014e-308 <= abs(v) <= 1.7976931348623157e308):
            continue
        n += 1
        if _num(repr(v)) is None:
            none += 1
    assert none <= n // 1000, none
    # and what clients send: numpy output of computed values
    X = np.random.default_rng(3).normal(size=(300, 28)) * 10.0 ** np.arange(-14, 14)
    raw = json.dumps({"model": "m", "examples": [{"x": r, "y": 1} for r in X.tolist()]}).encode()
    got = scan_dense_examples(raw, 28, 300)
    assert got is not None
    assert_same(got, raw, 28, 300)
    assert np.array_equal(got.X, X)


# ------------------------------------------------------------------ refused shapes

GOOD = '{"model": "m", "examples": [{"x": [1.5, 2], "y": "a"}, {"y": 3, "x": [0.25, -1]}]}'


def test_good_body_accepted() -> None:
    r = scan_dense_examples(GOOD.encode(), 2, 2)
    assert r is not None and r.labels == ["a", 3]


def body_with(x: str = "[1.5, 2]", y: str = '"a"', model: str = '"m"') -> str:
    return f'{{"model": {model}, "examples": [{{"x": {x}, "y": {y}}}]}}'


NONE_CASES = {
    # keys
    "unknown top key": '{"model": "m", "examples": [{"x": [1, 2], "y": 1}], "z": 1}',
    "missing model": '{"examples": [{"x": [1, 2], "y": 1}]}',
    "missing examples": '{"model": "m"}',
    "wrong key": '{"modle": "m", "examples": [{"x": [1, 2], "y": 1}]}',
    "duplicate model": '{"model": "m", "model": "m", "examples": [{"x": [1, 2], "y": 1}]}',
    "duplicate examples": (
        '{"model": "m", "examples": [{"x": [1, 2], "y": 1}], "examples": [{"x": [1, 2], "y": 1}]}'
    ),
    "escaped key": '{"mod\\u0065l": "m", "examples": [{"x": [1, 2], "y": 1}]}',
    "extra example key": '{"model": "m", "examples": [{"x": [1, 2], "y": 1, "w": 2}]}',
    "missing y": '{"model": "m", "examples": [{"x": [1, 2]}]}',
    "missing x": '{"model": "m", "examples": [{"y": 1}]}',
    "duplicate x": '{"model": "m", "examples": [{"x": [1, 2], "x": [1, 2], "y": 1}]}',
    "duplicate y": '{"model": "m", "examples": [{"x": [1, 2], "y": 1, "y": 1}]}',
    "key y at top": '{"model": "m", "examples": [{"x": [1, 2], "y": 1}], "y": 1}',
    # examples
    "empty examples": '{"model": "m", "examples": []}',
    "examples not array": '{"model": "m", "examples": {"x": [1, 2], "y": 1}}',
    "example not object": '{"model": "m", "examples": [[1, 2]]}',
    "example null": '{"model": "m", "examples": [null]}',
    "too many examples": (
        '{"model": "m", "examples": [{"x": [1, 2], "y": 1}, {"x": [1, 2], "y": 1}, '
        '{"x": [1, 2], "y": 1}]}'
    ),
    "trailing comma examples": '{"model": "m", "examples": [{"x": [1, 2], "y": 1},]}',
    "trailing comma object": '{"model": "m", "examples": [{"x": [1, 2], "y": 1}],}',
    # x
    "dim short": body_with(x="[1.5]"),
    "dim long": body_with(x="[1.5, 2, 3]"),
    "x empty": body_with(x="[]"),
    "x not array": body_with(x="1.5"),
    "x object": body_with(x='{"0": 1.5, "1": 2}'),
    "nested array": body_with(x="[[1.5], 2]"),
    "string in x": body_with(x='[1.5, "2"]'),
    "bool in x": body_with(x="[1.5, true]"),
    "null in x": body_with(x="[1.5, null]"),
    "trailing comma x": body_with(x="[1.5, 2,]"),
    "NaN": body_with(x="[NaN, 2]"),
    "Infinity": body_with(x="[Infinity, 2]"),
    "-Infinity": body_with(x="[-Infinity, 2]"),
    "1e400": body_with(x="[1e400, 2]"),
    "leading zero": body_with(x="[01, 2]"),
    "leading zero neg": body_with(x="[-01.5, 2]"),
    "plus": body_with(x="[+1, 2]"),
    "dot end": body_with(x="[1., 2]"),
    "dot start": body_with(x="[.5, 2]"),
    "lone minus": body_with(x="[-, 2]"),
    "exponent without digits": body_with(x="[1e, 2]"),
    "exponent sign only": body_with(x="[1e+, 2]"),
    "hex": body_with(x="[0x10, 2]"),
    "too many digits": body_with(x="[12345678901234567890, 2]"),
    "subnormal": body_with(x="[5e-324, 2]"),
    "largest subnormal": body_with(x="[2.2250738585072011e-308, 2]"),
    "20 significant digits": body_with(x="[0.12345678901234567890, 2]"),
    "20 digits, trailing zeros": body_with(x="[1.0000000000000000000, 2]"),
    "beyond the largest double": body_with(x="[1.7976931348623159e308, 2]"),
    "1e309": body_with(x="[1e309, 2]"),
    "halfway, exponent < 0": body_with(x="[9007199254740993.0, 2]"),
    # y
    "y true": body_with(y="true"),
    "y false": body_with(y="false"),
    "y null": body_with(y="null"),
    "y 1.": body_with(y="1."),
    "y 20 significant digits": body_with(y="1000000000000000000.0"),  # beyond _number
    "y empty string": body_with(y='""'),
    "y escaped string": body_with(y='"a\\"b"'),
    "y unicode escape": body_with(y='"\\u00e9"'),
    "y control char": body_with(y='"a\tb"'),
    "y 20 digits": body_with(y="18446744073709551615"),
    "y leading zero": body_with(y="01"),
    "y plus": body_with(y="+1"),
    "y array": body_with(y='["a"]'),
    "y object": body_with(y='{"a": 1}'),
    # model
    "model escape": body_with(model='"m\\n"'),
    "model control": body_with(model='"m\n"'),
    "model number": body_with(model="1"),
    "model null": body_with(model="null"),
    # whole body
    "trailing garbage": GOOD + "x",
    "two objects": GOOD + GOOD,
    "trailing comma": GOOD + ",",
    "truncated": GOOD[:-1],
    "truncated mid number": GOOD[: GOOD.index("0.25") + 2],
    "truncated after colon": '{"model": "m", "examples":',
    "top array": "[" + GOOD + "]",
    "unquoted key": '{model: "m", "examples": [{"x": [1, 2], "y": 1}]}',
    "single quotes": "{'model': 'm', 'examples': [{'x': [1, 2], 'y': 1}]}",
    "nbsp whitespace": GOOD.replace(" ", "\u00a0"),
    "form feed": GOOD.replace(" ", "\f"),
    "comment": GOOD.replace(", ", ", /* c */ ", 1),
    "empty": "",
}


@pytest.mark.parametrize(("digits", "exponent"), [(1_000, "1e1005"), (200_000, "1e200005")])
def test_long_fraction_zeros_offset_by_a_long_exponent(digits: int, exponent: str) -> None:
    """0.000...01e+N: the exponent must be read whole (a saturated one read
    0.(200k zeros)1e200005 as 0.0; orjson reads 10000.0)."""
    num = "0." + "0" * digits + exponent

    def body(number: str) -> bytes:
        return b'{"model": "m", "examples": [{"x": [' + number.encode() + b', 1], "y": "a"}]}'

    raw = body(num)
    ref = orjson.loads(raw)["examples"][0]["x"][0]
    got = scan_dense_examples(raw, 2, 2)
    if got is not None:
        assert got.X[0, 0] == ref
    huge = body(num.replace("1e", "1e9"))
    assert scan_dense_examples(huge, 2, 2) is None  # orjson: infinity -> refused


NUMERIC_Y = ["1.5", "1e3", "1.05", "1.0e0", "9007199254740992.0", "9223372036854775808",
             "-9223372036854775809", "-0e0", "2.5E-7"]  # fmt: skip


@pytest.mark.parametrize("y", NUMERIC_Y)
def test_a_number_that_is_no_int64_label_is_read_as_orjsons_float(y: str) -> None:
    """(For a regressor's target; a classifier's adapter sends such a body to the
    general path, which reads a whole one as its integer and refuses the rest.)"""
    got = scan_dense_examples(body_with(y=y).encode(), 2, 2)
    assert got is not None and type(got.labels[0]) is float
    want = float(orjson.loads(y))
    assert np.float64(got.labels[0]).view(np.uint64) == np.float64(want).view(np.uint64)


@pytest.mark.parametrize("case", list(NONE_CASES))
def test_refused(case: str) -> None:
    raw = NONE_CASES[case].encode()
    assert scan_dense_examples(raw, 2, 2) is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "\xff", "examples": [{"x": [1, 2], "y": 1}]}',
        b'{"model": "m", "examples": [{"x": [1, 2], "y": "\xc3"}]}',
        b'{"model": "m", "examples": [{"x": [1, 2], "y": "\xed\xa0\x80"}]}',  # surrogate
        b'{"model": "m", "examples": [{"x": [1, 2], "y": "a"}, {"x": [1, 2], "y": "\xc0\xaf"}]}',
    ],
)
def test_invalid_utf8_refused(raw: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)
    assert scan_dense_examples(raw, 2, 2) is None


def test_bad_arguments() -> None:
    assert scan_dense_examples(GOOD.encode(), 2, 0) is None
    assert scan_dense_examples(GOOD.encode(), 3, 2) is None
    assert scan_dense_examples(GOOD.encode(), 2, 1) is None
