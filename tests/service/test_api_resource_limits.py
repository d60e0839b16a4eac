"""Inputs that are valid JSON but would exhaust memory or break a model are refused with a 4xx."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from learners.features import Batch
from learners.ranking.ranksvm import make_ranker
from service.settings import Settings
from tests.service.serving import ServerThread


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=str(tmp_path_factory.mktemp("limits-api")),
        max_labels=5,
        max_model_bytes=1 << 20,  # 1 MiB of weights
    )
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def _state(client: httpx.Client, name: str) -> tuple[int, str, list]:
    d = client.get(f"/models/{name}").json()
    return d["version"], d["state_digest"], d.get("labels")


def test_too_many_labels_are_refused_before_the_log(client: httpx.Client) -> None:
    body = {"algorithm": "arow", "features": {"kind": "sparse", "dim": 10}}
    assert client.put("/models/lab", json=body).status_code == 201
    ok = [{"x": {"1": 1.0}, "y": f"c{i}"} for i in range(4)]
    assert client.post("/update", json={"model": "lab", "examples": ok}).status_code == 200
    before = _state(client, "lab")
    many = [{"x": {"1": 1.0}, "y": f"n{i}"} for i in range(2)]  # 4 + 2 > 5
    r = client.post("/update", json={"model": "lab", "examples": many})
    assert r.status_code == 422, r.text
    d = r.json()["detail"]
    assert d["error"] == "too_many_labels" and d["field"] == "examples"
    assert "limit of 5" in d["message"]
    assert _state(client, "lab") == before  # nothing was logged or applied
    one_more = [{"x": {"1": 1.0}, "y": "c0"}, {"x": {"2": 1.0}, "y": "n0"}]
    assert client.post("/update", json={"model": "lab", "examples": one_more}).status_code == 200


def test_weights_larger_than_the_memory_budget_are_refused(client: httpx.Client) -> None:
    # 2**16 dims x 16 bytes (mean + diagonal variance) = 1 MiB per label
    body = {"algorithm": "arow", "features": {"kind": "hashed", "bits": 16}}
    assert client.put("/models/big", json=body).status_code == 201
    r = client.post(
        "/update",
        json={"model": "big", "examples": [{"x": {"a": 1}, "y": "p"}, {"x": {"b": 1}, "y": "q"}]},
    )
    assert r.status_code == 422 and r.json()["detail"]["error"] == "model_too_large", r.text
    assert client.get("/models/big").json()["version"] == 0


def test_lenient_parse_still_refuses_what_orjson_cannot_represent(client: httpx.Client) -> None:
    body = {"algorithm": "pa", "features": {"kind": "hashed", "bits": 8}}
    assert client.put("/models/surr", json=body).status_code == 201
    for raw in (
        b'{"model": "surr", "examples": [{"x": {"a": NaN}, "y": "\\ud800"}]}',
        b'{"model": "surr", "examples": [{"x": {"a": NaN}, "y": 123456789012345678901234567890}]}',
    ):
        r = client.post("/update", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "not valid JSON" in r.json()["detail"]["message"], r.text
    assert client.get("/models/surr").json()["version"] == 0


def test_ranksvm_refuses_a_batch_that_overflows_and_keeps_its_state() -> None:
    r = make_ranker(8, {"lam": 0.01, "seed": 0})
    before = r.state_digest()
    huge = Batch.from_dense(np.eye(8)[:2] * 1e160)  # finite, but its square is not
    with pytest.raises(FloatingPointError, match="left unchanged"):
        r.update(huge, [1, 0], groups=[2])
    assert r.state_digest() == before
    good = Batch.from_dense(np.eye(8)[:4])
    r.update(good, [2, 1, 0, 1], groups=[4])  # still learns afterwards
    assert r.state_digest() != before
    assert np.all(np.isfinite(r.decision_function(good)))
