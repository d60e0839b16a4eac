"""Helpers for tests that start real processes: free ports, a real redis-server, uvicorn.

Everything here is synchronous and stdlib (+ redis-py's sync client), so it can be
used from fixtures and from plain tests alike::

    port = free_port()
    proc = start_service(["learnserve", "serve", "--port", str(port)], env, port)
    try:
        ...  # talk to http://127.0.0.1:{port}
    finally:
        stop_process(proc)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

# Ports handed out by free_port, across every process of a test session (xdist workers
# included): one file a port. The OS's bind-to-0 may hand the same port to two workers
# within a moment, and then one service answers the other's readiness poll (a CI failure:
# the probe found the port closed once the other test stopped its server).
_PORTS_DIR = Path(tempfile.gettempdir()) / f"learnserve-test-ports-{os.getuid()}"
_PORT_HOLD_SECONDS = 3600.0  # a reservation older than this is from an earlier session


def _reserve(port: int) -> bool:
    _PORTS_DIR.mkdir(exist_ok=True)
    mark = _PORTS_DIR / str(port)
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        try:
            stale = time.time() - mark.stat().st_mtime > _PORT_HOLD_SECONDS
        except FileNotFoundError:
            stale = True
        if stale:
            mark.touch()
        return stale


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now and that no other
    ``free_port`` call of this test session (any process) has handed out.

    The OS picks it (bind to port 0); there is an unavoidable small window before the
    caller binds it, which is fine for tests.
    """
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if _reserve(port):
            return port
    raise RuntimeError(f"no free port after 200 tries (reservations in {_PORTS_DIR})")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL. Returns the exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout)
    return proc.returncode


def wait_http_ok(
    url: str, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll ``url`` until it answers 200; raise RuntimeError on timeout or if ``proc`` dies."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with code {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                if r.status == 200:
                    return
                last = r.status
        except (urllib.error.URLError, OSError) as e:
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer 200 within {timeout:.0f}s (last: {last!r})")


def start_service(
    args: list[str],
    env: dict[str, str] | None,
    port: int,
    timeout: float = 60.0,
    health_path: str = "/healthz",
) -> subprocess.Popen[bytes]:
    """Start a server process (e.g. ``learnserve serve`` or uvicorn) and wait for its health URL.

    ``env`` is merged over ``os.environ``. The process's stdout+stderr go to a temp
    file whose path is ``proc.log_path`` (read it when a test fails); on a startup
    failure the log tail is in the exception message and the process is stopped.
    """
    full_env = {**os.environ, **(env or {})}
    log = tempfile.NamedTemporaryFile(prefix="learnserve-proc-", suffix=".log", delete=False)
    proc = subprocess.Popen(args, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    proc.log_path = log.name  # type: ignore[attr-defined]
    try:
        wait_http_ok(f"http://127.0.0.1:{port}{health_path}", timeout, proc)
        time.sleep(0.05)
        if proc.poll() is not None:  # another server answered, this one could not bind
            raise RuntimeError(f"process exited with code {proc.returncode} after "
                               f"port {port} answered")  # fmt: skip
    except RuntimeError as e:
        stop_process(proc)
        tail = Path(log.name).read_text(errors="replace")[-4000:]
        raise RuntimeError(f"{e}\n--- output of {args!r} ---\n{tail}") from None
    return proc


# ---------------------------------------------------------------------- redis-server


def find_redis_server() -> str | None:
    """``$LEARNSERVE_REDIS_SERVER``, else ``redis-server`` on PATH, else /usr/bin/redis-server."""
    env = os.environ.get("LEARNSERVE_REDIS_SERVER")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("redis-server")
    if found:
        return found
    return "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None


class RedisServer:
    """A private redis-server on a free port, AOF on (``appendfsync everysec``), no RDB.

    ``stop()`` shuts down gracefully (SHUTDOWN fsyncs the AOF) and ``start()`` comes
    back on the same port and directory, so acknowledged data survive a restart.
    ``kill()`` is SIGKILL (up to ~1 s of writes may be lost, as with everysec in prod).
    """

    def __init__(
        self,
        binary: str,
        directory: Path,
        port: int | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.binary = binary
        self.extra_args = list(extra_args or [])  # e.g. --cluster-enabled yes
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self, timeout: float = 2.0):  # -> redis.Redis (sync)
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No client-side retries: a test must see exactly what the server did.
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def start(self, timeout: float = 30.0) -> None:
        if self.running:
            return
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.dir / "redis.log"),
            *self.extra_args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        import redis

        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode}: {self._log_tail()}"
                )
            try:
                with self.client(0.5) as c:
                    if c.ping():  # raises BusyLoadingError while the AOF loads
                        return
            except redis.RedisError as e:
                last = e
            time.sleep(0.05)
        raise RuntimeError(
            f"redis-server did not answer PING in {timeout}s ({last!r}): {self._log_tail()}"
        )

    def _log_tail(self) -> str:
        p = self.dir / "redis.log"
        return p.read_text(errors="replace")[-2000:] if p.exists() else "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful: SHUTDOWN (fsyncs the AOF), falling back to SIGTERM, then SIGKILL."""
        if not self.running:
            return
        import redis

        try:
            with self.client() as c:
                c.shutdown()  # the server closes the connection: redis-py raises or returns
        except redis.RedisError:
            pass
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop_process(self.proc, timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def flushall(self) -> None:
        with self.client() as c:
            c.flushall()
