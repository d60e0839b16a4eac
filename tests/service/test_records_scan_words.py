"""The records scanner's word-at-a-time paths (:mod:`service.models.json_scan_words`)
where the fuzz of test_records_scan seldom goes: strings and keys whose last word
would cross the end of the body or of the names' bytes (read from further back, or
byte by byte), a repeated string of every length from 0 to 19 bytes, and field names
a JSON key cannot carry raw (compared after the key is scanned, as before)."""

from __future__ import annotations

import random

import pytest

from learners.records import RecordEncoder
from tests.service.test_records_scan import check_body

CONFIGS = [
    {"a": {"type": "categorical"}, "bb": {"type": "categorical"}},  # names: 3 bytes
    {"a_rather_long_name": {"type": "categorical"}, "n": {"type": "numeric"},
     "b": {"type": "text", "words": {"ngrams": 2}}},
    {"x\\n": {"type": "categorical"}, 'q"t': {"type": "categorical"},
     "c": {"type": "categorical"}},
]  # fmt: skip
WORDS = ["", "a", "ab", "abc", "abcdefg", "abcdefgh", "abcdefghi", "x" * 15, "y" * 16, "z" * 19]


def body(rng: random.Random, names: list[str], n: int) -> bytes:
    examples = []
    for _ in range(n):
        members = []
        for name in names:
            if rng.random() < (0.8 if name.isidentifier() else 0.1):
                raw = '"' not in name and rng.random() < 0.5  # x\n raw: another key
                key = name if raw else name.replace("\\", "\\\\").replace('"', '\\"')
                value = rng.choice(["1.5", "0", "null"]) if name == "n" else None
                if value is None:
                    s = rng.choice(WORDS)
                    value = f'"{s[: rng.randrange(len(s) + 1)] if rng.random() < 0.3 else s}"'
                members.append(f'"{key}":{value}')
        rng.shuffle(members)
        examples.append('{"y":1,"x":{' + ",".join(members) + "}}")
    # the list last: the last record's strings end a few bytes before the body
    return ('{"model":"m","examples":[' + ",".join(examples) + "]}").encode()


@pytest.mark.parametrize("c", range(len(CONFIGS)))
def test_word_paths_read_as_the_general_path(c: int) -> None:
    fields = CONFIGS[c]
    enc = RecordEncoder({"kind": "records", "bits": 12, "fields": fields})
    rng = random.Random(c)
    taken = 0
    for _ in range(200):
        taken += check_body(enc, body(rng, list(fields), rng.choice([1, 2, 7])))
    assert taken >= 100


def test_a_raw_key_spelling_an_escaped_name_is_not_that_field() -> None:
    # the name x\n (a backslash, then n): the key "x\n" is x and a newline, not this
    # field; the scanner must read it as the general path does (or decline)
    enc = RecordEncoder({"kind": "records", "bits": 10, "fields": {
        "x\\n": {"type": "categorical"}, "c": {"type": "categorical"}}})  # fmt: skip
    for x in ('{"x\\n":"v","c":"w"}', '{"c":"w","x\\n":"v"}'):
        raw = ('{"model":"m","examples":[{"x":' + x + ',"y":1},{"x":' + x + ',"y":2}]}').encode()
        check_body(enc, raw)
