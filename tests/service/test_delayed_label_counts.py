"""``/update``'s ``applied`` and ``correct`` count what the batch learned (issue #20, defect 7).

A batch ``[{"id": X, "y"}, {"x", "y"}]`` sent again after X was labelled learns the ``x``
example only (X is not learned twice): the answer says 1 example, not 2, and ``correct``
counts that example's progressive outcome alone. With an ``Idempotency-Key`` a retry
answers what the first request answered, the count of what it learned included.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread, dense_model
from tests.service.test_delayed_labels import info, ok


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/m", json=dense_model(3)).status_code == 201
        body = {"model": "m", "examples": [{"x": [1, 0, 0], "y": "a"}, {"x": [0, 1, 0], "y": "b"}]}
        ok(c.post("/update", json=body))
        yield c


def served(c: httpx.Client, fid: str) -> str:
    body = {"model": "m", "instances": [{"x": [1.0, 0.0, 0.0], "id": fid}]}
    label: str = ok(c.post("/predict", json=body))["predictions"][0]["label"]
    return label


def test_a_repeated_id_in_a_mixed_batch_is_not_counted(client: httpx.Client) -> None:
    c = client
    assert served(c, "X") == "a"  # the id's prediction was right
    # the x example is one the model gets right too: a wrong count would say 2
    body = {"model": "m", "examples": [{"id": "X", "y": "a"}, {"x": [1.0, 0.0, 0.0], "y": "a"}]}
    first = ok(c.post("/update", json=body))
    assert (first["applied"], first["correct"]) == (2, 2), first
    learned = info(c, "m")["examples_learned"]
    again = ok(c.post("/update", json=body))  # X is labelled: only the x example is learned
    assert info(c, "m")["examples_learned"] == learned + 1
    assert again["version"] == first["version"] + 1
    assert (again["applied"], again["correct"]) == (1, 1), again
    # a batch of nothing but the repeat is answered as the first time (nothing learned)
    repeat = ok(c.post("/update", json={"model": "m", "examples": [{"id": "X", "y": "a"}]}))
    assert (repeat["applied"], repeat["correct"]) == (1, 1)
    assert info(c, "m")["examples_learned"] == learned + 1


def test_a_keyed_retry_answers_what_the_first_request_learned(client: httpx.Client) -> None:
    c = client
    served(c, "K")
    body = {"model": "m", "examples": [{"id": "K", "y": "a"}, {"x": [0.0, 1.0, 0.0], "y": "b"}]}
    first = ok(c.post("/update", json=body, headers={"Idempotency-Key": "k1"}))
    assert first["applied"] == 2
    # without the key the same batch learns its x example again, and says 1
    plain = ok(c.post("/update", json=body))
    assert plain["applied"] == 1 and plain["version"] == first["version"] + 1
    # with the key: the first answer, though K is labelled by now
    for _ in range(2):
        r = c.post("/update", json=body, headers={"Idempotency-Key": "k1"})
        assert r.status_code == 200 and r.headers["idempotent-replayed"] == "true"
        assert r.json() == first
