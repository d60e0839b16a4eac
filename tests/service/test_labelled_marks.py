"""Issue 20, defect 9: a labelled id's mark outlives its prediction's time-to-live.

The mark (the label and the position that learned it) is kept ``keep_seconds`` from
the label (the service: max of ``feedback_ttl_seconds`` and
``idempotency_ttl_seconds``), so after the prediction's TTL the same label is still
answered as the first time, another label is 409, and a prediction with the id is
refused as labelled — on SQLite, a real Redis and a real Redis Cluster. The stored
format does not change (only the expiry of a labelled id moves), so stores written
before keep working: a mark without the longer keep expires with its prediction, as
it did."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from service.store import Feedback, FeedbackConflict, Store
from service.store.base import record_digest
from tests.service import test_store_contract as contract
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import ok, refused
from tests.service.test_delayed_labels_api import label, predict, start, state
from tests.service.test_store_contract import CFG, Backend

backend = contract.backend  # SQLite, Redis, Redis Cluster
DAY = 86400.0
SHORT = 0.4  # the predictions' TTL in these tests
WAIT = 0.8  # past it


def marked(fid: str, rec: bytes, mark: str) -> tuple[str, str, str]:
    return (fid, record_digest(rec), mark)


# ---------------------------------------------------------------------- the stores
def test_the_mark_is_kept_past_the_predictions_ttl(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("a", b"A"), ("b", b"B"), ("c", b"C")], SHORT)
        pos, _ = await s.append_labelled("m", b"e", [marked("a", b"A", "ya")], keep_seconds=DAY)
        await asyncio.sleep(WAIT)
        # a: labelled (its mark kept a day); b: expired with its prediction
        assert await s.get_feedback("m", ["a", "b"]) == [Feedback(None, "ya", pos), None]
        with pytest.raises(FeedbackConflict, match="labelled"):
            await s.append_labelled("m", b"again", [marked("a", b"A", "yb")], keep_seconds=DAY)
        assert await s.put_feedback("m", [("new", b"N"), ("a", b"A2")], DAY) == 1
        assert await s.get_feedback("m", ["new"]) == [None]  # nothing of that batch kept
        # sweeps (the service's, and put's) leave an unexpired mark alone
        await s.sweep_feedback()
        await s.put_feedback("m", [("other", b"O")], DAY)
        assert await s.get_feedback("m", ["a"]) == [Feedback(None, "ya", pos)]
        assert [e.payload for e in await s.read_log("m", 0)] == [b"e"]

    backend.run(t)


def test_the_keep_never_shortens_the_prediction(backend: Backend) -> None:
    """A keep shorter than what is left of the prediction's TTL changes nothing; without
    a keep (a store written before, or a caller that gives none) the mark expires with
    the prediction, as before."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("long", b"L"), ("short", b"S")], DAY)
        await s.put_feedback("m", [("plain", b"P")], SHORT)
        p1, _ = await s.append_labelled("m", b"e1", [marked("long", b"L", "y")], keep_seconds=0.1)
        await s.append_labelled("m", b"e2", [marked("plain", b"P", "y")])
        await asyncio.sleep(WAIT)
        assert await s.get_feedback("m", ["long", "plain"]) == [Feedback(None, "y", p1), None]
        assert await s.put_feedback("m", [("plain", b"P2")], DAY) is None  # a new id again

    backend.run(t)


# ---------------------------------------------------------------------- the service
def _after_the_ttl(c: httpx.Client, name: str) -> None:
    start(c, name)
    served = predict(c, ["u1", "u2", "u3"], name)["predictions"]
    first = ok(label(c, [("u1", "a"), ("u2", "b")], name))
    assert first["applied"] == 2
    right = sum(p["label"] == y for p, y in zip(served, ("a", "b"), strict=False))
    assert first["correct"] == right
    time.sleep(WAIT)  # past feedback_ttl_seconds: u3's prediction is gone
    before = state(c, name)
    # the same labels again: answered as the first time, nothing learned
    assert ok(label(c, [("u1", "a"), ("u2", "b")], name)) == first
    assert ok(label(c, [("u2", "b")], name))["version"] == first["version"]
    assert state(c, name) == before
    # another label: 409 naming the id
    d = refused(label(c, [("u1", "b")], name), 409, "examples[0].id")
    assert d["error"] == "id_labelled"
    # a new prediction with a labelled id: refused, nothing of the batch kept
    body = {"model": name, "instances": [{"x": [1, 0, 0], "id": "v"}, {"x": [0, 1, 0], "id": "u2"}]}
    d = refused(c.post("/predict", json=body), 409, "instances[1].id")
    assert d["error"] == "id_labelled"
    refused(label(c, [("v", "a")], name), 422, "examples[0].id")
    # an id whose prediction expired unlabelled is unknown, as before
    refused(label(c, [("u3", "a")], name), 422, "examples[0].id")
    assert state(c, name) == before


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(
        data_dir=str(tmp_path), feedback_ttl_seconds=SHORT, idempotency_ttl_seconds=3600, **kw
    )


def test_a_label_after_the_ttl_sqlite(tmp_path: Path) -> None:
    with ServerThread(_settings(tmp_path)) as srv, srv.client() as c:
        _after_the_ttl(c, "m")


def test_a_label_after_the_ttl_redis(tmp_path: Path, redis_server: Any, redis_url: str) -> None:
    with ServerThread(_settings(tmp_path, redis_url=redis_url)) as srv, srv.client() as c:
        _after_the_ttl(c, "r")


def test_a_label_after_the_ttl_cluster(tmp_path: Path, redis_cluster_url: str) -> None:
    settings = _settings(tmp_path, redis_url=redis_cluster_url, redis_cluster=True)
    with ServerThread(settings) as srv, srv.client() as c:
        _after_the_ttl(c, "c")
