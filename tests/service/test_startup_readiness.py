"""Before it is ready the service says what it waits for: /readyz's ``waiting_for`` and
every model route's 503 name the kernel family being compiled, the model being restored,
or the store that does not answer (never a vague "models are being restored" while
numba compiles with zero models to restore)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from service.app import create_app
from service.engine.facade import Engine
from service.models.warmup import families
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


def test_a_compiling_service_says_which_kernels_it_compiles(tmp_path: Path) -> None:
    app, registry = _unready_app(tmp_path)
    fams = families()
    i = next(i for i, f in enumerate(fams, 1) if f.name == "linear")
    registry._warming(i, len(fams), fams[i - 1])  # what restore_all reports from its thread

    ready = asyncio.run(_get(app, "GET", "/readyz"))
    assert ready.status_code == 503
    body = ready.json()
    assert body["ready"] is False
    assert body["waiting_for"].startswith(f"compiling numba kernels {i}/{len(fams)}: linear")
    assert "learnserve warmup" in body["waiting_for"]

    for method, path, kw in (
        ("POST", "/update", {"json": {"model": "m", "examples": []}}),
        ("PUT", "/models/m", {"json": {"algorithm": "pa", "features": 4}}),
        ("GET", "/models", {}),
    ):
        r = asyncio.run(_get(app, method, path, **kw))
        assert r.status_code == 503, (path, r.text)
        detail = r.json()["detail"]
        assert detail["error"] == "not_ready"
        assert f"compiling numba kernels {i}/" in detail["message"], detail
        assert "being restored" not in detail["message"]
        assert r.headers["retry-after"] == "1"


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


def test_the_warmup_command_reports_every_family_from_its_own_process() -> None:
    """`learnserve warmup --jobs 2` (what `make serve` runs): every family reported
    started and done, compiled in worker processes (the kernels are cached here, so this
    is quick; the cold compile is the same code path)."""
    import os
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "service.cli", "warmup", "--jobs", "2"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    n = len(families())
    for fam in families():
        assert f": {fam.name}: {fam.what} ..." in run.stderr, run.stderr
        assert re.search(rf"warmup \d/{n}: {fam.name} \S.* in \d+\.\ds", run.stderr), run.stderr
    assert "warmup done in" in run.stderr
