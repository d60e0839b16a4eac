"""Fixtures for service tests: a real, private redis-server for the whole session.

Usage::

    def test_something(redis_url):          # empty database, server running
        store = RedisStore(redis_url)

    def test_restart(redis_server, redis_url):
        redis_server.stop(); redis_server.start()   # same port + dir: AOF data come back
        redis_server.kill()                          # SIGKILL

The server is never the system one on 6379: it runs on a free port in a temp dir with
``--appendonly yes --appendfsync everysec --save ""``. Tests skip with a clear reason
when no redis-server binary exists (set ``LEARNSERVE_REDIS_SERVER`` to point at one).
"""

from __future__ import annotations

import atexit
from collections.abc import Iterator

import pytest

from tests.service.cluster_procs import RedisClusterNodes, find_redis_cli
from tests.service.procs import RedisServer, find_redis_server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = find_redis_server()
    if binary is None:
        pytest.skip(
            "no redis-server binary found (install redis-server or set LEARNSERVE_REDIS_SERVER)"
        )
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    # atexit as a second line of defence: the finalizer below does not run if the
    # interpreter is torn down abruptly (e.g. an internal pytest error).
    atexit.register(server.kill)
    try:
        server.start()
        yield server
    finally:
        server.kill()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The server's URL with an empty database; restarts it if an earlier test stopped it."""
    if not redis_server.running:
        redis_server.start()
    redis_server.flushall()
    yield redis_server.url


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    """A real 3-master Redis Cluster (AOF on, no replicas) for the whole session."""
    binary = find_redis_server()
    cli = find_redis_cli(binary)
    if binary is None or cli is None:
        pytest.skip(
            "a Redis Cluster needs redis-server and redis-cli (install redis-server / "
            "redis-tools, or set LEARNSERVE_REDIS_SERVER)"
        )
    cluster = RedisClusterNodes(binary, cli, tmp_path_factory.mktemp("redis-cluster"))
    atexit.register(cluster.kill)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisClusterNodes) -> Iterator[str]:
    """The cluster's URL (one master; the client discovers the rest), every master empty."""
    if not redis_cluster.running:
        redis_cluster.start()
    redis_cluster.flushall()
    yield redis_cluster.url
