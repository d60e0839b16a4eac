"""``learnserve serve``: run the HTTP service with uvicorn (or granian: ``--server``).

Options override the ``LEARNSERVE_*`` environment. With ``--workers N > 1``
the server starts N processes, each running ``create_app`` against the same store
(use Redis: every worker applies every model's log, so replicas agree), and
``PROMETHEUS_MULTIPROC_DIR`` is set to a fresh temp dir so ``/metrics``
aggregates all workers.

``--server granian`` runs the same app under granian's ASGI interface (HTTP/1.1, no
websockets, a dead worker started again as uvicorn's supervisor does). Its answers,
body limits and deadlines (the app's own), 413/408 and graceful shutdown are
uvicorn's (``bench/servers.py`` checks them byte for byte); it costs less CPU per
``/predict`` and the same per ``/update`` (bench/README.md, "the server under the app").
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import typer


def serve(
    host: str = typer.Option(None, help="Bind address (env LEARNSERVE_HOST; default 127.0.0.1)"),
    port: int = typer.Option(None, help="Port (env LEARNSERVE_PORT; default 8000)"),
    workers: int = typer.Option(None, help="Worker processes (env LEARNSERVE_WORKERS; default 1)"),
    redis_url: str = typer.Option(
        None,
        help="Redis URL for the durable store (env LEARNSERVE_REDIS_URL; default none: "
        "an embedded SQLite store under --data-dir)",
    ),
    redis_cluster: bool = typer.Option(
        None,
        "--redis-cluster/--no-redis-cluster",
        help="--redis-url names a node of a Redis Cluster "
        "(env LEARNSERVE_REDIS_CLUSTER; default no)",
    ),
    data_dir: str = typer.Option(
        None, help="Data directory (env LEARNSERVE_DATA_DIR; default ./data)"
    ),
    server: str = typer.Option(
        None,
        help="HTTP server: uvicorn or granian (env LEARNSERVE_SERVER; default uvicorn)",
    ),
    log_level: str = typer.Option(
        "info",
        help="uvicorn/app log level: debug, info, warning, error (sets LEARNSERVE_LOG_LEVEL)",
    ),
) -> None:
    """Serve models over HTTP (FastAPI + uvicorn, or granian)."""
    from service.settings import Settings

    overrides = {
        "LEARNSERVE_HOST": host,
        "LEARNSERVE_PORT": port,
        "LEARNSERVE_WORKERS": workers,
        "LEARNSERVE_REDIS_URL": redis_url,
        "LEARNSERVE_REDIS_CLUSTER": None if redis_cluster is None else str(redis_cluster).lower(),
        "LEARNSERVE_DATA_DIR": data_dir,
        "LEARNSERVE_SERVER": server,
    }
    # Workers are fresh processes that build their settings from the environment.
    for key, value in overrides.items():
        if value is not None:
            os.environ[key] = str(value)
    os.environ["LEARNSERVE_LOG_LEVEL"] = log_level
    try:
        settings = Settings()
    except Exception as e:  # a clear message instead of a traceback
        typer.echo(f"error: invalid settings: {e}", err=True)
        raise typer.Exit(2) from None
    if settings.data_dir and not settings.redis_url:
        os.makedirs(settings.data_dir, exist_ok=True)
    multiproc_dir = None
    if settings.workers > 1:
        if not settings.redis_url:
            typer.echo(
                "note: several workers on the SQLite store work but poll for each "
                "other's updates; use --redis-url in production",
                err=True,
            )
        multiproc_dir = tempfile.mkdtemp(prefix="learnserve-prom-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc_dir
    try:
        if settings.server == "granian":
            _run_granian(settings, log_level)
        else:
            _run_uvicorn(settings, log_level)
    finally:
        if multiproc_dir:
            shutil.rmtree(multiproc_dir, ignore_errors=True)


def _run_uvicorn(settings: Any, log_level: str) -> None:
    import uvicorn

    uvicorn.run(
        "service.app:factory",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=log_level,
        access_log=False,  # per-request logging costs more than the request
        # A worker starting up compiles or loads numba kernels and restores every
        # model (seconds, more on a loaded machine): uvicorn's default of 5 s to answer
        # the supervisor's health check kills such workers again and again.
        timeout_worker_healthcheck=60,
    )


def _run_granian(settings: Any, log_level: str) -> None:
    from granian.constants import HTTPModes, Interfaces
    from granian.log import LogLevels
    from granian.server import Server

    Server(
        "service.app:factory",
        factory=True,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        workers=settings.workers,
        http=HTTPModes.http1,  # what uvicorn serves (no h2c upgrade)
        websockets=False,
        log_level=LogLevels(log_level.lower()),
        log_access=False,
        respawn_failed_workers=True,  # as uvicorn's supervisor restarts a dead worker
    ).serve()
