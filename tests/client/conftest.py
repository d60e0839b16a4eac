"""The real service for the client tests: the app served by uvicorn on a free port (a
thread of the test process, SQLite store in a temp dir), reached over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.requests import Request
from starlette.responses import Response

from service.settings import Settings
from tests.service.procs import free_port
from tests.service.serving import ServerThread


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    data = tmp_path_factory.mktemp("client-service")
    with ServerThread(Settings(data_dir=str(data))) as srv:
        yield srv


class LossyProxy:
    """A real HTTP proxy in front of the service that, for the update requests whose
    ordinal (1, 2, ... in arrival order) is in ``drop``, forwards the request (the
    service learns the batch) and then answers the client ``503`` with ``Retry-After``
    instead of the service's answer: the answer is lost on the way, as behind a load
    balancer that timed out. With
    ``always_503`` it answers every request 503 itself (a service that never recovers);
    with ``busy_first=n`` the first n requests of any kind (a service still starting:
    ``busy_error="not_ready"``), without forwarding them.
    """

    def __init__(
        self,
        upstream: str,
        drop: frozenset[int] = frozenset(),
        always_503: bool = False,
        busy_first: int = 0,
        busy_error: str = "unavailable",
    ) -> None:
        self.upstream = upstream
        self.drop = drop
        self.always_503 = always_503
        self.busy_left = busy_first
        self.busy_error = busy_error
        self.requests: list[str] = []  # "METHOD /path" of every request that came
        self.forwarded_updates: list[str | None] = []  # the Idempotency-Key of each
        self.lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", interface="asgi3"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        body = await request.body()
        with self.lock:
            self.requests.append(f"{request.method} {request.url.path}")
            busy = self.busy_left > 0
            self.busy_left -= busy
        if self.always_503 or busy:
            await _busy(scope, receive, send, self.busy_error)
            return
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        async with httpx.AsyncClient(base_url=self.upstream, timeout=60) as c:
            r = await c.request(request.method, request.url.path, content=body, headers=headers)
        lose = False
        if request.url.path.endswith("/update"):
            with self.lock:
                self.forwarded_updates.append(request.headers.get("idempotency-key"))
                lose = len(self.forwarded_updates) in self.drop
        if lose:
            await _busy(scope, receive, send)
            return
        keep = {
            k: v
            for k, v in r.headers.items()
            if k.lower()
            not in ("content-length", "transfer-encoding", "content-encoding", "connection")
        }
        await Response(r.content, r.status_code, keep)(scope, receive, send)

    def __enter__(self) -> LossyProxy:
        self.thread.start()
        import time

        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("proxy did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


async def _busy(scope: Any, receive: Any, send: Any, error: str = "unavailable") -> None:
    body = b'{"detail": {"error": "%s", "message": "upstream timed out"}}' % error.encode()
    await Response(body, 503, {"Retry-After": "0", "content-type": "application/json"})(
        scope, receive, send
    )


def a9a_path(name: str) -> Path:
    from tests.conftest import require_data

    return require_data("a9a", name)
