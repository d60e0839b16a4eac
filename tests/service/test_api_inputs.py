"""POST /update and /predict over real HTTP: the input rules real data needs (issue #10).

- an example with no features (``{}``, LIBSVM's all-zero rows) is the zero vector;
- a float label that is a whole number (``1.0``, as files give labels) is that integer;
- labels whose JSON keys would clash (``1`` and ``"1"``) are refused, naming the example;
- sparse keys are canonical decimal integers (``" 1"``, ``"01"``, ``"+1"``... are refused);
- an unknown field of an example or instance is refused, naming it.

Bodies are sent compact (the shape the byte scanners take) and reshaped with a top-level
``note`` (which the scanners decline) so both parse paths answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from learners.linear import ALGORITHMS
from service.settings import Settings
from tests.service.serving import ServerThread

KINDS = {
    "dense": {"kind": "dense", "dim": 3},
    "sparse": {"kind": "sparse", "dim": 3},
    "hashed": {"kind": "hashed", "bits": 4},
}
ONE = {"dense": [1.0, 0.0, 2.0], "sparse": {"0": 1.0, "2": 2.0}, "hashed": {"a": 1.0, "c": 2.0}}
ZERO = {"dense": [0, 0, 0], "sparse": {}, "hashed": {}}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("inputs-api")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def make(client: httpx.Client, name: str, kind: str, algorithm: str = "arow") -> None:
    body = {"algorithm": algorithm, "features": KINDS[kind]}
    r = client.put(f"/models/{name}", json=body)
    assert r.status_code in (200, 201), r.text


def bodies(name: str, examples: list[Any]) -> list[bytes]:
    """The body compact (scanner-shaped) and reshaped for the general path."""
    compact = json.dumps({"model": name, "examples": examples}, separators=(",", ":"))
    # the model's name spelled with escapes: no scanner takes it (an unknown member,
    # once used for this, is refused)
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in name)
    general = f'{{"examples": {json.dumps(examples, indent=1)},\n "model": "{escaped}"}}'
    return [compact.encode(), general.encode()]


def post(client: httpx.Client, path: str, raw: bytes) -> httpx.Response:
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def info(client: httpx.Client, name: str) -> dict[str, Any]:
    out: dict[str, Any] = client.get(f"/models/{name}").json()
    return out


def refused(r: httpx.Response, field: str, words: str) -> None:
    assert r.status_code == 422, r.text
    d = r.json()["detail"]
    assert d["error"] == "invalid_input" and d["field"] == field, d
    assert d["message"].startswith(field + ": ") and words in d["message"], d


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_examples_with_no_features_learn_predict_and_count(
    client: httpx.Client, kind: str, algorithm: str
) -> None:
    name = f"zero-{kind}-{algorithm}"
    make(client, name, kind, algorithm)
    # a batch of nothing but zero vectors, on a fresh model: labels learned, weights 0
    for raw in bodies(name, [{"x": ZERO[kind], "y": "a"}, {"x": ZERO[kind], "y": "b"}]):
        assert post(client, "/update", raw).status_code == 200
    examples = [
        {"x": ONE[kind], "y": "a"},
        {"x": ZERO[kind], "y": "b"},
        {"x": ZERO[kind], "y": "a"},
    ]
    for raw in bodies(name, examples):
        r = post(client, "/update", raw)
        assert r.status_code == 200 and r.json()["applied"] == 3, r.text
    got = info(client, name)
    assert got["examples_learned"] == 10 and got["labels"] == ["a", "b"]
    assert got["online_metrics"]["window_examples"] == 10
    assert 0.0 <= got["online_metrics"]["loss"] < float("inf")
    # weights: a zero vector changed nothing, so they score a zero vector 0
    pred = {"model": name, "instances": [{"x": ZERO[kind]}, {"x": ONE[kind]}]}
    r = client.post("/predict", json=pred)
    assert r.status_code == 200, r.text
    p0, p1 = r.json()["predictions"]
    assert p0["score"] == 0.0 and set(p0["scores"].values()) == {0.0}
    assert p0["confidence"] in (None, 0.5)
    assert p1["label"] == "a" and p1["score"] > 0.0


def test_whole_float_labels_are_integers(client: httpx.Client) -> None:
    for kind in KINDS:
        name = f"floaty-{kind}"
        make(client, name, kind)
        for raw in bodies(name, [{"x": ONE[kind], "y": 1.0}, {"x": ZERO[kind], "y": -1.0}]):
            assert post(client, "/update", raw).status_code == 200
        r = post(client, "/update", bodies(name, [{"x": ONE[kind], "y": 1}])[0])
        assert r.status_code == 200, r.text
        assert info(client, name)["labels"] == [1, -1]
        pred = client.post("/predict", json={"model": name, "instances": [{"x": ONE[kind]}]})
        assert pred.json()["predictions"][0]["label"] == 1
        before = info(client, name)["state_digest"]
        for raw in bodies(name, [{"x": ONE[kind], "y": 1}, {"x": ONE[kind], "y": 1.5}]):
            refused(post(client, "/update", raw), "examples[1].y", "whole number")
        for raw in bodies(name, [{"x": ONE[kind], "y": 1e300}]):
            refused(post(client, "/update", raw), "examples[0].y", "below 2**53")
        assert info(client, name)["state_digest"] == before


def test_labels_whose_json_keys_clash_are_refused(client: httpx.Client) -> None:
    for kind in KINDS:
        name = f"clash-{kind}"
        make(client, name, kind)
        within = [{"x": ONE[kind], "y": 1}, {"x": ONE[kind], "y": "b"}, {"x": ONE[kind], "y": "1"}]
        for raw in bodies(name, within):
            refused(post(client, "/update", raw), "examples[2].y", "examples[0]")
        for raw in bodies(name, [{"x": ONE[kind], "y": -1.0}, {"x": ZERO[kind], "y": "-1"}]):
            refused(post(client, "/update", raw), "examples[1].y", "clashes")
        assert info(client, name)["labels"] == []
        assert (
            post(client, "/update", bodies(name, [{"x": ONE[kind], "y": 7}])[0]).status_code == 200
        )
        before = info(client, name)["state_digest"]
        for raw in bodies(name, [{"x": ONE[kind], "y": "x"}, {"x": ONE[kind], "y": "7"}]):
            refused(post(client, "/update", raw), "examples[1].y", "already knows")
        assert info(client, name)["state_digest"] == before
        # "+7" and "07" are other keys than "7": no clash
        for raw in bodies(name, [{"x": ONE[kind], "y": "+7"}, {"x": ONE[kind], "y": "07"}]):
            assert post(client, "/update", raw).status_code == 200
        assert info(client, name)["labels"] == [7, "+7", "07"]


@pytest.mark.parametrize("key", [" 1", "+1", "01", "1_0", "\u0663", "1 ", "", "-0", "1.0"])
def test_sparse_keys_must_be_canonical_decimal(client: httpx.Client, key: str) -> None:
    name = "canon"
    make(client, name, "sparse")
    before = info(client, name)["state_digest"]
    field = f"examples[0].x[{json.dumps(key, ensure_ascii=False)}]"
    for raw in bodies(name, [{"x": {key: 1.0}, "y": "a"}]):
        refused(post(client, "/update", raw), field, "canonical decimal")
    assert info(client, name)["state_digest"] == before
    assert (
        post(client, "/update", bodies(name, [{"x": {"0": 1.0}, "y": "a"}])[0]).status_code == 200
    )
    r = client.post("/predict", json={"model": name, "instances": [{"x": {key: 1.0}}]})
    refused(r, f"instances[0].x[{json.dumps(key, ensure_ascii=False)}]", "canonical decimal")


def test_unknown_fields_of_examples_and_instances_are_refused(client: httpx.Client) -> None:
    for kind in KINDS:
        name = f"fields-{kind}"
        make(client, name, kind)
        ok = {"x": ONE[kind], "y": "a"}
        for raw in bodies(name, [ok, {"x": ONE[kind], "y": 1, "wt": 2}]):
            refused(post(client, "/update", raw), "examples[1].wt", "unknown field")
        for raw in bodies(name, [{"wt": 2, "weight": 2, "x": ONE[kind], "y": 1}]):
            refused(post(client, "/update", raw), "examples[0].wt", "unknown field")
        assert info(client, name)["examples_learned"] == 0
        assert post(client, "/update", bodies(name, [ok])[0]).status_code == 200
        pred = {"model": name, "instances": [{"x": ONE[kind]}, {"x": ONE[kind], "foo": 1}]}
        refused(client.post("/predict", json=pred), "instances[1].foo", "unknown field")
        pred = {"model": name, "instances": [{"x": ONE[kind], "y": "a"}]}
        refused(client.post("/predict", json=pred), "instances[0].y", "unknown field")


def test_unknown_fields_of_ranking_queries_and_items_are_refused(tmp_path) -> None:
    """Queries have qid and items; items x (and relevance when learning): nothing else."""
    from service.settings import Settings
    from tests.service.serving import ServerThread

    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        body = {"algorithm": "ranksvm", "features": {"kind": "dense", "dim": 2}}
        assert c.put("/models/r", json=body).status_code == 201
        item = {"x": [1.0, 0.0], "relevance": 1}
        for q, field in (
            ({"qid": 1, "items": [item], "wt": 2}, "queries[0].wt"),
            ({"qid": 1, "items": [item, {**item, "w": 1}]}, "queries[0].items[1].w"),
        ):
            r = c.post("/update", json={"model": "r", "queries": [q]})
            assert r.status_code == 422 and r.json()["detail"]["field"] == field, r.text
        r = c.post("/predict", json={"model": "r", "queries": [{"items": [item]}]})
        assert r.status_code == 422
        assert r.json()["detail"]["field"] == "queries[0].items[0].relevance"
        assert c.get("/models/r").json()["version"] == 0


def test_a_body_with_both_item_lists_is_refused(client: httpx.Client) -> None:
    """``examples``/``instances`` or ``queries``, not both (the document's ``oneOf``):
    the model would read one and silently ignore the other."""
    make(client, "both-lists", "dense")
    query = [{"qid": "q", "items": [{"x": ONE["dense"], "relevance": 1}]}]
    before = info(client, "both-lists")
    upd = {"model": "both-lists", "examples": [{"x": ONE["dense"], "y": 1}], "queries": query}
    refused(client.post("/update", json=upd), "queries", "not both")
    assert info(client, "both-lists")["version"] == before["version"]
    pred = {"model": "both-lists", "instances": [{"x": ONE["dense"]}], "queries": query}
    refused(client.post("/predict", json=pred), "queries", "not both")
