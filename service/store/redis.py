"""RedisStore: the production store, on redis-py's asyncio client.

Key layout (``{name}`` is a Redis Cluster hash tag: one model's keys share a slot, so
every per-model Lua script touches one slot only)::

    ls:{NAME}:config    string  canonical JSON config; its existence IS the model
    ls:{NAME}:gen       string  random id given at creation (new after delete + create)
    ls:{NAME}:seq       string  last log position ever handed out (survives trimming)
    ls:{NAME}:head      string  the log's chain head at seq (``base.chain_head``)
    ls:{NAME}:lease:checkpoint  string  holder of the checkpoint-writer lease (PX expiry)
    ls:{NAME}:lease:default_reward  string  holder of a decision model's default-reward sweep
    ls:{NAME}:log       stream  entry id "<position>-0", field p = payload, h = chain head
    ls:{NAME}:ckpt      hash    position, created_at, token, chunks (switched by one script)
    ls:{NAME}:ckptdata  hash    "<token>:<i>" -> the i-th 1 MB chunk of that checkpoint
    ls:{NAME}:art       hash    "<version>" -> artifact blob
    ls:{NAME}:artmeta   hash    "<version>" -> JSON metadata, "last", "active"
    ls:{NAME}:idem      hash    idempotency key -> "<position> <n> <payload hash> <gen>"
    ls:{NAME}:idemexp   zset    idempotency key, scored by its expiry (ms, Redis TIME)
    ls:{NAME}:idempos   hash    "<position>" -> the idempotency key appended there
    ls:{NAME}:idemout   hash    idempotency key -> outcome of an entry that failed to apply
    ls:{NAME}:fb, fbexp, fblab  delayed labels: see service.store.redis_feedback
    ls:{NAME}:followers set     names of the models that follow it (service.store.redis_followers)
    ls:{NAME}:serving   string  the follower its last promotion made answer for it
    ls:{catalog}:models set     names of all models (an index; configs are authoritative)
    ls:{catalog}:epoch  string  catalog change counter

Writes that need the model check ``config`` inside the same script, so a delete racing
an update can never leave stray entries for a re-created model to inherit. The index
and epoch live in another slot and are updated right after the per-model script.

Durability: ``append`` returns once Redis acknowledged the script. With the usual
``appendonly yes`` + ``appendfsync everysec`` Redis acknowledges *before* fsync, so a
machine crash (not a Redis restart or a SIGKILL of Redis alone) can lose up to ~1 s
of acknowledged entries; that trade-off is the operator's Redis config. On Redis
>= 7.2 ``waitaof=True`` makes every append wait for ``WAITAOF 1 <wait_replicas>``
(local fsync, and that many replicas' fsync) before acknowledging; Redis 7.0 has no
WAITAOF and the option is then ignored with a warning. ``wait_replicas=N`` (without
WAITAOF) waits for ``WAIT N``: N replicas received the appends, so a failover to one
of them keeps them. Either wait is sent on the connection that appended, after the
group's scripts; one that is not satisfied within ``wait_timeout`` raises
StoreUnavailable although the entries may be stored (a retry with an idempotency
key is then answered from the stored entry, not appended twice).

Concurrent appends are group-committed: whatever is queued while one pipeline is in
flight goes out as the next pipeline of scripts (in call order), so many concurrent
``/update`` requests cost few round trips and one pooled connection.

Errors: connection problems (refused, timeouts, LOADING, READONLY, MISCONF, ...) raise
``StoreUnavailable`` quickly (short socket timeouts). Nothing is retried inside the
client, so an append is never executed twice by the store itself; an append that
raised StoreUnavailable may or may not have been recorded, as with any network write.
The pool reconnects on the next call once Redis is back.

The class is put together from one module per responsibility, each a base class over
``RedisConnection`` (``redis_connection``: clients, error mapping, durable acks;
``redis_keys``: key names; ``redis_scripts``: the Lua scripts)::

    redis_log           append (group commit), read_log, trim_log, wait_for_changes
    redis_idempotency   append_once, record_outcome, key_recorded, get_outcome
    redis_checkpoints   put_checkpoint, get_checkpoint (in chunks), try_lease
    redis_catalog       create_model(_from_checkpoint), delete_model, list_models, ...
    redis_followers     create_follower, append_serving; delete_model, trim_log that hold
                        the rules between leaders and followers
    redis_artifacts     add/put/delete/list/get_artifact, get/set_active_version
    redis_feedback      delayed labels (functions; the methods below delegate)
    redis_wakes         the wake streams

Example::

    store = RedisStore("redis://127.0.0.1:6379/0")
    await store.open()
    await store.create_model("m", {"kind": "arow"})
    pos = await store.append("m", b"payload")
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from service.store import redis_feedback
from service.store.base import Feedback, KeyGuard
from service.store.redis_artifacts import RedisArtifacts
from service.store.redis_followers import RedisFollowers
from service.store.redis_idempotency import RedisIdempotency
from service.store.redis_keys import EPOCH_KEY, MODELS_KEY, _keys
from service.store.redis_log import _Pending
from service.store.redis_wakes import WakeStreams

__all__ = ["EPOCH_KEY", "MODELS_KEY", "RedisStore", "_keys"]


class RedisStore(RedisFollowers, RedisIdempotency, RedisArtifacts):
    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float = 2.0,
        connect_timeout: float = 2.0,
        max_connections: int = 32,
        health_check_interval: int = 15,
        waitaof: bool = False,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> None:
        if socket_timeout <= 0 or connect_timeout <= 0 or max_connections < 1:
            raise ValueError("timeouts must be > 0 seconds and max_connections >= 1")
        if wait_replicas < 0 or wait_timeout <= 0:
            raise ValueError("wait_replicas must be >= 0 and wait_timeout > 0 seconds")
        self.url = url
        self.socket_timeout = socket_timeout
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.health_check_interval = health_check_interval
        self.waitaof_requested = waitaof
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self.waitaof = False  # decided in open() from the server version
        self.server_version: tuple[int, ...] | None = None
        self._r: aioredis.Redis | None = None
        self._blocking: aioredis.Redis | None = None
        self._pending: list[_Pending] = []  # appends waiting for the next pipeline
        self._flusher: asyncio.Task[None] | None = None
        self.wakes = WakeStreams(one_reader_per_stream=False)
        self.wake_in_script = True  # appends add their wakes themselves (see APPEND)
        self.wakes_complete = True  # ... so only a reader error loses any (it says so)

    # ------------------------------------------------------------------ delayed labels
    async def put_feedback(
        self,
        name: str,
        records: list[tuple[str, bytes]],
        ttl_seconds: float,
        replace: bool = True,
    ) -> int | None:
        return await redis_feedback.put_feedback(self, name, records, ttl_seconds, replace)

    async def get_feedback(self, name: str, ids: list[str]) -> list[Feedback | None]:
        return await redis_feedback.get_feedback(self, name, ids)

    async def fence(self, name: str) -> None:
        await redis_feedback.fence(self, name)

    async def due_feedback(self, name: str, within_seconds: float, limit: int) -> list[str]:
        return await redis_feedback.due_feedback(self, name, within_seconds, limit)

    async def append_labelled(
        self,
        name: str,
        payload: bytes,
        labels: list[tuple[str, str, str]],
        once: KeyGuard | None = None,
        keep_seconds: float = 0.0,
    ) -> tuple[int, str]:
        return await redis_feedback.append_labelled(self, name, payload, labels, once, keep_seconds)
