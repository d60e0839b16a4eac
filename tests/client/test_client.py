"""The Python clients against the real service (uvicorn, real HTTP): models, updates in
batches, predictions, errors that carry the service's ``field``, retries that never
learn a batch twice, and the async client giving the sync client's answers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

from service.client import (
    AsyncClient,
    Client,
    Conflict,
    ConnectionFailed,
    InvalidInput,
    NotFound,
    RetryPolicy,
    ServiceUnavailable,
)
from service.client._core import retry_after_seconds
from tests.client.conftest import LossyProxy
from tests.service.procs import free_port

FAST = RetryPolicy(attempts=6, backoff=0.01, max_delay=2.0)
DIM = 6


def stream(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Separable-ish sparse examples with 0-based keys and labels "a" / "b"."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        y = int(rng.integers(0, 2))
        x = {str(j): float(rng.normal() + (1.5 if (j < 3) == bool(y) else 0.0)) for j in range(DIM)}
        out.append({"x": x, "y": "a" if y else "b"})
    return out


def one_based(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"x": {str(int(k) + 1): v for k, v in e["x"].items()}, "y": e["y"]} for e in examples]


def test_models_lifecycle_and_typed_results(server) -> None:
    with Client(server.url, retry=FAST) as c:
        info = c.create_model("life", "arow", {"kind": "sparse", "dim": DIM}, {"r": 0.5})
        assert (info.name, info.kind, info.version, info.examples_learned) == (
            "life",
            "linear",
            0,
            0,
        )
        assert info.config["params"] == {"r": 0.5, "covariance": "diagonal"}  # defaults filled
        # the same config again: no change; another config: 409
        assert (
            c.create_model("life", "arow", {"kind": "sparse", "dim": DIM}, {"r": 0.5}).version == 0
        )
        with pytest.raises(Conflict) as e:
            c.create_model("life", "arow", {"kind": "sparse", "dim": DIM + 1})
        assert e.value.status == 409
        summary = c.update("life", stream(250), batch_size=100)
        assert (summary.examples, summary.batches, summary.version) == (250, 3, 3)
        assert summary.replayed_batches == 0
        info = c.describe("life")
        assert info.examples_learned == 250 and sorted(info.labels) == ["a", "b"]
        assert info.online_metrics.window_examples == 250
        assert 0.5 < info.online_metrics.accuracy <= 1.0
        assert "life" in {m.name for m in c.list_models()}
        res = c.predict("life", [e["x"] for e in stream(20, seed=9)], min_version=summary.version)
        assert res.version == 3 and len(res.predictions) == 20
        assert all(p.label in ("a", "b") and set(p.scores) == {"a", "b"} for p in res.predictions)
        c.delete_model("life")
        with pytest.raises(NotFound) as e:
            c.describe("life")
        assert e.value.error == "model_not_found" and e.value.field == "model"


def test_errors_carry_the_service_field(server) -> None:
    with Client(server.url, retry=FAST) as c:
        with pytest.raises(InvalidInput) as e:
            c.create_model("bad", "arow", {"kind": "sparse", "dim": 4, "index_base": 2})
        assert e.value.field == "features.index_base" and e.value.error == "invalid_input"
        with pytest.raises(InvalidInput) as e:
            c.create_model("bad", "arow", {"kind": "hashed", "bits": 4, "index_base": 1})
        assert e.value.field == "features.index_base"
        c.create_model("err", "pa", {"kind": "sparse", "dim": 4})
        with pytest.raises(InvalidInput) as e:
            c.update_batch("err", [{"x": {"1": 1.0}, "y": 1}, {"x": {"9": 1.0}, "y": 2}])
        assert e.value.field == 'examples[1].x["9"]'
        assert "outside [0, 4)" in e.value.message
        assert c.describe("err").version == 0  # a refused batch changes nothing
        with pytest.raises(InvalidInput) as e:
            c.predict("err", [{"0": 1.0}], k=0)
        assert e.value.field == "k"


def test_one_based_sparse_model_learns_what_a_zero_based_one_does(server) -> None:
    """index_base 1: key ``dim`` is valid, the model is the 0-based model fed keys - 1."""
    examples = stream(300, seed=3)
    with Client(server.url, retry=FAST) as c:
        zero = c.create_model("zero", "arow", {"kind": "sparse", "dim": DIM})
        one = c.create_model("one", "arow", {"kind": "sparse", "dim": DIM, "index_base": 1})
        assert one.config["features"] == {"kind": "sparse", "dim": DIM, "index_base": 1}
        assert zero.config["features"] == {"kind": "sparse", "dim": DIM}  # stored as before
        assert zero.index_base == 0 and one.index_base == 1
        c.update("zero", examples, batch_size=64)
        c.update("one", one_based(examples), batch_size=64)
        assert c.describe("one").state_digest == c.describe("zero").state_digest
        probe = stream(10, seed=4)
        a = c.predict("zero", [e["x"] for e in probe])
        b = c.predict("one", [e["x"] for e in one_based(probe)])
        assert [p.scores for p in a.predictions] == [p.scores for p in b.predictions]
        # key 0 is refused on both parse paths (the bytes scanner and the general one)
        for x in ({"0": 1.0}, {"0": True}):
            with pytest.raises(InvalidInput) as e:
                c.update_batch("one", [{"x": {"1": 1.0}, "y": "a"}, {"x": x, "y": "a"}])
            assert e.value.field in ('examples[1].x["0"]', 'examples[1].x["0"]'), e.value
        with pytest.raises(InvalidInput) as e:
            c.update_batch("one", [{"x": {str(DIM + 1): 1.0}, "y": "a"}])
        assert e.value.field == f'examples[0].x["{DIM + 1}"]'
        assert f"outside [1, {DIM}]" in e.value.message
        with pytest.raises(InvalidInput) as e:
            c.predict("one", [{"0": 1.0}])
        assert e.value.field == 'instances[0].x["0"]'
        assert c.describe("one").version == c.describe("zero").version


def test_a_lost_answer_is_retried_and_the_batch_learned_once(server) -> None:
    """The proxy forwards the 1st and 3rd update requests (the service learns them) and
    answers 503 + Retry-After instead: the client sends each again with the same
    Idempotency-Key, the service replays its first answer, nothing is learned twice."""
    examples = stream(500, seed=5)
    with Client(server.url, retry=FAST) as direct:
        direct.create_model("lossy", "arow", {"kind": "sparse", "dim": DIM})
        direct.create_model("clean", "arow", {"kind": "sparse", "dim": DIM})
        clean = direct.update("clean", examples, batch_size=100)
        with (
            LossyProxy(server.url, drop=frozenset({1, 3})) as proxy,
            Client(proxy.url, retry=FAST) as c,
        ):
            summary = c.update("lossy", examples, batch_size=100)
        info = direct.describe("lossy")
        assert (info.version, info.examples_learned) == (5, 500)  # 5 batches, each once
        assert info.state_digest == direct.describe("clean").state_digest
    assert (summary.batches, summary.examples, summary.version) == (5, 500, clean.version)
    assert summary.retries == 2 and summary.replayed_batches == 2
    keys = proxy.forwarded_updates
    assert len(keys) == 7 and keys[0] == keys[1] and keys[2] == keys[3]  # same key per retry
    assert len(set(keys)) == 5


def test_a_not_ready_service_is_waited_for(server) -> None:
    """503 not_ready with Retry-After: 1 (a starting service) until it is ready."""
    registry = server.app.state.engine.registry  # the engine's `ready` reads it
    with Client(server.url, retry=FAST) as c:
        c.create_model("waits", "pa", {"kind": "sparse", "dim": DIM})
        registry.ready = False
        timer = threading.Timer(0.3, lambda: setattr(registry, "ready", True))
        timer.start()
        try:
            summary = c.update("waits", stream(10), batch_size=10)
        finally:
            timer.join()
            registry.ready = True
        assert summary.retries >= 1 and summary.replayed_batches == 0
        assert (c.describe("waits").version, c.describe("waits").examples_learned) == (1, 10)


def test_retries_are_bounded(server) -> None:
    policy = RetryPolicy(attempts=3, backoff=0.01, max_delay=0.05)
    with LossyProxy(server.url, always_503=True) as proxy, Client(proxy.url, retry=policy) as c:
        with pytest.raises(ServiceUnavailable) as e:
            c.describe("anything")
    assert e.value.status == 503 and e.value.retry_after == 0.0
    with Client(f"http://127.0.0.1:{free_port()}", retry=policy) as c:  # nobody listens
        with pytest.raises(ConnectionFailed) as ce:
            c.list_models()
    assert "3 tries" in str(ce.value)


def test_async_client_gives_the_sync_answers(server) -> None:
    examples = stream(230, seed=7)
    probe = [e["x"] for e in stream(15, seed=8)]
    with Client(server.url, retry=FAST) as c:
        c.create_model("sync-twin", "scw1", {"kind": "sparse", "dim": DIM}, {"C": 0.5})
        s_sum = c.update("sync-twin", examples, batch_size=50)
        s_info = c.describe("sync-twin")
        s_pred = c.predict("sync-twin", probe, min_version=s_sum.version)

    async def main() -> tuple[Any, ...]:
        async with AsyncClient(server.url, retry=FAST) as a:
            await a.create_model("async-twin", "scw1", {"kind": "sparse", "dim": DIM}, {"C": 0.5})

            async def agen() -> Any:  # an async iterable works as a stream too
                for e in examples:
                    yield e

            a_sum = await a.update("async-twin", agen(), batch_size=50)
            a_info = await a.describe("async-twin")
            a_pred = await a.predict("async-twin", probe, min_version=a_sum.version)
            names = {m.name for m in await a.list_models()}
            with pytest.raises(InvalidInput) as e:
                await a.update_batch("async-twin", [{"x": {"0": float("1e400")}, "y": "a"}])
            await a.delete_model("async-twin")
            with pytest.raises(NotFound):
                await a.describe("async-twin")
            return a_sum, a_info, a_pred, names, e.value

    a_sum, a_info, a_pred, names, err = asyncio.run(main())
    assert (a_sum.examples, a_sum.batches, a_sum.version) == (s_sum.examples, s_sum.batches,
                                                               s_sum.version)  # fmt: skip
    assert a_info.state_digest == s_info.state_digest
    assert a_info.online_metrics == s_info.online_metrics
    assert a_pred.predictions == s_pred.predictions
    assert {"sync-twin", "async-twin"} <= names
    assert err.field is not None and err.field.startswith("examples[0].x")


def test_export_state_sync_and_async(server) -> None:
    """``GET /models/{name}/state``: the artifact, with the version and digest that
    ``describe`` gives; the async client's is the same state (its file has another
    ``created_at``)."""
    from learners.registry import load_model

    with Client(server.url, retry=FAST) as c:
        c.create_model("exported", "arow", {"kind": "sparse", "dim": DIM})
        c.update("exported", stream(40), batch_size=20)
        info = c.describe("exported")
        state = c.export_state("exported")
        with pytest.raises(NotFound):
            c.export_state("not-there")
    assert (state.model, state.version, state.state_digest) == (
        "exported", info.version, info.state_digest,
    )  # fmt: skip
    load_model(state.artifact)

    async def main() -> Any:
        async with AsyncClient(server.url, retry=FAST) as a:
            return await a.export_state("exported")

    again = asyncio.run(main())
    assert (again.model, again.version, again.state_digest) == (
        state.model, state.version, state.state_digest,
    )  # fmt: skip
    load_model(again.artifact)


def test_feedback_by_id(server) -> None:
    """``label(model, [(id, y)])`` sends ``{"id", "y"}`` examples for instances predicted
    with an ``id``; skipped on a service without feedback by id."""
    with Client(server.url, retry=FAST) as c:
        c.create_model("fb", "arow", {"kind": "sparse", "dim": DIM})
        c.update("fb", stream(50), batch_size=50)
        probe = stream(4, seed=11)
        ids = [f"req-{i}" for i in range(4)]
        try:
            c.predict("fb", [e["x"] for e in probe], ids=ids)
        except InvalidInput as e:
            if e.field == "instances[0].id":
                pytest.skip("this service has no feedback by id")
            raise
        summary = c.label("fb", [(i, e["y"]) for i, e in zip(ids, probe, strict=True)])
        assert summary.examples == 4
        assert c.describe("fb").examples_learned == 54
        # A stream mixing examples with x and labels by id: one batch, in order, with its
        # Idempotency-Key (which covers the x examples the ids do not protect).
        more = stream(3, seed=12)
        c.predict("fb", [more[1]["x"]], ids=["late"])
        mixed = [more[0], {"id": "late", "y": more[1]["y"]}, more[2]]
        summary = c.update("fb", mixed, batch_size=10)
        assert (summary.examples, summary.batches, summary.replayed_batches) == (3, 1, 0)
        assert c.describe("fb").examples_learned == 57


def test_one_based_ranker_matches_a_zero_based_one(server) -> None:
    rng = np.random.default_rng(12)
    queries = []
    for q in range(30):
        items = []
        for _ in range(5):
            rel = int(rng.integers(0, 3))
            x = {str(j): float(rng.normal() + rel * (j == 1)) for j in range(DIM)}
            items.append({"x": x, "relevance": rel})
        queries.append({"qid": q, "items": items})
    shifted = [
        {"qid": q["qid"], "items": [{"x": {str(int(k) + 1): v for k, v in it["x"].items()},
                                     "relevance": it["relevance"]} for it in q["items"]]}
        for q in queries
    ]  # fmt: skip
    with Client(server.url, retry=FAST) as c:
        c.create_model("rank0", "ranksvm", {"kind": "sparse", "dim": DIM}, {"seed": 1})
        c.create_model("rank1", "ranksvm", {"kind": "sparse", "dim": DIM, "index_base": 1},
                       {"seed": 1})  # fmt: skip
        s0 = c.update_queries("rank0", queries, batch_size=10)
        s1 = c.update_queries("rank1", shifted, batch_size=10)
        assert (s0.examples, s0.batches) == (s1.examples, s1.batches) == (150, 3)
        assert c.describe("rank0").state_digest == c.describe("rank1").state_digest
        probe = [{"qid": q["qid"], "items": [{"x": it["x"]} for it in q["items"]]}
                 for q in queries[:5]]  # fmt: skip
        probe1 = [{"qid": q["qid"], "items": [{"x": it["x"]} for it in q["items"]]}
                  for q in shifted[:5]]  # fmt: skip
        r0, r1 = c.rank("rank0", probe), c.rank("rank1", probe1)
        assert r0.rankings == r1.rankings and len(r0.rankings) == 5
        with pytest.raises(InvalidInput) as e:
            c.rank("rank1", [{"qid": "q", "items": [{"x": {"0": 1.0}}]}])
        assert e.value.field == 'queries[0].items[0].x["0"]'


def test_retry_waits() -> None:
    """Retry-After is what a retry waits (capped); without it a jittered doubling."""
    p = RetryPolicy(attempts=5, backoff=0.5, max_delay=3.0)
    assert p.delay(0, 1.0) == 1.0 and p.delay(4, 0.0) == 0.0
    assert p.delay(0, 120.0) == 3.0  # a server asking for minutes waits max_delay
    for retry, cap in ((0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (9, 3.0)):
        assert cap / 2 <= p.delay(retry, None) <= cap
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds("") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a past date
    assert retry_after_seconds("soon") is None
