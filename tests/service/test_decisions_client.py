"""Decisions through the Python clients (sync and async) and the ``learnserve decisions``
command, against a real service: choose, reward (once, keyed), the DSJSON log."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from learners.decisions.dsjson import read_dsjson
from service.cli.main import app
from service.client import AsyncClient, Client, Conflict, NotFound
from service.settings import Settings
from tests.service.serving import ServerThread

ACTIONS = [{"id": f"a{i}", "features": {"k": i % 3}} for i in range(10)]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("decisions-client")))
    with ServerThread(settings) as srv, srv.client() as c:
        r = c.put("/models/front", json={"algorithm": "decision",
                                          "features": {"kind": "hashed", "bits": 12}})  # fmt: skip
        assert r.status_code == 201, r.text
        yield srv.url


def test_choose_and_reward(url: str) -> None:
    with Client(url) as c:
        d = c.choose("front", ACTIONS, context={"user": "u1"}, excluded=["a0"])
        assert d.action != "a0" and len(d.event_id) == 32 and len(d.ranking) == 10
        assert c.choose("front", ACTIONS[:2], event_id=d.event_id) == d  # a retry
        first = c.reward("front", d.event_id, 1.0, idempotency_key="key-1")
        assert first.applied == 1 and first.events == [(d.event_id, True)]
        again = c.reward("front", d.event_id, 1.0, idempotency_key="key-1")
        assert again.version == first.version and again.replayed
        with pytest.raises(Conflict):
            c.reward("front", d.event_id, 0.0)
        with pytest.raises(NotFound):
            c.reward("front", "no-such-event", 0.0)
        assert c.describe("front").raw["rewards_learned"] == 1


def test_the_async_client(url: str) -> None:
    async def run() -> None:
        async with AsyncClient(url) as c:
            d = await c.choose("front", ACTIONS, context={"user": "u2"}, event_id="async-1")
            r = await c.rewards("front", [(d.event_id, 0.5)])
            assert r.applied == 1
            lines, nxt = await c.decision_log("front")
            assert any('"EventId":"async-1"' in line for line in lines) and nxt > 0

    asyncio.run(run())


def test_the_cli_exports_dsjson(url: str, tmp_path: Path) -> None:
    with Client(url) as c:
        for i in range(3):
            d = c.choose("front", ACTIONS, context={"n": i}, event_id=f"cli-{i}")
            c.reward("front", d.event_id, float(i))
    out = tmp_path / "front.dsjson"
    res = CliRunner().invoke(app, ["decisions", "front", "-o", str(out), "--url", url])
    assert res.exit_code == 0, res.output
    recs = list(read_dsjson(out))
    assert [r.event_id for r in recs][-3:] == ["cli-0", "cli-1", "cli-2"]
    assert [r.reward for r in recs][-3:] == [0.0, 1.0, 2.0]
