"""Helpers to run the real service for API tests: in-process (a uvicorn thread) or
as ``learnserve serve`` subprocesses, and to talk to it with httpx."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from service.app import create_app
from service.settings import Settings
from tests.service.procs import free_port, start_service, stop_process


class ServerThread:
    """The app served by uvicorn on a free port in a background thread (real HTTP)."""

    def __init__(self, settings: Settings, wait: bool = True) -> None:
        self.wait = wait
        self.port = free_port()
        self.settings = settings.model_copy(update={"port": self.port})
        self.app = create_app(self.settings)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        if self.wait:
            wait_ready(self.url)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, **{"timeout": 30.0, **kw})


def wait_ready(url: str, timeout: float = 60.0, workers: int = 1) -> None:
    """Until ``workers`` distinct worker processes have answered ``/readyz`` with 200."""
    deadline = time.monotonic() + timeout
    last: object = None
    ready: set[str] = set()
    while time.monotonic() < deadline:
        try:
            # A new connection each time, so that every worker gets asked.
            r = httpx.get(f"{url}/readyz", timeout=2.0, headers={"Connection": "close"})
            if r.status_code == 200:
                ready.add(r.headers.get("x-worker", ""))
                if len(ready) >= workers:
                    return
            last = r.text
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.02)
    raise RuntimeError(f"{url} not ready within {timeout}s: {last!r}")


def learnserve_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("learnserve")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from service.cli.main import main; main()"]


def start_learnserve(
    port: int, env: dict[str, str], workers: int = 1, extra: list[str] | None = None
) -> Any:
    """``learnserve serve`` in a subprocess; returns once it is ready (``/readyz``)."""
    args = [*learnserve_cmd(), "serve", "--port", str(port), "--workers", str(workers)]
    proc = start_service(args + (extra or []), {"LEARNSERVE_LOG_LEVEL": "warning", **env}, port)
    try:
        wait_ready(f"http://127.0.0.1:{port}", workers=workers)
    except BaseException:
        stop_process(proc)  # not left running after the test session
        raise
    return proc


def start_learnserve_all(
    ports: list[int], env: dict[str, str], extra: list[str] | None = None
) -> list[Any]:
    """``start_learnserve`` on each port; those started are stopped if one fails."""
    procs: list[Any] = []
    try:
        for p in ports:
            procs.append(start_learnserve(p, env, extra=extra))
    except BaseException:
        for proc in procs:
            stop_process(proc)
        raise
    return procs


def dense_model(dim: int = 4, algorithm: str = "arow", **params: Any) -> dict[str, Any]:
    return {"algorithm": algorithm, "params": params, "features": {"kind": "dense", "dim": dim}}
