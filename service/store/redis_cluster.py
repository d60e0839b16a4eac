"""RedisClusterStore: RedisStore on a Redis Cluster, through redis-py's asyncio
``RedisCluster`` (it keeps the slot map, routes each command by its key's slot and
follows MOVED/ASK for single commands).

Every key of a model carries the ``{name}`` hash tag and the catalog keys the
``{catalog}`` one, so each Lua script, pipeline of one model and catalog pipeline
touches one slot; nothing here sends a multi-key command across slots.

What differs from RedisStore:

- **Group commit per master.** Queued appends are grouped by the master that owns
  each model's slot (``by_master``) and sent as one pipeline per master, on one of
  that master's connections, all masters concurrently. A master that fails fails
  only its own entries; entries of the others are acknowledged (one pipeline across
  masters would report entries as failed that were stored).
- **Durable acknowledgements per master.** ``WAIT``/``WAITAOF`` (see RedisStore) go
  at the end of each master's pipeline, on the connection that appended: they cover
  exactly the entries that master stored.
- **Slot map refresh.** redis-py re-reads the slot map for single commands but not
  for the per-master pipelines sent here: after a connection error or a MOVED
  reply the map is re-read in the background, at most once per ``refresh_interval``.
  The entries that got MOVED were not executed; they fail with StoreUnavailable and
  the caller's retry goes to the new owner.
- **Errors.** MovedError, AskError, ClusterDownError, MasterDownError, TryAgainError,
  SlotNotCoveredError and "cluster cannot be connected" are StoreUnavailable
  (503 + Retry-After), like connection errors.
- **wait_for_entries** polls each model's ``seq`` (one pipelined GET per model on
  each master, masters concurrently) every ``poll_interval`` seconds: XREAD over
  many streams would cross slots.

Example::

    store = RedisClusterStore("redis://10.0.0.1:7000")   # any node; the rest is discovered
    await store.open()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis import exceptions as rex
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.store.base import StoreUnavailable
from service.store.cluster_checks import cluster_config_warnings
from service.store.redis import RedisStore
from service.store.redis_keys import _keys
from service.store.redis_log import _append_command
from service.store.redis_wakes import WAKE_STREAMS, WakeStreams

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors of the cluster's state, not of the request (RedisStore maps the rest).
_CLUSTER_UNAVAILABLE: tuple[type[BaseException], ...] = (
    rex.ClusterError,  # ClusterDownError, MasterDownError, "TTL exhausted"
    rex.SlotNotCoveredError,
    rex.AskError,  # and MovedError
    rex.TryAgainError,
)
# RedisClusterException is also raised for programming errors (CROSSSLOT in a
# pipeline, a command without keys): only these messages mean "cannot reach it now".
_DOWN_MESSAGES = ("Redis Cluster cannot be connected", "All slots are not covered")
# After these the slot map may be stale (a failover, a resharding, a node gone).
_STALE_MAP: tuple[type[BaseException], ...] = (
    rex.AskError,
    rex.ClusterError,
    rex.ConnectionError,
    rex.TimeoutError,
    rex.SlotNotCoveredError,
    rex.TryAgainError,
    OSError,
)


def _describe(e: BaseException) -> str:
    # "MovedError 3716 127.0.0.1:7001": the text alone is only the slot and address.
    return f"{type(e).__name__} {e}"


class RedisClusterStore(RedisStore):
    name = "redis-cluster"
    _moved_hint = " (the slot map is being re-read; retry)"
    _use_wire = False  # commands go to the master of each slot (redis-py's cluster client)

    def __init__(
        self,
        url: str,
        *,
        poll_interval: float = 0.02,
        refresh_interval: float = 1.0,
        **opts: Any,
    ) -> None:
        super().__init__(url, **opts)
        # A multi-key XREAD would cross slots: one reader (connection) per wake stream.
        self.wakes = WakeStreams(one_reader_per_stream=True)
        self.wake_in_script = False  # the wake stream is in another slot: sent after
        self.wakes_complete = False  # an appender that dies in between loses its wake
        self.followers_atomic = False  # a leader's and a follower's keys: two slots
        if poll_interval <= 0 or refresh_interval < 0:
            raise ValueError("poll_interval must be > 0 and refresh_interval >= 0 seconds")
        self.poll_interval = poll_interval
        self.refresh_interval = refresh_interval
        self._last_refresh = 0.0
        self._refresh: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ plumbing
    def _client(self, socket_timeout: float | None, max_connections: int) -> Any:
        return RedisCluster.from_url(
            self.url,
            # Per node. A node with all of them busy answers MaxConnectionsError at
            # once (-> StoreUnavailable) instead of queueing like the single-node pool.
            max_connections=max_connections,
            socket_timeout=socket_timeout,
            socket_connect_timeout=self.connect_timeout,
            health_check_interval=self.health_check_interval,
            # No retries: a retried script could append twice. MOVED/ASK are still
            # followed (the command was not executed there).
            retry=Retry(NoBackoff(), 0),
            # A master down without a replica to take over leaves its slots uncovered:
            # models on the other masters keep working.
            require_full_coverage=False,
            client_name="learnserve",
        )

    @property
    def cluster(self) -> RedisCluster:
        return self.r  # type: ignore[return-value]

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            return await super()._call(fn)
        except StoreUnavailable as e:
            if isinstance(e.__cause__, _STALE_MAP):
                self._slot_map_stale()
            raise
        except _CLUSTER_UNAVAILABLE as e:
            self._slot_map_stale()
            raise StoreUnavailable(f"redis cluster {self._where()}: {_describe(e)}") from e
        except rex.RedisClusterException as e:
            if not str(e).startswith(_DOWN_MESSAGES):
                raise
            raise StoreUnavailable(f"redis cluster {self._where()}: {e}") from e

    def _slot_map_stale(self) -> None:
        """Re-read the slot map in the background, at most once per refresh_interval."""
        now = time.monotonic()
        if self._r is None or now - self._last_refresh < self.refresh_interval:
            return
        if self._refresh is not None and not self._refresh.done():
            return
        self._last_refresh = now
        self._refresh = asyncio.create_task(self._refresh_slot_map())

    async def _refresh_slot_map(self) -> None:
        try:
            await self.cluster.nodes_manager.initialize()
        except Exception as e:  # the next call reports it, with its own error
            log.warning("redis cluster %s: slot map not re-read: %s", self._where(), e)

    async def by_master(self, names: list[str]) -> dict[ClusterNode, list[int]]:
        """Indexes into ``names``, grouped by the master that owns each model's slot
        (as the client's slot map says now: a stale map shows as MOVED replies)."""
        groups: dict[ClusterNode, list[int]] = {}
        for i, name in enumerate(names):
            node = await self.master_of(_keys(name)["config"])
            groups.setdefault(node, []).append(i)
        return groups

    async def master_of(self, key: str) -> ClusterNode:
        """The master that owns ``key``'s slot (raises SlotNotCoveredError if none)."""
        await self.cluster.initialize()  # no-op once the map is known
        node = self.cluster.get_node_from_key(key)
        if node is None:  # None only when asked for a replica
            raise rex.SlotNotCoveredError(f"no master for {key!r}")
        return node

    @staticmethod
    async def node_pipeline(node: ClusterNode, commands: list[tuple[Any, ...]]) -> list[Any]:
        """``commands`` on one connection of ``node``, written at once; the replies in
        order, an error reply as its exception. A broken connection raises (and is
        dropped by redis-py, so no reply is ever read by the wrong caller)."""
        cmds = [PipelineCommand(i, *c) for i, c in enumerate(commands)]
        await node.execute_pipeline(cmds)
        return [c.result for c in cmds]

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        if self._r is not None:
            return
        self._r = self._client(self.socket_timeout, self.max_connections)
        # The wake readers' XREAD BLOCK: no socket timeout (asyncio.wait_for bounds it).
        self._blocking = self._client(None, WAKE_STREAMS + 2)
        try:
            await self._learn_version()
        except StoreUnavailable as e:
            log.warning("redis cluster %s is unreachable at open (%s); will retry on use",
                        self._where(), e)  # fmt: skip
            return
        for warning in await self.config_warnings():
            log.warning("%s", warning)

    async def config_warnings(self) -> list[str]:
        """The README's cluster settings that these masters lack (``cluster_checks``)."""
        masters = [(f"{n.host}:{n.port}", n.execute_command) for n in self.cluster.get_primaries()]
        try:
            return await cluster_config_warnings(masters, self.wait_replicas)
        except (rex.RedisError, OSError) as e:  # a node went away meanwhile: not fatal
            log.info("redis cluster settings not checked: %s", e)
            return []

    async def _learn_version(self) -> None:
        # The oldest master decides: WAITAOF must work on every one of them.
        async def versions() -> list[str]:
            await self.cluster.initialize()
            infos = await asyncio.gather(
                *(n.execute_command("INFO", "server") for n in self.cluster.get_primaries())
            )
            return [str(i["redis_version"]) for i in infos]

        found = await self._call(versions)
        self._set_server_version(min(found, key=lambda v: tuple(int(x) for x in v.split(".")[:3])))

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(BaseException):
                await self._refresh
            self._refresh = None
        await super().close()

    async def _close_client(self, client: Any) -> None:
        await client.aclose()

    # ------------------------------------------------------------------ writes
    async def _send_appends(self, batch: list[tuple[str, bytes, str, Any]]) -> list[Any]:
        names = [name for name, _, _, _ in batch]
        groups = await self.by_master(names)
        acks = self._ack_commands()
        results: list[Any] = [None] * len(batch)

        async def on_master(node: ClusterNode, idx: list[int]) -> None:
            cmds = [_append_command(*batch[i][:3]) for i in idx]
            try:
                replies = await self.node_pipeline(node, cmds + acks)
                for j, reply in enumerate(replies):
                    if isinstance(reply, _STALE_MAP):  # e.g. MOVED: not executed there
                        self._slot_map_stale()
                        replies[j] = StoreUnavailable(
                            f"redis cluster node {node.name}: {_describe(reply)}{self._moved_hint}"
                        )
                if acks:  # this master's entries only: the others have their own wait
                    self._check_acks(replies[len(cmds) :])
                del replies[len(cmds) :]
            except StoreUnavailable as e:
                replies = [e] * len(idx)
            except _STALE_MAP as e:
                self._slot_map_stale()
                replies = [
                    StoreUnavailable(f"redis cluster node {node.name}: {_describe(e)}")
                ] * len(idx)
            for i, reply in zip(idx, replies, strict=True):
                results[i] = reply

        await asyncio.gather(*(on_master(n, idx) for n, idx in groups.items()))
        return results

    async def _eval_acked(self, src: str, keys: list[str], args: list[Any]) -> Any:
        acks = self._ack_commands()

        async def run() -> list[Any]:
            node = await self.master_of(keys[0])
            replies = await self.node_pipeline(
                node, [("EVAL", src, len(keys), *keys, *args), *acks]
            )
            if isinstance(replies[0], Exception):
                raise replies[0]  # mapped by _call (MOVED -> StoreUnavailable + refresh)
            return replies

        replies = await self._call(run)
        self._check_acks(replies[1:])
        return replies[0]

    # ------------------------------------------------------------------ waiting
    async def wait_for_entries(self, after: dict[str, int], timeout: float) -> None:
        """Polls every model's ``seq`` (pipelined per master, masters concurrently)."""
        if not after:
            await asyncio.sleep(max(timeout, 0.0))
            return
        names = list(after)
        deadline = time.monotonic() + max(timeout, 0.0)
        check = functools.partial(self._any_past, names, after)
        while not await self._call(check):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(self.poll_interval, left))

    async def last_positions(self, names: list[str]) -> dict[str, int]:
        """One pipelined GET per model on each master, masters concurrently."""

        async def on_master(node: ClusterNode, idx: list[int]) -> dict[str, int]:
            replies = await self.node_pipeline(node, [("GET", _keys(names[i])["seq"]) for i in idx])
            out: dict[str, int] = {}
            for i, reply in zip(idx, replies, strict=True):
                if isinstance(reply, Exception):
                    raise reply
                out[names[i]] = int(reply or 0)
            return out

        async def run() -> dict[str, int]:
            groups = await self.by_master(names)
            found: dict[str, int] = {}
            for part in await asyncio.gather(*(on_master(n, i) for n, i in groups.items())):
                found.update(part)
            return found

        return await self._call(run) if names else {}

    async def _any_past(self, names: list[str], after: dict[str, int]) -> bool:
        async def on_master(node: ClusterNode, idx: list[int]) -> bool:
            replies = await self.node_pipeline(node, [("GET", _keys(names[i])["seq"]) for i in idx])
            for i, reply in zip(idx, replies, strict=True):
                if isinstance(reply, Exception):
                    raise reply
                if int(reply or 0) > after[names[i]]:
                    return True
            return False

        groups = await self.by_master(names)
        return any(await asyncio.gather(*(on_master(n, idx) for n, idx in groups.items())))
