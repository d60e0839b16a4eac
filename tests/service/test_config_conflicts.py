"""``PUT /models/{name}`` on an existing name compares what the configs mean (issue #20).

Spelled-out defaults are the same model (200, the model as it is); anything else is a
409 naming the first field that differs with both values. A config stored by an older
learnserve (its params as the body sent them, ``{}``) still compares as it meant: the
store is never rewritten. New models store every hyperparameter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from learners.features import FeatureSpec
from learners.linear import make_classifier
from service.settings import Settings
from service.store import open_store
from tests.service.serving import ServerThread

SPARSE = {"kind": "sparse", "dim": 123}
OCTETS = {"content-type": "application/octet-stream"}


def body(algorithm: str = "arow", features: dict[str, Any] | None = None, **params: Any) -> Any:
    return {"algorithm": algorithm, "params": params, "features": features or SPARSE}


def conflict(r: httpx.Response, field: str, message: str) -> None:
    assert r.status_code == 409, r.text
    detail = r.json()["detail"]
    assert (detail["error"], detail["field"], detail["message"]) == ("conflict", field, message)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        yield c


def test_spelled_out_defaults_are_the_same_model(client: httpx.Client) -> None:
    c = client
    first = c.put("/models/a9a", json=body())
    assert first.status_code == 201, first.text
    # the stored config says every hyperparameter
    assert first.json()["config"]["params"] == {"r": 1.0, "covariance": "diagonal"}
    spelled = ({"r": 1.0}, {"r": 1}, {"covariance": "diagonal"}, {"r": 1, "covariance": "diagonal"})
    for same in spelled:
        r = c.put("/models/a9a", json=body(**same))
        assert r.status_code == 200, (same, r.text)
        assert r.json()["config"] == first.json()["config"]
    conflict(
        c.put("/models/a9a", json=body(r=0.5)),
        "params.r",
        "model 'a9a' exists with params.r=1.0; this body asks params.r=0.5",
    )
    conflict(
        c.put("/models/a9a", json=body(covariance="full", features={"kind": "dense", "dim": 8})),
        "features.kind",
        'model \'a9a\' exists with features.kind="sparse"; this body asks features.kind="dense"',
    )
    conflict(
        c.put("/models/a9a", json=body(features={"kind": "sparse", "dim": 124})),
        "features.dim",
        "model 'a9a' exists with features.dim=123; this body asks features.dim=124",
    )
    conflict(
        c.put("/models/a9a", json=body("cw")),
        "algorithm",
        'model \'a9a\' exists with algorithm="arow"; this body asks algorithm="cw"',
    )
    conflict(
        c.put("/models/a9a", json={**body(), "metrics": {"window": 5}}),
        "metrics",
        "model 'a9a' exists with metrics=(not set); this body asks metrics={\"window\": 5}",
    )
    assert c.put("/models/scw", json=body("scw1", C=1.0)).status_code == 201
    same = body("scw1", C=1, eta=0.75, covariance="diagonal")  # eta and covariance: defaults
    assert c.put("/models/scw", json=same).status_code == 200
    conflict(
        c.put("/models/scw", json=body("scw1", C=0.5)),
        "params.C",
        "model 'scw' exists with params.C=1.0; this body asks params.C=0.5",
    )
    rank = {"algorithm": "ranksvm", "features": SPARSE}
    assert c.put("/models/rank", json=rank).status_code == 201
    assert c.put("/models/rank", json={**rank, "params": {"lam": 0.01}}).status_code == 200
    conflict(
        c.put("/models/rank", json={**rank, "params": {"pairs_per_group": None}}),
        "params.pairs_per_group",
        "model 'rank' exists with params.pairs_per_group=100; "
        "this body asks params.pairs_per_group=null",
    )
    conflict(
        c.put("/models/rank", json=body()),
        "algorithm",
        'model \'rank\' exists with kind="ranksvm"; this body asks kind="linear"',
    )


def test_an_import_and_a_config_name_the_artifact(client: httpx.Client) -> None:
    c = client
    clf = make_classifier("arow", 4, {})
    clf.update(FeatureSpec.dense(4).encode([[1.0, 0, 0, 0], [0, 1.0, 0, 0]]), ["a", "b"])
    clf.features_ = FeatureSpec.dense(4)
    blob = clf.to_bytes()
    r = c.put("/models/imp", content=blob, headers=OCTETS)
    assert r.status_code == 201, r.text
    checksum = r.json()["config"]["imported"]
    conflict(
        c.put("/models/imp", json=body(features={"kind": "dense", "dim": 4, "index_base": 0})),
        "artifact",
        f"model 'imp' exists, imported from the artifact {checksum}; "
        "this body is a config, not an artifact",
    )
    dense4 = body(features={"kind": "dense", "dim": 4})
    assert c.put("/models/plain", json=dense4).status_code == 201
    r = c.put("/models/plain", content=blob, headers=OCTETS)
    conflict(
        r,
        "artifact",
        f"model 'plain' exists, not imported; this body is the artifact {checksum}",
    )


def test_a_config_stored_before_keeps_its_meaning(tmp_path: Path) -> None:
    """Configs stored by an older learnserve hold the params as sent: compared with the
    defaults filled in, and left as they are in the store."""
    old = {"kind": "linear", "algorithm": "arow", "params": {}, "features": SPARSE}
    old_r = {"kind": "linear", "algorithm": "arow", "params": {"r": 2}, "features": SPARSE}

    async def seed() -> None:
        store = open_store(None, tmp_path)
        await store.open()
        try:
            assert await store.create_model("old", old)
            assert await store.create_model("old-r", old_r)
        finally:
            await store.close()

    asyncio.run(seed())
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        for same in ({}, {"r": 1.0}, {"covariance": "diagonal"}):
            r = c.put("/models/old", json=body(**same))
            assert r.status_code == 200, r.text
            assert r.json()["config"] == old  # as stored: never rewritten
        conflict(
            c.put("/models/old", json=body(r=3.0)),
            "params.r",
            "model 'old' exists with params.r=1.0; this body asks params.r=3.0",
        )
        assert c.put("/models/old-r", json=body(r=2.0)).status_code == 200
        conflict(
            c.put("/models/old-r", json=body()),
            "params.r",
            "model 'old-r' exists with params.r=2.0; this body asks params.r=1.0",
        )
        ex = [{"x": {"1": 1.0}, "y": "a"}, {"x": {"2": 1.0}, "y": "b"}]
        assert c.post("/models/old/update", json={"examples": ex}).status_code == 200
