"""Records bodies read straight from their bytes (``service.models.fast_json_records``)
against the general path (orjson, then ``RecordEncoder``): the same batch bit for bit
and the same new feature names, on UCI Adult's and the SMS collection's real records and
on fuzzed bodies (random fields, Unicode text with every JSON escape, numbers in every
JSON form, nulls, lists); the same log entry byte for byte through the adapter; and
every body it does not read gives None, so the general path answers, with its 422
naming the field, the model unchanged (through HTTP)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from learners.csr_batch import Batch
from learners.records import RecordEncoder
from service.errors import ServiceError
from service.models.fast_json_records import scan_records_examples, scan_records_instances
from service.models.linear import LinearAdapter
from service.settings import Settings
from tests.learners.test_records_quality import adult_config, sms_config
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import info, ok

pytest_plugins = ["tests.learners.test_records_quality"]  # the adult and sms fixtures

JSON = {"content-type": "application/json"}


def same(a: Batch, b: Batch) -> None:
    """Equal to the bit: dims, dtypes and bytes of the three arrays."""
    assert a.dim == b.dim
    for k in ("indptr", "indices", "values"):
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), k


def everything(h: np.ndarray) -> np.ndarray:
    return h  # every name is new


def check_body(enc: RecordEncoder, raw: bytes) -> bool:
    """The scanner's reading of ``raw`` equals the general path's; False if it declined."""
    got = scan_records_examples(raw, enc, 10**6, everything)
    if got is None:
        return False
    body = orjson.loads(raw)
    xs = [ex["x"] for ex in body["examples"]]
    # (encode_named sums a column made twice in a row in another order than encode:
    # canonical_rows, by value; each reading is compared with its own)
    ref_named, names = enc.encode_named(xs, everything)
    same(got[1], ref_named)
    assert got[4] == names
    known = scan_records_examples(raw, enc, 10**6, lambda h: h[:0])  # no name is new
    assert known is not None and known[4] == []
    same(known[1], ref_named)
    ref = enc.encode(xs)
    assert (got[0], got[2]) == (body["model"], [ex["y"] for ex in body["examples"]])
    weights = [ex.get("weight", 1.0) for ex in body["examples"]]
    assert got[3] == (weights if any("weight" in ex for ex in body["examples"]) else None)
    plain = scan_records_examples(raw, enc, 10**6)
    assert plain is not None and plain[4] is None
    same(plain[1], ref)
    inst = orjson.dumps({"model": "m", "instances": [{"x": x} for x in xs]})
    scanned = scan_records_instances(inst, enc, 10**6)
    assert scanned is not None
    same(scanned, ref)
    return True


def examples_body(xs: list[Any], ys: list[Any]) -> bytes:
    return orjson.dumps({"model": "m", "examples": [{"x": x, "y": y} for x, y in zip(xs, ys)]})


def test_real_adult_records(adult: Any) -> None:
    tr, ytr, te, yte = adult
    for cfg in (adult_config("bins"), adult_config("log1p", (("c", "c"), ("n", "c")))):
        enc = RecordEncoder(cfg)
        assert check_body(enc, examples_body(tr, ytr))
        assert check_body(enc, examples_body(te[:2000], yte[:2000]))


@pytest.mark.parametrize(
    "kw",
    [
        {"chars": {"ngrams": [3, 5]}},
        {"words": {"ngrams": 2}},
        {"words": {"ngrams": 3, "skips": 1}, "chars": {"ngrams": [2, 4], "across_words": True}},
    ],
)
def test_real_sms_texts(sms: Any, kw: dict[str, Any]) -> None:
    tr, ytr, te, _ = sms
    enc = RecordEncoder(sms_config(**kw))
    assert check_body(enc, examples_body(tr + te, ytr + ytr[: len(te)]))


# ---------------------------------------------------------------- fuzz

FUZZ_CONFIGS: list[dict[str, Any]] = [
    {"kind": "records", "bits": 6, "interactions": [["c", "n"], ["c", "c"], ["t", "c", "n"]],
     "fields": {"a": {"type": "numeric", "namespace": "n"},
                "b": {"type": "numeric", "transform": "log1p", "namespace": "n"},
                "é": {"type": "numeric", "namespace": "n",
                      "transform": {"bins": [-1, 0, 0.5, 1e3]}},
                "c": {"type": "categorical", "namespace": "c"},
                "d": {"type": "categorical", "namespace": "c"},
                "t": {"type": "text", "namespace": "t", "words": {"ngrams": 2, "skips": 1},
                      "chars": {"ngrams": [1, 3]}}}},
    {"kind": "records", "bits": 12, "intercept": False,
     "fields": {"t": {"type": "text", "lowercase": False, "weighting": "tf", "normalize": False,
                      "chars": {"ngrams": [2, 5], "across_words": True}},
                "u": {"type": "text", "weighting": "binary", "words": None,
                      "chars": {"ngrams": [3, 3]}},
                "c": {"type": "categorical"}, "a": {"type": "numeric"}}},
]  # fmt: skip

CHARS = [
    *"abcXYZ019 .,-_'", "é", "ß", "İ", "Σ", "ς", "中", "文", "😀", "\u0301", "\u0900",
    "\n", "\t", '"', "\\", "/", "\x00", "\x1f", "\u2028", "\ufeff", "\U0010ffff", " ", "  ",
]  # fmt: skip
SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\n": "\\n", "\t": "\\t", "\b": "\\b"}


def json_string(rng: random.Random, s: str) -> str:
    out = ['"']
    for ch in s:
        cp = ord(ch)
        r = rng.random()
        if ch in SHORT and (r < 0.5 or ch in '"\\\n\t'):
            out.append(SHORT[ch])
        elif cp < 0x20 or r < 0.2:  # \uXXXX, astral code points as a surrogate pair
            if cp >= 0x10000:
                v = cp - 0x10000
                out.append(f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04X}")
            else:
                out.append(f"\\u{cp:04x}" if r < 0.1 else f"\\u{cp:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_number(rng: random.Random) -> str:
    form = rng.randrange(9)
    if form == 0:
        return str(rng.randint(-1000, 1000))
    if form == 1:
        return str(rng.randint(-(10**19) + 1, 10**19 - 1))
    if form == 2:
        return repr(rng.uniform(-1e6, 1e6))
    if form == 3:
        return f"{rng.uniform(-10, 10):.{rng.randrange(1, 6)}e}".replace("e+0", "E+")
    if form == 4:
        return rng.choice(["0", "-0", "0.0", "-0.0", "0e5", "-0.000", "1.500", "1E2", "2e-3"])
    if form == 5:
        return f"{rng.randint(0, 99)}.{rng.randint(0, 10**6):06d}e{rng.randint(-30, 30)}"
    if form == 6:
        return repr(rng.choice([1e-300, 5e307, -1e200, 123456789.123456789, 0.1, 1 / 3]))
    if form == 7:
        return "0.000" + str(rng.randint(1, 10**9))
    return repr(float(rng.randint(-5, 5)) / 4)


def ws(rng: random.Random) -> str:
    return rng.choice(["", "", "", " ", "\n  ", "\t", "\r\n"])


def fuzz_value(rng: random.Random, kind: str) -> str:
    if rng.random() < 0.1:
        return "null"
    if kind == "numeric":
        return json_number(rng)
    words = [
        "".join(rng.choice(CHARS) for _ in range(rng.randrange(0, 8)))
        for _ in range(rng.randrange(0, 7))
    ]
    if kind == "text":
        return json_string(rng, rng.choice([" ", "  ", "-", ""]).join(words))
    pool = words or [""]
    if rng.random() < 0.4:  # a list, repeats included
        items = [json_string(rng, rng.choice(pool)) for _ in range(rng.randrange(0, 5))]
        return "[" + ws(rng) + ("," + ws(rng)).join(items) + ws(rng) + "]"
    return json_string(rng, rng.choice(pool))


def fuzz_record(rng: random.Random, cfg: dict[str, Any], others: bool = False) -> str:
    members = [
        (name, fuzz_value(rng, f["type"]))
        for name, f in cfg["fields"].items()
        if rng.random() < 0.8
    ]
    for k in range(rng.randrange(0, 3) if others else 0):  # fields the config ignores
        other = rng.choice(['"x"', "1.5e3", "true", "false", "null", json_string(rng, "ü\n")])
        members.append((f"other{k}", other))
    rng.shuffle(members)
    # a key spelled with an escape now and then: the general path reads those
    keys = [json_string(rng, k) if rng.random() < 0.02 else f'"{k}"' for k, _ in members]
    inner = ("," + ws(rng)).join(
        f"{k}{ws(rng)}:{ws(rng)}{v}" for k, (_, v) in zip(keys, members, strict=True)
    )
    return "{" + ws(rng) + inner + ws(rng) + "}"


def fuzz_body(rng: random.Random, cfg: dict[str, Any], n: int) -> bytes:
    examples = []
    # fields the config does not read, in a tenth of the bodies: the general path takes
    # those (it lists them in the answer, or refuses a record of nothing else)
    others = rng.random() < 0.1
    for _ in range(n):
        label = rng.choice(['"a"', "1", '"b"'])
        parts = [f'"x":{ws(rng)}{fuzz_record(rng, cfg, others)}', f'"y": {label}']
        if rng.random() < 0.2:
            parts.append(f'"weight": {rng.choice(["0.5", "2", "1e-3"])}')
        rng.shuffle(parts)
        examples.append("{" + ", ".join(parts) + "}")
    return f'{ws(rng)}{{"examples": [{", ".join(examples)}], "model": "m"}}{ws(rng)}'.encode()


@pytest.mark.parametrize("c", range(len(FUZZ_CONFIGS)))
def test_fuzzed_bodies_read_as_the_general_path_reads_them(c: int) -> None:
    cfg = FUZZ_CONFIGS[c]
    enc = RecordEncoder(cfg)
    rng = random.Random(c)
    taken = 0
    for trial in range(300):
        raw = fuzz_body(rng, cfg, rng.choice([1, 2, 5, 30]))
        orjson.loads(raw)  # the fuzz writes valid JSON
        taken += check_body(enc, raw)
    # bodies with a key written with an escape, or a field the config does not read, go
    # the general way
    assert taken >= 200


# ---------------------------------------------------------------- declined bodies

CONFIG = {
    "kind": "records",
    "bits": 16,
    "max_text_bytes": 20,
    "max_features_per_record": 30,
    "unknown_fields": "refuse",
    "fields": {
        "age": {"type": "numeric", "transform": "log1p"},
        "job": {"type": "categorical"},
        "text": {"type": "text", "chars": {"ngrams": [2, 3]}},
    },
}

# (the second record as JSON text, the field the general path's 422 names)
BAD = [
    ('{"age": true}', "examples[1].x.age"),
    ('{"age": "3"}', "examples[1].x.age"),
    ('{"age": 1e999}', "examples[1].x.age"),
    ('{"job": 3}', "examples[1].x.job"),
    ('{"job": ["a", null]}', "examples[1].x.job[1]"),
    ('{"job": {"a": 1}}', "examples[1].x.job"),
    ('{"text": ["a"]}', "examples[1].x.text"),
    ('{"text": "twenty-one bytes long"}', "examples[1].x.text"),
    ('{"text": "abcd efgh ijkl mnop"}', "examples[1].x.text"),  # over 30 features
    ('{"salary": 3}', "examples[1].x.salary"),
    ('{"job": ["a"], "job": "b", "age": true}', "examples[1].x.age"),
    ('{"ag\\u0065": false}', "examples[1].x.age"),
]


@pytest.mark.parametrize(("x", "field"), BAD)
def test_declined_bodies_get_the_general_paths_422(tmp_path: Path, x: str, field: str) -> None:
    settings = Settings(data_dir=str(tmp_path))
    good = '{"age": 30, "job": "clerk", "text": "hi there"}'
    raw = f'{{"model": "m", "examples": [{{"x": {good}, "y": "b"}}, {{"x": {x}, "y": "a"}}]}}'
    raw_b = raw.encode()
    lin = LinearAdapter.create(
        LinearAdapter.normalize_config({"algorithm": "arow", "features": CONFIG}, settings)
    )
    assert lin.parse_update_raw(raw_b, settings) is None
    with pytest.raises(ServiceError) as e:
        lin.parse_update(json.loads(raw_b), settings, raw_b)  # (orjson refuses 1e999)
    assert e.value.field == field
    with ServerThread(settings) as srv, srv.client() as c:
        r = c.put("/models/m", json={"algorithm": "arow", "features": CONFIG})
        assert r.status_code == 201, r.text
        ok(c.post("/update", content=raw.replace(x, good).encode(), headers=JSON))
        before = info(c, "m")
        r = c.post("/update", content=raw_b, headers=JSON)
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == field, r.text
        after = info(c, "m")
        assert (after["version"], after["state_digest"]) == (
            before["version"],
            before["state_digest"],
        )


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "examples": [{"x": {"text": "\\ud800 lone"}, "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"job": "\xff"}, "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"job": "a\x01"}, "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"job": "a"}, "y": "a"}]} x',
        b'{"model": "m", "examples": [{"x": {"job": "a"}, "y": "a"}]',
        b'{"model": "m", "examples": [{"x": {"job": "a",}, "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"job": "a"} "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"age": 01}, "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"other": [1]}, "y": "a"}]}',
        b'{"model": "m", "examples": [{"x": {"other": tru}, "y": "a"}]}',
    ],
)
def test_invalid_or_unread_bodies_are_declined(raw: bytes) -> None:
    cfg = {**CONFIG, "unknown_fields": "ignore"}
    enc = RecordEncoder(cfg)
    assert scan_records_examples(raw, enc, 10) is None
    assert scan_records_instances(raw.replace(b'"examples"', b'"instances"'), enc, 10) is None


def test_adapter_writes_the_general_paths_log_entry() -> None:
    """``parse_update_raw`` of a records body is ``parse_update``'s entry, byte for byte,
    with the names the model does not know yet (and none once it knows them all)."""
    for max_names in (100_000, 5):
        settings = Settings(max_feature_names=max_names)
        cfg = FUZZ_CONFIGS[0]
        body = {"algorithm": "pa", "features": cfg}
        fast_side = LinearAdapter.create(LinearAdapter.normalize_config(body, settings))
        slow_side = LinearAdapter.create(LinearAdapter.normalize_config(body, settings))
        rng = random.Random(7)
        for _ in range(20):
            raw = fuzz_body(rng, cfg, 5)
            fast = fast_side.parse_update_raw(raw, settings)
            slow, n = slow_side.parse_update(orjson.loads(raw), settings, raw)
            if fast is None:
                continue
            assert (fast.model, fast.n, fast.payload) == ("m", n, slow)
            refused = []
            for side, payload in ((fast_side, fast.payload), (slow_side, slow)):
                try:  # (a fuzzed value may overflow PA's weights: refused alike)
                    side.apply(payload)
                except ValueError as e:
                    refused.append(str(e))
            assert len(refused) in (0, 2) and len(set(refused)) <= 1, refused
            assert fast_side.state_digest() == slow_side.state_digest()


def test_stateful_configs_stay_on_the_general_path() -> None:
    settings = Settings()
    cfg = {"kind": "records", "fields": {"a": {"type": "numeric", "transform": "standardize"}}}
    lin = LinearAdapter.create(
        LinearAdapter.normalize_config({"algorithm": "arow", "features": cfg}, settings)
    )
    raw = b'{"model": "m", "examples": [{"x": {"a": 1.5}, "y": "a"}]}'
    assert lin.parse_update_raw(raw, settings) is None
    assert scan_records_examples(raw, lin.spec.encoder, 10) is None


def test_predict_reads_the_bytes_and_answers_as_the_general_path(tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        cfg = FUZZ_CONFIGS[1]
        assert c.put("/models/m", json={"algorithm": "arow", "features": cfg}).status_code == 201
        rng = random.Random(3)

        def record() -> dict[str, Any]:  # numbers a learner takes (not 5e307)
            x = orjson.loads(fuzz_record(rng, cfg))
            if isinstance(x.get("a"), int | float):
                x["a"] = max(-10.0, min(10.0, x["a"]))
            return x

        examples = [{"x": record(), "y": rng.choice("ab")} for _ in range(50)]
        ok(c.post("/update", json={"model": "m", "examples": examples}))
        xs = [record() for _ in range(20)]
        raw = httpx.Request("POST", "/", json={"model": "m", "instances": [{"x": x} for x in xs]})
        assert scan_records_instances(raw.content, RecordEncoder(cfg), 100) is not None
        fast = ok(c.post("/predict", content=raw.content, headers=JSON))
        # min_version makes the body one the scanner declines: the general path
        body = {"model": "m", "min_version": 0, "instances": [{"x": x} for x in xs]}
        slow = ok(c.post("/predict", content=httpx.Request("POST", "/", json=body).content,
                         headers=JSON))  # fmt: skip
        assert fast["predictions"] == slow["predictions"]


def test_docstring_examples_run() -> None:
    import doctest

    from service.models import fast_json_records

    result = doctest.testmod(fast_json_records, verbose=False)
    assert result.attempted > 0 and result.failed == 0
