"""The compiled scanners read a regressor's numeric targets: for dense, sparse, hashed and
raw-records bodies with fractional, exponent, negative-zero and integer ``y``, the
scanner's log entry is byte for byte the general path's (orjson); a classifier's body
with such a ``y`` leaves the scanner for the general path, which reads ``1e3`` as the
label 1000 and refuses ``1.5`` naming it, as before."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest

from service.errors import ServiceError
from service.models.linear import LinearAdapter
from service.models.payload import decode_payload
from service.models.regression import RegressionAdapter
from service.settings import Settings
from tests.service.test_update_fast_path import body, named_body, sparse_body

SETTINGS = Settings()
# what clients write: shortest reprs, exponents, -0.0, integers, 19+ digits
TARGETS = [1.5, -2.25e-3, 123456.789, -0.0, 0.0, 7, -3, 1e30, 2.5e-300,
           0.1 + 0.2, 12345678901234567890.5, 3.0]  # fmt: skip
TEXT = [b"1e3", b"-0e0", b"2E+2", b"0.000001", b"-12.5e-1"]


def regressor(features: dict[str, Any]) -> RegressionAdapter:
    config = RegressionAdapter.normalize_config(
        {"algorithm": "arow_regression", "features": features}, SETTINGS
    )
    return RegressionAdapter.create(config)


def classifier(features: dict[str, Any]) -> LinearAdapter:
    config = LinearAdapter.normalize_config({"algorithm": "arow", "features": features}, SETTINGS)
    return LinearAdapter.create(config)


def with_text_targets(raw: bytes) -> bytes:
    """The body with its first targets written as ``TEXT`` (forms json.dumps never writes)."""
    obj = json.loads(raw)
    parts = raw.split(b'"y": ') if b'"y": ' in raw else raw.split(b'"y":')
    sep = b'"y": ' if b'"y": ' in raw else b'"y":'
    out = [parts[0]]
    for k, part in enumerate(parts[1:]):
        if k < len(TEXT):
            end = min(i for i in (part.find(b","), part.find(b"}")) if i >= 0)
            part = TEXT[k] + part[end:]
        out.append(part)
    assert len(obj["examples"]) == len(parts) - 1
    return sep.join(out)


def same_entry(a: Any, raw: bytes) -> None:
    fast = a.parse_update_raw(raw, SETTINGS)
    assert fast is not None, raw[:200]
    slow, n = a.parse_update(orjson.loads(raw), SETTINGS, raw)
    assert (fast.n, fast.payload) == (n, slow)


@pytest.mark.parametrize("n", [1, 12, 100])
def test_dense_sparse_and_hashed_targets_scan_as_the_general_path_reads_them(n: int) -> None:
    rng = np.random.default_rng(n)
    cases = [
        ({"kind": "dense", "dim": 8}, lambda: body(rng, n, 8, 0.3, TARGETS)),
        ({"kind": "sparse", "dim": 300}, lambda: sparse_body(rng, n, 300, TARGETS)),
        ({"kind": "hashed", "bits": 12}, lambda: named_body(rng, n, TARGETS)),
    ]
    for features, make in cases:
        a = regressor(features)
        raw = make()
        same_entry(a, raw)
        same_entry(a, with_text_targets(raw))
        a.apply(a.parse_update_raw(raw, SETTINGS).payload)  # type: ignore[union-attr]


def test_raw_records_targets_scan_as_the_general_path_reads_them() -> None:
    features = {"kind": "records", "bits": 10, "fields": {
        "a": {"type": "numeric"}, "c": {"type": "categorical"}}}  # fmt: skip
    a = regressor(features)
    rng = np.random.default_rng(3)
    examples = [{"x": {"a": float(rng.normal()), "c": ["u", "v"][k % 2]}, "y": TARGETS[k % 12]}
                for k in range(40)]  # fmt: skip
    raw = json.dumps({"model": "m", "examples": examples}).encode()
    same_entry(a, raw)
    same_entry(a, with_text_targets(raw))


def test_a_string_target_is_refused_on_the_fast_path_too() -> None:
    a = regressor({"kind": "dense", "dim": 2})
    raw = b'{"model": "m", "examples": [{"x": [1, 2], "y": 1.5}, {"x": [1, 2], "y": "3"}]}'
    with pytest.raises(ServiceError) as e:
        a.parse_update_raw(raw, SETTINGS)
    assert e.value.field == "examples[1].y"


@pytest.mark.parametrize("features", [{"kind": "dense", "dim": 2}, {"kind": "sparse", "dim": 4}])
def test_a_classifiers_numeric_labels_keep_their_meaning(features: dict[str, Any]) -> None:
    a = classifier(features)
    x = "[1, 2]" if features["kind"] == "dense" else '{"0": 1, "3": 2}'
    for y, label in ((b"1e3", 1000), (b"2.0", 2), (b"-7", -7)):
        raw = b'{"model": "m", "examples": [{"x": ' + x.encode() + b', "y": ' + y + b"}]}"
        payload, _ = a.parse_update(orjson.loads(raw), SETTINGS, raw)
        fast = a.parse_update_raw(raw, SETTINGS)
        assert fast is None or fast.payload == payload, y  # "1e3" takes the general path
        assert decode_payload(payload, a.spec.dim)[1]["y"] == [label]
    raw = b'{"model": "m", "examples": [{"x": ' + x.encode() + b', "y": 1.5}]}'
    assert a.parse_update_raw(raw, SETTINGS) is None
    with pytest.raises(ServiceError) as e:
        a.parse_update(orjson.loads(raw), SETTINGS, raw)
    assert e.value.field == "examples[0].y"
