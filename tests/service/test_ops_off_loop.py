"""``GET /metrics`` and ``GET /models`` leave the event loop free for other requests.

No timing: a probe that cannot finish unless the loop serves something else meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric

from service.settings import Settings
from tests.service.serving import ServerThread, dense_model

# Several of the slices GET /models describes between two yields to the loop
# (service.api.models.LIST_YIELD_EVERY).
N_MODELS = 70


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("off-loop")))
    with ServerThread(settings) as srv:
        yield srv


class BlockingCollector:
    """Blocks the scrape until the test has had a ``/healthz`` answer over HTTP: if
    the exposition were built on the event loop, that answer could never come."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def describe(self) -> list[Metric]:  # registering must not call collect()
        return []

    def collect(self) -> Iterator[Metric]:
        self.entered.set()
        self.release.wait(60)
        yield from ()


def test_a_scrape_does_not_hold_the_event_loop(server: ServerThread) -> None:
    probe = BlockingCollector()
    REGISTRY.register(probe)  # type: ignore[arg-type]
    scraped: dict[str, Any] = {}
    scrape = threading.Thread(
        target=lambda: scraped.update(r=httpx.get(f"{server.url}/metrics", timeout=90))
    )
    try:
        scrape.start()
        assert probe.entered.wait(30), "the scrape never reached the collector"
        r = httpx.get(f"{server.url}/healthz", timeout=15)
        assert r.status_code == 200
    finally:
        probe.release.set()
        scrape.join(90)
        REGISTRY.unregister(probe)  # type: ignore[arg-type]
    assert scraped["r"].status_code == 200
    assert "learnserve_requests_total" in scraped["r"].text


def test_listing_many_models_lets_the_loop_run_between_models(server: ServerThread) -> None:
    with server.client() as c:
        for i in range(N_MODELS):
            assert c.put(f"/models/many-{i}", json=dense_model(2)).status_code == 201
        first = c.get("/models")  # digests now cached: describing never waits
        assert first.status_code == 200
        registry = server.app.state.engine
        handles = list(registry.models.values())
        loop_ran: list[bool] = []
        seen: list[bool] = []

        # The first model described schedules a callback on the loop; the last one
        # looks whether it ran. Without a yield between them, it cannot have.
        # (Describing a model starts with its digest: the probe wraps that.)
        def probe(h: Any, first: bool) -> Any:
            original = h.digest

            async def digest() -> str:
                if first:
                    asyncio.get_running_loop().call_soon(loop_ran.append, True)
                else:
                    seen.append(bool(loop_ran))
                return await original()

            return digest

        handles[0].digest = probe(handles[0], True)
        handles[-1].digest = probe(handles[-1], False)
        try:
            r = c.get("/models")
        finally:
            del handles[0].digest, handles[-1].digest
        assert r.status_code == 200
        assert seen == [True]
        assert {m["name"] for m in r.json()["models"]} == {
            m["name"] for m in first.json()["models"]
        }
        for i in range(N_MODELS):
            assert c.delete(f"/models/many-{i}").status_code == 204
