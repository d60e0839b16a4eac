"""The Redis store's connections: the clients, error mapping, scripts and durable acks.

Two clients (connection pools): one for every command, with short socket timeouts,
and a small one without a socket timeout for the wake readers' ``XREAD BLOCK``.
``_call`` maps "Redis is not usable right now" errors to ``StoreUnavailable``;
nothing is retried in the client, so a script is never executed twice by the store
itself. ``_ack_commands`` / ``_check_acks``: the ``WAIT``/``WAITAOF`` sent after
writes on their connection (see :mod:`service.store.redis`). The base of
:class:`service.store.redis.RedisStore`, whose constructor sets the attributes
declared here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.store.base import Store, StoreUnavailable, ValueTooLarge
from service.store.redis_keys import EPOCH_KEY

# The store's logger, named as before its modules were split (log filters name it).
log = logging.getLogger("service.store.redis")
T = TypeVar("T")

# Errors meaning "Redis is not usable right now" rather than "you sent something wrong".
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    rex.ConnectionError,  # includes BusyLoadingError (LOADING), MaxConnectionsError
    rex.TimeoutError,
    rex.ReadOnlyError,  # a replica after failover
    rex.TryAgainError,
    rex.ClusterDownError,  # and MasterDownError
    rex.AskError,  # and MovedError: a Redis Cluster node (see _call)
    rex.ClusterCrossSlotError,  # a script over two slots (the wake stream) on a cluster node
    rex.OutOfMemoryError,
    TimeoutError,
    OSError,
)
_UNAVAILABLE_PREFIXES = ("MISCONF", "MASTERDOWN", "LOADING", "NOREPLICAS")


def _connection_lost(e: BaseException) -> bool:
    """Whether the pool's idle connections are suspect too (see _drop_idle_connections):
    a connection closed or refused, not a slow command, a busy pool or a loading server."""
    if isinstance(e, rex.TimeoutError | TimeoutError | rex.BusyLoadingError):
        return False
    if isinstance(e, rex.MaxConnectionsError) or "No connection available" in str(e):
        return False
    return isinstance(e, rex.ConnectionError | ConnectionError | OSError)


class RedisConnection(Store):
    # Said with a MOVED/ASK reply: this client was pointed at one node of a cluster.
    _moved_hint = " (a Redis Cluster node: set LEARNSERVE_REDIS_CLUSTER=true)"
    url: str
    socket_timeout: float
    connect_timeout: float
    max_connections: int
    health_check_interval: int
    waitaof_requested: bool
    wait_replicas: int
    wait_timeout: float
    waitaof: bool  # decided in open() from the server version
    server_version: tuple[int, ...] | None
    _r: aioredis.Redis | None
    _blocking: aioredis.Redis | None  # for XREAD BLOCK

    # ------------------------------------------------------------------ plumbing
    def _client(self, socket_timeout: float | None, max_connections: int) -> aioredis.Redis:
        pool = aioredis.BlockingConnectionPool.from_url(
            self.url,
            max_connections=max_connections,
            # How long a call may wait for a free pooled connection (backpressure).
            timeout=(socket_timeout or self.socket_timeout) + self.connect_timeout,
            socket_timeout=socket_timeout,
            socket_connect_timeout=self.connect_timeout,
            health_check_interval=self.health_check_interval,
            # No retries: a retried script could append twice. Dead pooled sockets are
            # replaced at checkout anyway, so this costs nothing after a restart.
            retry=Retry(NoBackoff(), 0),
            client_name="learnserve",
        )
        return aioredis.Redis(connection_pool=pool)

    def redis_client(self) -> aioredis.Redis | None:
        """The opened connection pool (None before ``open``), for what shares it: the
        fleet's membership leases (``service.fleet.membership``)."""
        return self._r

    @property
    def r(self) -> aioredis.Redis:
        if self._r is None:
            raise RuntimeError("RedisStore is not open (call await store.open())")
        return self._r

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            return await fn()
        except _UNAVAILABLE as e:
            if _connection_lost(e):
                await self._drop_idle_connections()
            raise self._unavailable(e) from e
        except rex.ResponseError as e:
            if str(e).startswith(_UNAVAILABLE_PREFIXES):
                raise StoreUnavailable(f"redis {self._where()}: {e}") from e
            if "exceeds maximum allowed size" in str(e):  # proto-max-bulk-len set lower
                raise ValueTooLarge(f"redis {self._where()}: {e}") from e
            raise

    async def _drop_idle_connections(self) -> None:
        """Close the pooled connections nobody uses: after a connection was lost, the
        idle ones are most likely dead too (Redis restarted, a failover), and each would
        fail the one call that next checks it out (the pool's check at checkout does not
        see a peer that closed). Closed, they connect afresh when next checked out."""
        for client in (self._r, self._blocking):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.connection_pool.disconnect(inuse_connections=False)

    def _unavailable(self, e: BaseException) -> StoreUnavailable:
        if isinstance(e, rex.AskError | rex.ClusterCrossSlotError):  # only "<slot> <host:port>"
            return StoreUnavailable(
                f"redis {self._where()}: {type(e).__name__} {e}{self._moved_hint}"
            )
        return StoreUnavailable(f"redis {self._where()}: {e}")

    def _where(self) -> str:
        return self.url.split("@")[-1]  # never put a password in an error message

    async def _script(self, src: str, keys: list[str], args: list[Any]) -> Any:
        # EVAL with the body: one round trip, no NOSCRIPT dance after a restart; the
        # scripts are tiny, and Redis caches them by SHA on its side.
        return await self._call(lambda: self.r.eval(src, len(keys), *keys, *args))

    async def _bump_epoch(self) -> None:
        await self._call(lambda: self.r.incr(EPOCH_KEY))

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        if self._r is not None:
            return
        self._r = self._client(self.socket_timeout, self.max_connections)
        # XREAD BLOCK holds its connection for the whole wait: a separate small pool
        # without a socket timeout (the wait is bounded by asyncio.wait_for instead).
        self._blocking = self._client(None, 4)
        try:
            await self._learn_version()
        except StoreUnavailable:
            # Opening with Redis down is allowed: calls raise StoreUnavailable until it
            # is back, so the service can start and report not-ready.
            log.warning("redis %s is unreachable at open; will retry on use", self._where())

    async def _learn_version(self) -> None:
        info: Any = await self._call(lambda: self.r.info("server"))
        self._set_server_version(str(info["redis_version"]))

    def _set_server_version(self, text: str) -> None:
        """Record the server's version and decide whether WAITAOF can be used."""
        self.server_version = tuple(int(x) for x in text.split(".")[:3])
        if not self.waitaof_requested:
            return
        self.waitaof = self.server_version >= (7, 2)
        if not self.waitaof:
            log.warning(
                "redis_waitaof requested but Redis %s has no WAITAOF (needs >= 7.2); appends "
                "are acknowledged before the AOF fsync",
                ".".join(map(str, self.server_version)),
            )

    async def close(self) -> None:
        for c in (self._r, self._blocking):
            if c is not None:
                await self._close_client(c)
        self._r = self._blocking = None

    async def _close_client(self, client: Any) -> None:
        await client.aclose(close_connection_pool=True)

    async def ping(self) -> bool:
        if self._r is None:
            return False
        try:
            return bool(await self._call(self._r.ping))
        except Exception:
            return False

    async def _ready_to_append(self) -> None:
        """Raise if the store is not open; learn the server's version if Redis was down
        at open() (whether WAITAOF can be used decides how appends are acknowledged)."""
        self.r  # noqa: B018 -- raises if the store is not open
        if self.waitaof_requested and self.server_version is None:
            await self._learn_version()

    # ------------------------------------------------------------------ durable acks
    def _ack_commands(self) -> list[tuple[Any, ...]]:
        """What to send after writes, on their connection, before acknowledging them:
        WAITAOF (local fsync, + ``wait_replicas`` replicas' fsync) where the server has
        it and it was asked for, else WAIT for ``wait_replicas`` replicas, else nothing."""
        ms = max(1, int(self.wait_timeout * 1000))  # 0 would mean "forever"
        if self.waitaof:
            return [("WAITAOF", 1, self.wait_replicas, ms)]
        if self.wait_replicas:
            return [("WAIT", self.wait_replicas, ms)]
        return []

    def _check_acks(self, replies: list[Any]) -> None:
        """Raise StoreUnavailable unless the replies of ``_ack_commands`` say enough
        copies exist. The writes themselves may be stored: the caller cannot know."""
        for reply in replies:
            if isinstance(reply, Exception):
                ok = False
            elif isinstance(reply, list):  # WAITAOF: [local fsyncs, replica fsyncs]
                ok = int(reply[0]) >= 1 and int(reply[1]) >= self.wait_replicas
            else:  # WAIT: replicas that received the writes
                ok = int(reply) >= self.wait_replicas
            if not ok:
                cmd = "WAITAOF" if self.waitaof else "WAIT"
                want = "fsynced" if self.waitaof else f"on {self.wait_replicas} replica(s)"
                raise StoreUnavailable(
                    f"redis {self._where()}: writes not {want} within {self.wait_timeout}s "
                    f"({cmd}: {reply!r}); they may be stored (a retry with the same "
                    "idempotency key is answered from them)"
                )

    async def _eval_acked(self, src: str, keys: list[str], args: list[Any]) -> Any:
        """One script, then ``_ack_commands`` on the same connection; the script's reply."""
        acks = self._ack_commands()

        async def run() -> Any:
            async with self.r.pipeline(transaction=False) as p:
                p.eval(src, len(keys), *keys, *args)
                for cmd in acks:
                    p.execute_command(*cmd)
                return await p.execute(raise_on_error=True)

        results = await self._call(run)
        self._check_acks(results[1:])
        return results[0]
