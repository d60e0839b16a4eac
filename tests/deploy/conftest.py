"""Helpers for the deployment tests: the repository's files, the service and Redis as processes.

Process plumbing (free ports, redis-server, waiting for health) is shared with the
service tests through :mod:`tests.service.procs`.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.procs import RedisServer, find_redis_server, free_port, start_service
from tests.service.procs import stop_process as stop_process

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "docker" / "grafana" / "dashboards").glob("*.json"))


def learnserve_executable() -> str:
    """The ``learnserve`` script of the interpreter running the tests (the project's venv)."""
    beside = Path(sys.executable).parent / "learnserve"
    if beside.exists():
        return str(beside)
    found = shutil.which("learnserve")
    if found is None:
        pytest.fail("no `learnserve` executable: install the project (make venv)")
    return found


@contextlib.contextmanager
def running_service(
    data_dir: Path,
    *,
    workers: int = 1,
    redis_url: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 90.0,
    logs: list[Path] | None = None,
) -> Iterator[str]:
    """Start ``learnserve serve`` on a free port, wait until /readyz, yield its base URL
    (``logs``, if given, gets the path of the service's output: read it when a test fails)."""
    port = free_port()
    args = [learnserve_executable(), "serve", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--workers", str(workers), "--data-dir", str(data_dir), "--log-level", "warning"]
    if redis_url:
        args += ["--redis-url", redis_url]
    # Settings come from the command line; keep the caller's LEARNSERVE_* out of it.
    clean = {"LEARNSERVE_API_KEYS": "", "LEARNSERVE_ENVIRONMENT": "development"}
    proc = start_service(args, {**clean, **(env or {})}, port, timeout, health_path="/readyz")
    if logs is not None:
        logs.append(Path(proc.log_path))  # type: ignore[attr-defined]
    try:
        if workers > 1:  # one worker ready is not all: the others answer 503 until they are
            from tests.service.serving import wait_ready

            wait_ready(f"http://127.0.0.1:{port}", timeout, workers=workers)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc, timeout=15)


@pytest.fixture(scope="module")
def deploy_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A private redis-server (AOF on) for one test module; skips when none is installed."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server binary (make system-deps, or set LEARNSERVE_REDIS_SERVER)")
    server = RedisServer(binary, tmp_path_factory.mktemp("deploy-redis"))
    try:
        server.start()
        yield server
    finally:
        server.kill()
