"""Fuzzed model configs (issue 32, "done means"): drift, raw-records interactions and
limits, and model params replaced by any JSON value: no 5xx, and a refused ``PUT`` stores
nothing.

Each case starts from a valid config (a dense AROW model with a drift detector, a
raw-records model with text, interactions and limits) and changes one field to a value
drawn from :data:`VALUES` (null, booleans, zero and negative numbers, huge and tiny
ones, -0.0, strings, lists, objects, deep nesting). The invariant, after every case:

- the answer is never a 5xx (and never a timeout);
- a 4xx leaves no model of that name (``GET /models/{name}`` is 404), and ``GET
  /readyz`` lists no failed model;
- a 2xx made a model that learns one example and scores it without a 5xx, then is
  deleted.

Seeded and deterministic (``FUZZ_SEED``, default 32); the counts are printed (``-s``).
"""

from __future__ import annotations

import copy
import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.settings import Settings
from tests.service.serving import ServerThread

SEED = int(os.environ.get("FUZZ_SEED", "32"))
VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 3, 31, 32, 64, 10**6, 10**9, 2**63, -(2**63), 1e308,
    -1e308, 1e-300, 5e-324, -0.0, 0.5, "", "x", "adwin", "page_hinkley", "none", "both",
    "ignore", "refuse", "log1p", "standardize", [], [1], ["c"], [["c", "c"]], [["c"]],
    [["c", "t", "c", "t"]], [[["c"], "c"]], {}, {"a": 1}, {"ngrams": 10**6},
    {"ngrams": [3, 2]}, {"ngrams": [0, 99]}, {"bins": []}, {"bins": [3, 1]},
]  # fmt: skip

DENSE = {
    "algorithm": "arow",
    "features": {"kind": "dense", "dim": 3},
    "params": {"r": 1.0},
    "drift": {"detector": "adwin", "delta": 0.002, "clock": 32, "max_buckets": 5,
              "min_window_length": 5, "grace_period": 10, "on_detection": "none"},
}  # fmt: skip
PAGE_HINKLEY = {
    **DENSE,
    "drift": {"detector": "page_hinkley", "min_instances": 30, "delta": 0.005,
              "threshold": 50.0, "alpha": 0.9999, "mode": "both"},
}  # fmt: skip
RECORDS = {
    "algorithm": "arow",
    "features": {
        "kind": "records", "bits": 12, "intercept": True, "unknown_fields": "ignore",
        "max_features_per_record": 200, "max_text_bytes": 1000,
        "fields": {
            "n": {"type": "numeric", "transform": {"bins": [1, 2, 3]}},
            "c": {"type": "categorical", "namespace": "c"},
            "t": {"type": "text", "namespace": "t", "lowercase": True, "words": {"ngrams": 2},
                  "chars": {"ngrams": [2, 3]}, "weighting": "log_tf", "idf": False},
        },
        "interactions": [["c", "t"]],
    },
}  # fmt: skip
BASES = {"dense": DENSE, "page_hinkley": PAGE_HINKLEY, "records": RECORDS}
ONE = {
    "dense": {"x": [0.5, -1.0, 2.0], "y": "a"},
    "page_hinkley": {"x": [0.5, -1.0, 2.0], "y": "a"},
    "records": {"x": {"n": 2, "c": "u", "t": "Hello there"}, "y": "a"},
}


def paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field under ``drift``, ``features`` and ``params`` (not the roots)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if at or k in ("drift", "features", "params"):
                if at:
                    yield (*at, k)
                yield from paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*at, i)
            yield from paths(v, (*at, i))


def replaced(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = copy.deepcopy(value)
    return out


def cases(rng: random.Random) -> Iterator[tuple[str, tuple[Any, ...], Any]]:
    for kind, base in BASES.items():
        for path in paths(base):
            for value in [None, {}, *rng.sample(VALUES, 4)]:
                yield kind, path, value
        deep: Any = 1
        for _ in range(300):
            deep = [deep]
        yield kind, ("drift",) if "drift" in base else ("features", "fields"), deep


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    data = tmp_path_factory.mktemp("fuzz-configs")
    with ServerThread(Settings(data_dir=str(Path(data)))) as srv:
        yield srv


def test_fuzzed_configs_never_5xx_and_a_refusal_stores_nothing(server: ServerThread) -> None:
    rng = random.Random(SEED)
    counts: Counter[str] = Counter()
    with server.client(timeout=120) as c:
        for n, (kind, path, value) in enumerate(cases(rng)):
            name = f"f{n}"
            body = replaced(BASES[kind], path, value)
            r = c.put(f"/models/{name}", json=body)
            for _ in range(120):  # the kind's kernels compile on first use: 503 + Retry-After
                if r.status_code != 503 or r.json()["detail"]["error"] != "kernels_compiling":
                    break
                c.get("/healthz")
                r = c.put(f"/models/{name}", json=body)
            where = f"{kind} {path}={value!r:.80}: {r.status_code} {r.text[:300]}"
            assert r.status_code < 500, where
            counts[f"{r.status_code // 100}xx"] += 1
            if r.status_code >= 400:
                assert c.get(f"/models/{name}").status_code == 404, where
                continue
            learned = c.post("/update", json={"model": name, "examples": [ONE[kind]]})
            assert learned.status_code < 500, f"{where} -> /update {learned.text[:300]}"
            x = ONE[kind]["x"]
            scored = c.post("/predict", json={"model": name, "instances": [{"x": x}]})
            assert scored.status_code < 500, f"{where} -> /predict {scored.text[:300]}"
            assert c.delete(f"/models/{name}").status_code == 204, where
        ready = c.get("/readyz").json()
    print(f"fuzzed configs: {dict(counts)}")
    assert not ready.get("failed_models"), ready
    assert counts["4xx"] > 50 and counts["2xx"] > 10  # both sides exercised
