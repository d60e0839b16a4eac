"""Importance weights on POST /update over real HTTP, on both parse paths.

Bodies go compact (the numba scanners' shape) and with a top-level ``note`` (which
the scanners decline: the orjson path), as in test_api_inputs.py. A weight is stored
in the log entry, so the model equals the library's ``update(..., sample_weight)``
bit for bit; weight 1 equals no weight; a bad weight is a 422 naming
``examples[i].weight`` (``queries[q].weight``) and changes nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from learners.features import FeatureSpec
from learners.linear import make_classifier
from learners.ranking.ranksvm import RankSVM
from service.models.payload import decode_payload, encode_payload
from service.settings import Settings
from tests.service.serving import ServerThread

KINDS = {
    "dense": {"kind": "dense", "dim": 3},
    "sparse": {"kind": "sparse", "dim": 3},
    "hashed": {"kind": "hashed", "bits": 4},
}
ROWS = {
    "dense": [[1.0, 0.0, 2.0], [0.0, -1.5, 0.5], [0.3, 0.2, -1.0], [2.0, 1.0, 0.0]],
    "sparse": [{"0": 1.0, "2": 2.0}, {"1": -1.5, "2": 0.5}, {"0": 0.3, "1": 0.2, "2": -1.0},
               {"0": 2.0, "1": 1.0}],
    "hashed": [{"a": 1.0, "c": 2.0}, {"b": -1.5, "c": 0.5}, {"a": 0.3, "b": "x"}, {"a": 2.0}],
}  # fmt: skip
LABELS = ["+1", "-1", "-1", "+1"]
WEIGHTS = [2.5, ..., 0.25, 7]  # ...: no weight field


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("weights-api")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def bodies(name: str, examples: list[Any]) -> list[bytes]:
    compact = json.dumps({"model": name, "examples": examples}, separators=(",", ":"))
    # the model's name spelled with escapes: no scanner takes it (an unknown member,
    # once used for this, is refused)
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in name)
    general = f'{{"examples": {json.dumps(examples, indent=1)},\n "model": "{escaped}"}}'
    return [compact.encode(), general.encode()]


def post(client: httpx.Client, raw: bytes) -> httpx.Response:
    return client.post("/update", content=raw, headers={"content-type": "application/json"})


def digest(client: httpx.Client, name: str) -> str:
    return str(client.get(f"/models/{name}").json()["state_digest"])


def examples(kind: str, weights: list[Any]) -> list[dict[str, Any]]:
    out = []
    for x, y, h in zip(ROWS[kind], LABELS, weights, strict=True):
        ex: dict[str, Any] = {"x": x, "y": y}
        if h is not ...:
            ex["weight"] = h
        out.append(ex)
    return out


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("algorithm", ["pa1", "arow", "scw2"])
def test_weighted_update_equals_the_library_on_both_paths(
    client: httpx.Client, kind: str, algorithm: str
) -> None:
    spec = FeatureSpec.from_config(KINDS[kind])
    params = {"C": 0.05} if algorithm == "pa1" else {}  # a cap that binds: weights matter
    lib = make_classifier(algorithm, spec.dim, params)
    lib.update(spec.encode(ROWS[kind]), LABELS, [2.5, 1.0, 0.25, 7.0])
    plain = make_classifier(algorithm, spec.dim, params)
    plain.update(spec.encode(ROWS[kind]), LABELS)
    assert lib.state_digest() != plain.state_digest()
    for path in ("fast", "general"):
        name = f"w-{algorithm}-{kind}-{path}"
        body = {"algorithm": algorithm, "params": params, "features": KINDS[kind]}
        assert client.put(f"/models/{name}", json=body).status_code == 201
        r = post(client, bodies(name, examples(kind, WEIGHTS))[path == "general"])
        assert r.status_code == 200, r.text
        assert digest(client, name) == lib.state_digest(), path
        # weight 1 on every example is no weight, bit for bit
        name1 = f"{name}-ones"
        assert client.put(f"/models/{name1}", json=body).status_code == 201
        raw1 = bodies(name1, examples(kind, [1, 1.0, 1, 1.0]))[path == "general"]
        assert post(client, raw1).status_code == 200
        assert digest(client, name1) == plain.state_digest(), path


BAD = [0, 0.0, -1, -2.5, math.nan, math.inf, -math.inf, "2", True, None, [1], {"w": 1}]


@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_weights_are_422_naming_the_field_on_both_paths(
    client: httpx.Client, kind: str
) -> None:
    name = f"bad-{kind}"
    assert client.put(f"/models/{name}", json={"algorithm": "arow", "features": KINDS[kind]})
    assert post(client, bodies(name, examples(kind, [1, 2, 3, 4]))[0]).status_code == 200
    before = digest(client, name)
    for bad in BAD:
        for raw in bodies(name, examples(kind, [2, ..., bad, 1])):
            r = post(client, raw)
            assert r.status_code == 422, (bad, r.text)
            d = r.json()["detail"]
            assert d["field"] == "examples[2].weight", (bad, d)
            assert d["message"].startswith("examples[2].weight: must be a finite number > 0"), d
    for raw in (  # beyond float64, and a weight written twice (orjson keeps the last)
        b'{"model": "%s", "examples": [{"x": %s, "y": "a", "weight": 1e400}]}',
        b'{"model": "%s", "examples": [{"x": %s, "y": "a", "weight": 1e999}]}',
    ):
        r = post(client, raw % (name.encode(), json.dumps(ROWS[kind][0]).encode()))
        assert r.status_code == 422 and r.json()["detail"]["field"] == "examples[0].weight"
    assert digest(client, name) == before


def test_log_entries_keep_weights_only_when_sent() -> None:
    spec = FeatureSpec.sparse(3)
    batch = spec.encode(ROWS["sparse"][:2])
    old = encode_payload(batch, ["a", "b"])
    assert b'"w"' not in old  # an unweighted entry is what it was before weights existed
    assert decode_payload(old, 3)[1] == {"y": ["a", "b"]}
    weighted = encode_payload(batch, ["a", "b"], w=[2.0, 1e-300])
    assert decode_payload(weighted, 3)[1] == {"y": ["a", "b"], "w": [2.0, 1e-300]}


def test_huge_weights_saturate_on_linear_models(client: httpx.Client) -> None:
    """C·h and r/h reach the hard-constraint step at most: 1e308 is accepted, finite."""
    for algorithm in ("pa", "pa1", "pa2", "cw", "arow", "scw1", "scw2"):
        name = f"huge-{algorithm}"
        body = {"algorithm": algorithm, "features": KINDS["dense"]}
        assert client.put(f"/models/{name}", json=body).status_code == 201
        raw = bodies(name, examples("dense", [1e308, 1e308, 5e-324, 1e308]))[0]
        assert post(client, raw).status_code == 200
        pred = client.post("/predict", json={"model": name, "instances": [{"x": [1, 1, 1]}]})
        assert pred.status_code == 200 and math.isfinite(pred.json()["predictions"][0]["score"])


def test_ranker_query_weights(tmp_path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        body = {"algorithm": "ranksvm", "params": {"lam": 0.01, "pairs_per_group": None},
                "features": {"kind": "dense", "dim": 2}}  # fmt: skip
        for name in ("r", "r1"):
            assert c.put(f"/models/{name}", json=body).status_code == 201
        items = [{"x": [1.0, 0.0], "relevance": 2}, {"x": [0.0, 1.0], "relevance": 0},
                 {"x": [0.5, 0.5], "relevance": 1}]  # fmt: skip
        queries = [{"qid": 1, "items": items, "weight": 3}, {"qid": 2, "items": items[:2]}]
        assert c.post("/update", json={"model": "r", "queries": queries}).status_code == 200
        lib = RankSVM(2, lam=0.01, pairs_per_group=None)
        X = np.array([it["x"] for it in items + items[:2]])
        from learners.features import Batch

        lib.update(Batch.from_dense(X), [2, 0, 1, 2, 0], [3, 2], [3.0, 1.0])
        assert c.get("/models/r").json()["state_digest"] == lib.state_digest()
        ones = [{**queries[0], "weight": 1.0}, queries[1]]
        assert c.post("/update", json={"model": "r1", "queries": ones}).status_code == 200
        plain = RankSVM(2, lam=0.01, pairs_per_group=None)
        plain.update(Batch.from_dense(X), [2, 0, 1, 2, 0], [3, 2])
        assert c.get("/models/r1").json()["state_digest"] == plain.state_digest()
        before = c.get("/models/r").json()["state_digest"]
        for bad in (0, -1, "3", True, None, math.inf):
            q = [queries[1], {"items": items, "weight": bad}]
            raw = json.dumps({"model": "r", "queries": q})
            r = c.post("/update", content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 422 and r.json()["detail"]["field"] == "queries[1].weight"
        # a weight so large the steps overflow: refused before the log, naming the weight
        flipped = [{**it, "relevance": -it["relevance"]} for it in items]  # active pairs
        r = c.post("/update", json={"model": "r", "queries": [{"items": flipped, "weight": 1e308}]})
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == "queries[0].weight", r.text
        # /predict queries carry no weight
        r = c.post("/predict", json={"model": "r", "queries": [{"items": [{"x": [1, 0]}],
                                                                  "weight": 2}]})  # fmt: skip
        assert r.status_code == 422 and r.json()["detail"]["field"] == "queries[0].weight"
        assert c.get("/models/r").json()["state_digest"] == before


def test_delayed_labels_carry_weights(client: httpx.Client) -> None:
    """``{"id", "y", "weight"}`` learns the kept features with the weight, as the library."""
    body = {"algorithm": "arow", "features": KINDS["dense"]}
    assert client.put("/models/late", json=body).status_code == 201
    x, first = ROWS["dense"][0], ROWS["dense"][1]
    r = client.post("/update", json={"model": "late", "examples": [{"x": first, "y": "-1"}]})
    assert r.status_code == 200, r.text
    r = client.post("/predict", json={"model": "late", "instances": [{"x": x, "id": "v1"}]})
    assert r.status_code == 200, r.text
    ex = [{"id": "v1", "y": "+1", "weight": 3}, {"x": first, "y": "-1", "weight": 0.5}]
    r = client.post("/update", json={"model": "late", "examples": ex})
    assert r.status_code == 200, r.text
    lib = make_classifier("arow", 3, {})
    spec = FeatureSpec.dense(3)
    lib.update(spec.encode([first]), ["-1"])
    lib.update(spec.encode([x, first]), ["+1", "-1"], [3.0, 0.5])
    assert digest(client, "late") == lib.state_digest()
    r = client.post("/update", json={"model": "late", "examples": [{"id": "v2", "y": "+1",
                                                                    "weight": -1}]})  # fmt: skip
    assert r.status_code == 422 and r.json()["detail"]["field"] == "examples[0].weight"
