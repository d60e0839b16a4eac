"""Dense /update bodies read straight from their bytes (``parse_update_raw``) give the
very log entry the general path (orjson, then ``parse_update``) gives, and the
service takes that path only for the model the body names."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest

from service.api.errors import http_status
from service.errors import ServiceError
from service.models.linear import LinearAdapter
from service.settings import Settings
from tests.service.serving import ServerThread, dense_model

JSON = {"content-type": "application/json"}

SETTINGS = Settings(max_labels=4)


def adapter(dim: int) -> LinearAdapter:
    body = {"algorithm": "arow", "features": {"kind": "dense", "dim": dim}}
    return LinearAdapter.create(LinearAdapter.normalize_config(body, SETTINGS))


def body(rng: np.random.Generator, n: int, dim: int, zeros: float, labels: list[Any]) -> bytes:
    X = rng.normal(size=(n, dim)).round(int(rng.integers(1, 8)))
    X[rng.random((n, dim)) < zeros] = 0.0
    ys = [labels[int(k)] for k in rng.integers(0, len(labels), n)]
    examples = [{"x": x, "y": y} for x, y in zip(X.tolist(), ys, strict=True)]
    return json.dumps({"model": "m", "examples": examples}, ensure_ascii=False).encode()


@pytest.mark.parametrize("zeros", [0.0, 0.5, 0.95])  # 0.95: the CSR form is the smaller
@pytest.mark.parametrize("labels", [["s", "b"], [1, -1], ["+1", 1, "ü"]])
def test_raw_parse_gives_the_general_paths_log_entry(zeros: float, labels: list[Any]) -> None:
    rng = np.random.default_rng(len(labels) + int(zeros * 100))
    for n, dim in ((1, 1), (3, 5), (100, 28), (17, 300)):
        a = adapter(dim)
        raw = body(rng, n, dim, zeros, labels)
        fast = a.parse_update_raw(raw, SETTINGS)
        assert fast is not None, "the fast path must take plain dense bodies"
        slow, count = a.parse_update(orjson.loads(raw), SETTINGS, raw)
        assert (fast.model, fast.n, fast.payload) == ("m", count, slow)


def test_raw_parse_declines_what_it_cannot_prove_and_checks_the_label_budget() -> None:
    a = adapter(2)
    assert a.parse_update_raw(b'{"model": "m", "examples": [{"x": [1, 2]}]}', SETTINGS) is None
    many = [{"x": [1, 2], "y": f"l{i}"} for i in range(5)]  # max_labels=4
    raw = orjson.dumps({"model": "m", "examples": many})
    with pytest.raises(ServiceError) as e:
        a.parse_update_raw(raw, SETTINGS)
    assert (http_status(e.value), e.value.code) == (422, "too_many_labels")
    sparse = LinearAdapter.create(
        LinearAdapter.normalize_config(
            {"algorithm": "arow", "features": {"kind": "sparse", "dim": 4}}, SETTINGS
        )
    )
    one = b'{"model": "m", "examples": [{"x": [1, 2, 3, 4], "y": 1}]}'
    assert sparse.parse_update_raw(one, SETTINGS) is None
    for bad in ('{"4": 1}', '{"01": 1}', '{"1": 1, "1": 2}', '{"1": "a"}', '{" 1": 1}'):
        raw = b'{"model": "m", "examples": [{"x": ' + bad.encode() + b', "y": 1}]}'
        assert sparse.parse_update_raw(raw, SETTINGS) is None, bad
    many_sparse = [{"x": {"1": 1.0}, "y": f"l{i}"} for i in range(5)]
    with pytest.raises(ServiceError) as e:
        sparse.parse_update_raw(orjson.dumps({"model": "m", "examples": many_sparse}), SETTINGS)
    assert (http_status(e.value), e.value.code) == (422, "too_many_labels")


def map_adapter(features: dict[str, Any]) -> LinearAdapter:
    body = {"algorithm": "arow", "features": features}
    return LinearAdapter.create(LinearAdapter.normalize_config(body, SETTINGS))


def named_body(rng: np.random.Generator, n: int, labels: list[Any]) -> bytes:
    """Named features as the README's (ints, two categorical strings, rounded floats)."""
    examples = []
    for _ in range(n):
        x: dict[str, Any] = {"age": int(rng.integers(18, 90))}
        x["job"] = ["clerk", "exec", "", "é"][int(rng.integers(0, 4))]
        x["town"] = f"town{int(rng.integers(0, 50))}"
        for k in rng.choice(1000, 11, replace=False).tolist():
            x[f"w{k}"] = round(float(rng.normal()), int(rng.integers(1, 17)))
        examples.append({"x": x, "y": labels[int(rng.integers(0, len(labels)))]})
    return json.dumps({"model": "m", "examples": examples}, ensure_ascii=False).encode()


def sparse_body(rng: np.random.Generator, n: int, dim: int, labels: list[Any]) -> bytes:
    examples = []
    for _ in range(n):
        idx = rng.choice(dim, min(dim, 14), replace=False).tolist()
        x = {str(j): float(v) for j, v in zip(idx, rng.normal(size=len(idx)), strict=True)}
        examples.append({"x": x, "y": labels[int(rng.integers(0, len(labels)))]})
    return orjson.dumps({"model": "m", "examples": examples})


@pytest.mark.parametrize("labels", [["+1", "-1"], [1, -1], ["+1", 1, "ü"]])
def test_raw_parse_of_maps_gives_the_general_paths_log_entry(labels: list[Any]) -> None:
    rng = np.random.default_rng(len(labels))
    for bits in (20, 3):  # 3 bits: hash collisions summed within rows
        a = map_adapter({"kind": "hashed", "bits": bits})
        for n in (1, 100):
            raw = named_body(rng, n, labels)
            fast = a.parse_update_raw(raw, SETTINGS)
            assert fast is not None, "the fast path must take plain named-feature bodies"
            slow, count = a.parse_update(orjson.loads(raw), SETTINGS, raw)
            assert (fast.model, fast.n, fast.payload) == ("m", count, slow)
    for dim in (14, 1000):
        a = map_adapter({"kind": "sparse", "dim": dim})
        for n in (1, 100):
            raw = sparse_body(rng, n, dim, labels)
            fast = a.parse_update_raw(raw, SETTINGS)
            assert fast is not None, "the fast path must take plain sparse bodies"
            slow, count = a.parse_update(orjson.loads(raw), SETTINGS, raw)
            assert (fast.model, fast.n, fast.payload) == ("m", count, slow)


def test_service_learns_the_same_through_either_path(tmp_path: Any) -> None:
    """Two models fed the same examples, one with bodies the fast path takes, one with
    the same bodies reshaped (key order, extra whitespace, a 17-digit float) so some
    take the general path: equal states."""
    rng = np.random.default_rng(3)
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        for name in ("fast", "mixed"):
            assert c.put(f"/models/{name}", json=dense_model(3)).status_code == 201
        for i in range(20):
            X = rng.normal(size=(5, 3)).round(4)
            ex = [{"x": x, "y": "ab"[k % 2]} for k, x in enumerate(X.tolist())]
            plain = json.dumps({"model": "fast", "examples": ex})
            assert c.post("/update", content=plain, headers=JSON).status_code == 200
            other = json.dumps({"examples": ex, "model": "mixed"}, indent=1)
            if i % 2:  # the name spelled with escapes, which no scanner reads: the general path
                other = other.replace('"mixed"', '"\\u006dixed"')
            r = c.post("/update", content=other, headers=JSON)
            assert r.status_code == 200, r.text
        a, b = (c.get(f"/models/{n}").json() for n in ("fast", "mixed"))
        assert a["state_digest"] == b["state_digest"]
        assert a["examples_learned"] == b["examples_learned"] == 100


def random_example(rng: np.random.Generator, kind: str) -> dict[str, Any]:
    """One example with the inputs of issue #10 mixed in: no features, whole and other
    float labels, labels that clash as JSON keys, non-canonical sparse keys, an unknown
    field."""
    k = int(rng.integers(0, 4))
    if kind == "dense":
        x: Any = [0.0] * 3 if k == 0 else rng.normal(size=3).round(3).tolist()
    elif kind == "sparse":
        keys = ["0", "1", "2", "3"] if rng.random() < 0.9 else [" 1", "01", "+2", "\u0663", ""]
        x = {str(rng.choice(keys)): round(float(rng.normal()), 3) for _ in range(k)}
    else:
        x = {f"f{int(rng.integers(0, 9))}": round(float(rng.normal()), 3) for _ in range(k)}
    y = [1, -1, 2, "a", "1", "-1", 1.0, -1.0, 2.0, 1.5, 0.0][int(rng.integers(0, 11))]
    ex: dict[str, Any] = {"x": x, "y": y}
    if rng.random() < 0.05:
        ex["weight"] = 2
    if rng.random() < 0.5:
        ex = {"y": ex.pop("y"), **ex}
    return ex


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ServiceError as e:
        return ("error", http_status(e), e.code, e.message, e.field)


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("kind", ["dense", "sparse", "hashed"])
def test_new_input_rules_alike_on_both_paths(kind: str, intercept: bool) -> None:
    """A body the scanner takes gives the general path's log entry; a body the general
    path refuses is declined by the scanner or refused with the very same error."""
    features: dict[str, Any] = {"dense": {"kind": "dense", "dim": 3},
                                "sparse": {"kind": "sparse", "dim": 4},
                                "hashed": {"kind": "hashed", "bits": 3}}[kind]  # fmt: skip
    if intercept:
        features = {**features, "intercept": True}
    rng = np.random.default_rng(17 + len(kind))
    taken = refused = 0
    for known in ([], [1], ["1", "a"]):
        a = map_adapter(features)
        if known:  # labels the model already knows (clashes with them are refused)
            a.apply(a.parse_update({"examples": [{"x": ZEROS[kind], "y": y} for y in known]},
                                   SETTINGS)[0])  # fmt: skip
        for _ in range(150):
            examples = [random_example(rng, kind) for _ in range(int(rng.integers(1, 4)))]
            raw = orjson.dumps({"model": "m", "examples": examples})
            slow = outcome(lambda: a.parse_update(orjson.loads(raw), SETTINGS, raw))
            fast = outcome(a.parse_update_raw, raw, SETTINGS)
            if fast is None:
                continue
            if isinstance(fast, tuple):  # refused by the scanner's caller
                assert fast == slow, raw
                refused += 1
            else:
                assert (fast.payload, fast.n) == slow, raw
                taken += 1
            if isinstance(slow, tuple) and slow[0] == "error":
                assert isinstance(fast, tuple), raw
    assert taken > 50 and refused > 5, (taken, refused)


ZEROS: dict[str, Any] = {"dense": [0.0, 0.0, 0.0], "sparse": {}, "hashed": {}}


def test_a_label_clash_appended_meanwhile_is_skipped_at_apply() -> None:
    """Two workers parse against the same (empty) labels; the entry applied second would
    give the model both 1 and "1": ``apply`` refuses it (every replica alike: they hold
    the same labels at that position) and leaves the state unchanged."""
    for features in ({"kind": "dense", "dim": 3}, {"kind": "sparse", "dim": 4}):
        a = map_adapter(features)
        x = ZEROS[str(features["kind"])]
        first, _ = a.parse_update({"examples": [{"x": x, "y": 1}]}, SETTINGS)
        second, _ = a.parse_update({"examples": [{"x": x, "y": "b"}, {"x": x, "y": "1"}]}, SETTINGS)
        a.apply(first)
        before = a.state_digest()
        with pytest.raises(ValueError, match=r"labels\[1\].y: label '1' clashes with 1"):
            a.apply(second)
        assert a.state_digest() == before and a.model.labels_ == [1]
