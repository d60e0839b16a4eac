"""The service says what it waits for: /readyz's ``waiting_for`` and every model
route's 503 name the model being restored or the store that does not answer; a model
whose kernels compile names the family (``pending_models``, and its own 503s) while the
others are served."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from service.app import create_app
from service.engine.facade import Engine
from service.settings import Settings
from service.store import open_store


def _unready_app(tmp_path: Path) -> tuple[Any, Engine]:
    """The app with a registry that has not restored anything yet (no lifespan runs)."""
    settings = Settings(data_dir=str(tmp_path))
    app = create_app(settings)
    store = open_store(None, tmp_path)
    registry = Engine(store, settings)
    app.state.engine = registry
    return app, registry


async def _get(app: Any, method: str, path: str, **kw: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.request(method, path, **kw)


def test_a_model_waiting_for_its_kernels_says_which_and_the_others_are_served(
    tmp_path: Path,
) -> None:
    """A model whose kernels compile answers 503 + Retry-After naming the family and
    what it compiles; the service itself is ready (its other models are served)."""
    from service.models.kernel_families import READY

    app, engine = _unready_app(tmp_path)
    engine.registry.ready = True
    engine.registry.pending["m"] = ["records"]
    engine.registry.kernels.phase["records"] = "compiling in a process of its own"
    loaded = "records" in READY  # (by an earlier test's server in this process)
    READY.discard("records")
    try:
        _pending_model_answers(app, engine)
    finally:
        if loaded:
            READY.add("records")


def _pending_model_answers(app: Any, engine: Engine) -> None:

    ready = asyncio.run(_get(app, "GET", "/readyz"))
    assert ready.status_code == 200, ready.text
    waiting = ready.json()["pending_models"]["m"]
    assert waiting.startswith("numba kernels: records (raw-record encoder"), waiting
    assert "compiling in a process of its own" in waiting and "learnserve warmup" in waiting

    async def ask(method: str, path: str, **kw: Any) -> httpx.Response:
        await engine.store.open()
        # m is in the catalog, as the engine last read it (nothing for a sync to load)
        await engine.store.create_model("m", {"kind": "linear", "algorithm": "pa"})
        engine.registry.epoch = await engine.store.catalog_epoch()
        try:
            return await _get(app, method, path, **kw)
        finally:
            await engine.store.close()

    for method, path, kw in (
        ("POST", "/update", {"json": {"model": "m", "examples": [{"x": [1], "y": 1}]}}),
        ("POST", "/predict", {"json": {"model": "m", "instances": [{"x": [1]}]}}),
        ("GET", "/models/m", {}),
    ):
        r = asyncio.run(ask(method, path, **kw))
        assert r.status_code == 503, (path, r.text)
        detail = r.json()["detail"]
        assert detail["error"] == "kernels_compiling", detail
        assert "records (raw-record encoder" in detail["message"], detail
        assert int(r.headers["retry-after"]) > 0
    r = asyncio.run(ask("GET", "/models/other"))
    assert r.status_code == 404, r.text


def test_a_restoring_service_names_the_model_and_an_unreachable_store(tmp_path: Path) -> None:
    app, registry = _unready_app(tmp_path)
    registry.registry.waiting_for = "restoring models: 'clicks' (3/7)"
    r = asyncio.run(_get(app, "GET", "/readyz"))
    assert r.json()["waiting_for"] == "restoring models: 'clicks' (3/7)"

    registry.health.failed("replication", ConnectionError("refused"))
    r = asyncio.run(_get(app, "POST", "/update", json={"model": "m", "examples": []}))
    message = r.json()["detail"]["message"]
    assert f"the {registry.store.name} store to answer" in message, message


def test_a_ready_service_waits_for_nothing(tmp_path: Path) -> None:
    app, registry = _unready_app(tmp_path)

    async def restore_then_ask() -> httpx.Response:
        await registry.store.open()
        try:
            await registry.restore_all()  # compiles or loads the kernels; zero models
            return await _get(app, "GET", "/readyz")
        finally:
            await registry.store.close()

    r = asyncio.run(restore_then_ask())
    assert r.status_code == 200 and r.json()["waiting_for"] == ""
    assert registry.not_ready_reason() == ""
