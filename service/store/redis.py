"""RedisStore: the production store, on redis-py's asyncio client.

Key layout (``{name}`` is a Redis Cluster hash tag: one model's keys share a slot, so
every per-model Lua script touches one slot only)::

    ls:{NAME}:config    string  canonical JSON config; its existence IS the model
    ls:{NAME}:gen       string  random id given at creation (new after delete + create)
    ls:{NAME}:seq       string  last log position ever handed out (survives trimming)
    ls:{NAME}:head      string  the log's chain head at seq (``base.chain_head``)
    ls:{NAME}:lease:checkpoint  string  holder of the checkpoint-writer lease (PX expiry)
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

Example::

    store = RedisStore("redis://127.0.0.1:6379/0")
    await store.open()
    await store.create_model("m", {"kind": "arow"})
    pos = await store.append("m", b"payload")
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.store import redis_feedback
from service.store import redis_scripts as scripts
from service.store.base import (
    ActiveVersionChanged,
    ArtifactActive,
    ArtifactVersion,
    Checkpoint,
    ConfigConflict,
    Feedback,
    IdempotencyKeyReused,
    LogDiverged,
    LogEntry,
    ModelNotFound,
    Store,
    StoreUnavailable,
    ValueTooLarge,
    canonical_config,
    payload_digest,
    validate_name,
)
from service.store.redis_wakes import WakeStreams, wake_key

log = logging.getLogger(__name__)
T = TypeVar("T")

MODELS_KEY = "ls:{catalog}:models"
EPOCH_KEY = "ls:{catalog}:epoch"

_CKPT_CHUNK = 1 << 20  # bytes per checkpoint chunk: one HSET each, so no single command
# holds Redis for more than ~1 ms (a 16 MB value in one command held it for tens of ms)

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
# (name, payload, payload_digest(payload), the caller's future)
_Pending = tuple[str, bytes, str, "asyncio.Future[tuple[int, str]]"]
_MAX_GROUP = 500  # appends per pipeline
_MAX_GROUP_BYTES = 8 << 20  # ... and payload bytes per pipeline

_UNAVAILABLE_PREFIXES = ("MISCONF", "MASTERDOWN", "LOADING", "NOREPLICAS")
_MAX_VALUE = 512 << 20  # Redis's default proto-max-bulk-len: larger strings are refused


def _check_size(what: str, blob: bytes | memoryview) -> None:
    # Refused here: Redis would drop the connection mid-write (seen as "unreachable").
    size = memoryview(blob).nbytes
    if size > _MAX_VALUE:
        raise ValueTooLarge(f"{what} of {size} bytes exceeds Redis's {_MAX_VALUE} byte limit")


def _keys(name: str) -> dict[str, str]:
    p = f"ls:{{{name}}}:"
    return {
        k: p + k
        for k in (
            "config",
            "seq",
            "log",
            "ckpt",
            "ckptdata",
            "art",
            "artmeta",
            "gen",
            "idem",
            "idemexp",
            "head",
            "lease:checkpoint",
            "idempos",
            "idemout",
            "fb",
            "fbexp",
            "fblab",
        )
    }


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _append_command(name: str, payload: bytes, digest: str, wake: bool = False) -> tuple[Any, ...]:
    """The APPEND script call (``digest``: ``payload_digest(payload)``); ``wake``: add
    the model's wake in the same script (a single Redis; on a cluster the wake stream
    is in another slot)."""
    k = _keys(name)
    keys = [k["config"], k["seq"], k["log"], k["head"]]
    args: list[Any] = [payload, digest]
    if wake:
        keys.append(wake_key(name))
        args.append(name)
    return ("EVAL", scripts.APPEND, len(keys), *keys, *args)


def _pos(entry_id: bytes | str) -> int:
    s = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(s.split("-", 1)[0])


class RedisStore(Store):
    name = "redis"
    # Said with a MOVED/ASK reply: this client was pointed at one node of a cluster.
    _moved_hint = " (a Redis Cluster node: set LEARNSERVE_REDIS_CLUSTER=true)"

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

    @property
    def r(self) -> aioredis.Redis:
        if self._r is None:
            raise RuntimeError("RedisStore is not open (call await store.open())")
        return self._r

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            return await fn()
        except _UNAVAILABLE as e:
            raise self._unavailable(e) from e
        except rex.ResponseError as e:
            if str(e).startswith(_UNAVAILABLE_PREFIXES):
                raise StoreUnavailable(f"redis {self._where()}: {e}") from e
            if "exceeds maximum allowed size" in str(e):  # proto-max-bulk-len set lower
                raise ValueTooLarge(f"redis {self._where()}: {e}") from e
            raise

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
        await self.wakes.stop()
        if self._flusher is not None and not self._flusher.done():
            # Let queued appends finish (they were accepted before close()).
            with contextlib.suppress(Exception):
                await self._flusher
        self._flusher = None
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

    # ------------------------------------------------------------------ configs
    async def create_model(self, name: str, config: dict[str, Any]) -> bool:
        text = canonical_config(config)
        k = _keys(validate_name(name))
        res = await self._script(
            scripts.CREATE, [k["config"], k["gen"]], [text, secrets.token_hex(8)]
        )
        if res == 1 or res == 0:
            await self._index(name, created=res == 1)
            return res == 1
        cur = res.decode() if isinstance(res, bytes) else res
        raise ConfigConflict(f"model {name!r} exists with a different config: {cur}")

    async def _index(self, name: str, created: bool) -> None:
        # Index after the config: a crash in between leaves a model missing from the
        # index, which the next create_model (equal config) repairs.
        async def index() -> None:
            async with self.r.pipeline(transaction=False) as p:
                p.sadd(MODELS_KEY, name)
                if created:
                    p.incr(EPOCH_KEY)
                await p.execute()

        await self._call(index)

    async def create_model_from_checkpoint(
        self, name: str, config: dict[str, Any], blob: bytes | memoryview
    ) -> bool:
        text = canonical_config(config)
        data = memoryview(blob).cast("B")
        _check_size("checkpoint", data)
        k = _keys(validate_name(name))
        token = f"0.{secrets.token_hex(6)}"  # position 0: a later switch sweeps it if left
        chunks = [data[o : o + _CKPT_CHUNK] for o in range(0, data.nbytes, _CKPT_CHUNK)]
        res: Any = None
        try:
            for i, chunk in enumerate(chunks):
                await self._call(
                    functools.partial(self.r.hset, k["ckptdata"], f"{token}:{i}", chunk)
                )
            keys = [k["config"], k["gen"], k["ckpt"], k["ckptdata"]]
            args = [text, secrets.token_hex(8), token, len(chunks), repr(time.time())]
            res = await self._script(scripts.CREATE_FROM_CKPT, keys, args)
        finally:
            if res != 1:
                await self._drop_chunks(k["ckptdata"], token, len(chunks))
        if res == -3:
            raise StoreUnavailable(f"redis {self._where()}: the import of {name!r} lost a chunk")
        if res in (0, 1):
            await self._index(name, created=res == 1)
            return res == 1
        cur = res.decode() if isinstance(res, bytes) else res
        raise ConfigConflict(f"model {name!r} exists with a different config: {cur}")

    async def get_config(self, name: str) -> dict[str, Any] | None:
        text = await self._call(lambda: self.r.get(_keys(name)["config"]))
        return None if text is None else json.loads(text)

    async def list_models(self) -> dict[str, dict[str, Any]]:
        members: Any = await self._call(lambda: self.r.smembers(MODELS_KEY))
        names = sorted(n.decode() for n in members)
        if not names:
            return {}

        async def configs() -> list[Any]:
            async with self.r.pipeline(transaction=False) as p:
                for n in names:
                    p.get(_keys(n)["config"])
                return await p.execute()

        texts = await self._call(configs)
        # A name without a config is a delete that crashed before un-indexing: skip it.
        return {n: json.loads(t) for n, t in zip(names, texts, strict=True) if t is not None}

    async def get_generation(self, name: str) -> str | None:
        k = _keys(name)

        async def q() -> list[Any]:
            async with self.r.pipeline(transaction=False) as p:
                p.exists(k["config"])
                p.get(k["gen"])
                return await p.execute()

        exists, gen = await self._call(q)
        if not exists:
            return None
        return "" if gen is None else gen.decode()

    async def list_generations(self) -> dict[str, str]:
        members: Any = await self._call(lambda: self.r.smembers(MODELS_KEY))
        names = sorted(n.decode() for n in members)
        if not names:
            return {}

        async def q() -> list[Any]:
            async with self.r.pipeline(transaction=False) as p:
                for n in names:
                    p.exists(_keys(n)["config"])
                    p.get(_keys(n)["gen"])
                return await p.execute()

        res = await self._call(q)
        out = {}
        for i, n in enumerate(names):
            if res[2 * i]:
                gen = res[2 * i + 1]
                out[n] = "" if gen is None else gen.decode()
        return out

    async def delete_model(self, name: str) -> bool:
        k = _keys(name)
        existed = await self._script(scripts.DELETE, list(k.values()), []) == 1

        async def unindex() -> None:
            async with self.r.pipeline(transaction=False) as p:
                p.srem(MODELS_KEY, name)
                if existed:
                    p.incr(EPOCH_KEY)
                await p.execute()

        await self._call(unindex)
        return existed

    async def catalog_epoch(self) -> int:
        return int(await self._call(lambda: self.r.get(EPOCH_KEY)) or 0)

    # ------------------------------------------------------------------ update log
    async def append_entry(
        self, name: str, payload: bytes, digest: str | None = None
    ) -> tuple[int, str]:
        """Queued and sent with whatever other appends are waiting, as one pipeline of
        scripts (group commit): one round trip and one connection for many appends, in
        the order they were called. A single append is sent at once."""
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        self.r  # noqa: B018 -- raises if the store is not open
        if self.waitaof_requested and self.server_version is None:
            await self._learn_version()  # Redis was down at open()
        fut: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        payload = bytes(payload)
        self._pending.append((name, payload, digest or payload_digest(payload), fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_appends())
        return await fut

    async def _flush_appends(self) -> None:
        while self._pending:
            batch: list[_Pending] = []
            size = 0
            while self._pending and len(batch) < _MAX_GROUP and size < _MAX_GROUP_BYTES:
                batch.append(self._pending.pop(0))
                size += len(batch[-1][1])
            try:
                results = await self._call(functools.partial(self._send_appends, batch))
            except BaseException as e:
                for _, _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                if isinstance(e, asyncio.CancelledError):  # close() while appends queued
                    for _, _, _, fut in self._pending:
                        fut.cancel()
                    self._pending.clear()
                    raise
                continue
            stored = {
                name: int(res[0])
                for (name, _, _, _), res in zip(batch, results, strict=False)
                if isinstance(res, list)
            }
            if not self.wake_in_script:
                self.wakes.publish(self.r, stored)
            for (name, _, _, fut), res in zip(batch, results, strict=False):
                if fut.done():  # the caller was cancelled; the entry is stored anyway
                    continue
                if isinstance(res, _UNAVAILABLE):
                    fut.set_exception(self._unavailable(res))
                elif isinstance(res, Exception):
                    fut.set_exception(res)
                elif res == -1:
                    fut.set_exception(ModelNotFound(name))
                else:
                    fut.set_result((int(res[0]), _text(res[1])))

    async def _send_appends(self, batch: list[_Pending]) -> list[Any]:
        acks = self._ack_commands()
        async with self.r.pipeline(transaction=False) as p:
            for name, payload, digest, _ in batch:
                p.execute_command(*_append_command(name, payload, digest, wake=True))
            # WAIT/WAITAOF cover the earlier writes of *this connection*, i.e. the
            # whole pipeline: one wait for the group.
            for cmd in acks:
                p.execute_command(*cmd)
            results = await p.execute(raise_on_error=False)
        if acks:
            self._check_acks(results[-len(acks) :])
            del results[-len(acks) :]
        return list(results)

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

    async def append_once(
        self, name: str, payload: bytes, key: str, payload_hash: str, n: int, ttl_seconds: float
    ) -> tuple[int, int, bool]:
        """One script (check the key, append, record the key), on its own round trip:
        keyed appends are not group-committed, so ``append`` stays as it was."""
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be > 0")
        if " " in payload_hash or not payload_hash:
            raise ValueError("payload_hash must be a non-empty string without spaces")
        self.r  # noqa: B018 -- raises if the store is not open
        if self.waitaof_requested and self.server_version is None:
            await self._learn_version()
        k = _keys(name)
        keys = [k["config"], k["seq"], k["log"], k["idem"], k["idemexp"], k["gen"]]
        keys += [k["idempos"], k["idemout"], k["head"]]
        args: list[Any] = [
            bytes(payload),
            key,
            payload_hash,
            int(n),
            max(1, int(ttl_seconds * 1000)),
            payload_digest(payload),
        ]
        if self.wake_in_script:
            keys.append(wake_key(name))
            args.append(name)

        res = await self._eval_acked(scripts.APPEND_ONCE, keys, args)
        if int(res[0]) == -1:
            raise ModelNotFound(name)
        if int(res[0]) == 1:
            if not self.wake_in_script:
                self.wakes.publish(self.r, {name: int(res[1])})
            return int(res[1]), int(n), False
        rec = res[1].decode() if isinstance(res[1], bytes) else str(res[1])
        pos, rn, rhash = rec.split(" ", 3)[:3]
        if rhash != payload_hash:
            raise IdempotencyKeyReused(
                f"idempotency key {key!r} was used for model {name!r} with another payload"
            )
        return int(pos), int(rn), True

    async def record_outcome(
        self, name: str, position: int, outcome: str, generation: str | None = None
    ) -> bool:
        k = _keys(name)
        keys = [k["config"], k["gen"], k["idem"], k["idemexp"], k["idempos"], k["idemout"]]
        args: list[Any] = [int(position), outcome]
        if generation is not None:
            args.append(generation)
        return bool(await self._script(scripts.RECORD_OUTCOME, keys, args) == 1)

    async def key_recorded(self, name: str, key: str) -> bool:
        k = _keys(name)
        keys = [k["idem"], k["idemexp"], k["gen"]]
        return await self._script(scripts.KEY_RECORDED, keys, [key]) == 1

    async def get_outcome(self, name: str, key: str) -> str | None:
        k = _keys(name)
        keys = [k["idem"], k["idemexp"], k["gen"], k["idemout"]]
        out = await self._script(scripts.GET_OUTCOME, keys, [key])
        return None if out is None else out.decode() if isinstance(out, bytes) else str(out)

    # ------------------------------------------------------------------ delayed labels
    async def put_feedback(
        self, name: str, records: list[tuple[str, bytes]], ttl_seconds: float
    ) -> int | None:
        return await redis_feedback.put_feedback(self, name, records, ttl_seconds)

    async def get_feedback(self, name: str, ids: list[str]) -> list[Feedback | None]:
        return await redis_feedback.get_feedback(self, name, ids)

    async def append_labelled(
        self, name: str, payload: bytes, labels: list[tuple[str, str, str]]
    ) -> tuple[int, str]:
        return await redis_feedback.append_labelled(self, name, payload, labels)

    async def read_log(self, name: str, after: int, limit: int = 1000) -> list[LogEntry]:
        if limit <= 0:
            return []
        rows: Any = await self._call(
            lambda: self.r.xrange(_keys(name)["log"], min=f"{after + 1}-0", max="+", count=limit)
        )
        return [
            LogEntry(_pos(eid), bytes(fields[b"p"]), _text(fields.get(b"h", b"")))
            for eid, fields in rows
        ]

    async def last_position(self, name: str) -> int:
        return int(await self._call(lambda: self.r.get(_keys(name)["seq"])) or 0)

    async def trim_log(self, name: str, upto: int) -> None:
        if upto < 1:
            return
        # MINID keeps ids >= the bound; exact (not ~) so the contract holds precisely.
        await self._call(
            lambda: self.r.xtrim(_keys(name)["log"], minid=f"{upto + 1}-0", approximate=False)
        )

    async def wait_for_changes(
        self, after: dict[str, int], timeout: float
    ) -> dict[str, int] | None:
        """The models other workers (and this one) appended to, from the wake streams
        (``service.store.redis_wakes``); None when some wakes may have been missed."""
        if self._blocking is None:
            raise RuntimeError("RedisStore is not open (call await store.open())")
        q = self.wakes.start(lambda: self._blocking)
        return await self.wakes.next_changes(q, timeout)

    async def last_positions(self, names: list[str]) -> dict[str, int]:
        """One pipeline of GETs per 1,000 models."""
        out: dict[str, int] = {}
        for i in range(0, len(names), 1000):
            chunk = names[i : i + 1000]

            async def q(chunk: list[str] = chunk) -> list[Any]:
                async with self.r.pipeline(transaction=False) as p:
                    for n in chunk:
                        p.get(_keys(n)["seq"])
                    return await p.execute()

            out.update((n, int(v or 0)) for n, v in zip(chunk, await self._call(q), strict=True))
        return out

    async def wait_for_entries(self, after: dict[str, int], timeout: float) -> None:
        """XREAD BLOCK on every model's stream at once, on its own connection pool."""
        if not after:
            await asyncio.sleep(max(timeout, 0.0))
            return
        if self._blocking is None:
            raise RuntimeError("RedisStore is not open (call await store.open())")
        blocking = self._blocking
        streams: Any = {_keys(n)["log"]: f"{int(p)}-0" for n, p in after.items()}
        block_ms = max(1, int(timeout * 1000))  # 0 would mean "forever"

        async def xread() -> Any:
            return await asyncio.wait_for(
                blocking.xread(streams, count=1, block=block_ms),
                timeout + self.socket_timeout + self.connect_timeout,
            )

        await self._call(xread)

    # ------------------------------------------------------------------ leases
    async def try_lease(self, name: str, purpose: str, holder: str, ttl_seconds: float) -> bool:
        k = _keys(name)
        lease = k.get(f"lease:{purpose}")
        if lease is None:
            raise ValueError(f"unknown lease purpose {purpose!r}")
        ttl = max(1, int(ttl_seconds * 1000))
        return await self._script(scripts.LEASE, [k["config"], lease], [holder, ttl]) == 1

    # ------------------------------------------------------------------ checkpoints
    async def put_checkpoint(
        self,
        name: str,
        position: int,
        blob: bytes | memoryview,
        generation: str | None = None,
        head: str | None = None,
    ) -> None:
        # A flat byte view, never a bytes() copy: this runs on the event loop, and a
        # 16 MB copy there is a 16 MB stall. redis-py writes a memoryview argument to
        # the socket as it is (its own chunk of the command, not joined).
        data = memoryview(blob).cast("B")
        _check_size("checkpoint", data)
        k = _keys(name)
        # Chunks first, one command each (other clients' commands run in between), under
        # a token of this write; then one script switches the checkpoint to them.
        token = f"{int(position)}.{secrets.token_hex(6)}"
        chunks = [data[o : o + _CKPT_CHUNK] for o in range(0, data.nbytes, _CKPT_CHUNK)]
        try:
            for i, chunk in enumerate(chunks):
                await self._call(
                    functools.partial(self.r.hset, k["ckptdata"], f"{token}:{i}", chunk)
                )
            args: list[Any] = [
                int(position),
                token,
                len(chunks),
                repr(time.time()),
                generation or "",
                head or "",
            ]
            keys = [k["config"], k["ckpt"], k["gen"], k["ckptdata"], k["seq"], k["log"], k["head"]]
            switched = await self._script(scripts.CKPT, keys, args)
        except BaseException:
            await self._drop_chunks(k["ckptdata"], token, len(chunks))
            raise
        if switched != 1:  # older, deleted, re-created: nothing refers to the chunks
            await self._drop_chunks(k["ckptdata"], token, len(chunks))
        if switched == -4:
            raise LogDiverged(
                f"model {name!r}: the log does not hold head {head} at position {position}"
            )

    async def _drop_chunks(self, key: str, token: str, n: int) -> None:
        if n:
            with contextlib.suppress(Exception):  # best effort: the next switch sweeps them
                await self.r.hdel(key, *(f"{token}:{i}" for i in range(n)))

    async def get_checkpoint(self, name: str) -> Checkpoint | None:
        k = _keys(name)
        # A read fails only if a switch lands between its two commands; checkpoints of
        # one model are seconds apart, so a handful of tries is plenty.
        for _ in range(50):
            h: Any = await self._call(lambda: self.r.hgetall(k["ckpt"]))
            if not h:
                return None
            if b"blob" in h:  # written whole, by an earlier learnserve
                return Checkpoint(int(h[b"position"]), bytes(h[b"blob"]), float(h[b"created_at"]))
            token, n = h[b"token"].decode(), int(h[b"chunks"])
            fields = [f"{token}:{i}" for i in range(n)]
            parts: Any = []
            if n:
                parts = await self._call(functools.partial(self.r.hmget, k["ckptdata"], fields))
            if all(p is not None for p in parts):
                blob = b"".join(parts)
                return Checkpoint(int(h[b"position"]), blob, float(h[b"created_at"]))
            # a newer checkpoint was switched in between the two reads: read again
        raise StoreUnavailable(f"redis {self._where()}: checkpoint of {name!r} kept changing")

    # ------------------------------------------------------------------ artifacts
    async def add_artifact(self, name: str, blob: bytes, kind: str, checksum: str) -> int:
        _check_size("artifact", blob)
        k = _keys(name)
        meta = json.dumps(
            {"size": len(blob), "checksum": checksum, "created_at": time.time(), "kind": kind}
        )
        v = await self._script(
            scripts.ADD_ART, [k["config"], k["art"], k["artmeta"]], [bytes(blob), meta]
        )
        if v == -1:
            raise ModelNotFound(name)
        await self._bump_epoch()
        return int(v)

    async def put_artifact(
        self, name: str, blob: bytes, kind: str, checksum: str
    ) -> tuple[int, bool]:
        _check_size("artifact", blob)
        k = _keys(name)
        meta = json.dumps(
            {"size": len(blob), "checksum": checksum, "created_at": time.time(), "kind": kind}
        )
        res = await self._script(
            scripts.PUT_ART,
            [k["config"], k["art"], k["artmeta"]],
            [bytes(blob), meta, checksum],
        )
        if res == -1:
            raise ModelNotFound(name)
        version, how = int(res[0]), int(res[1])
        if how:  # 1 stored, 2 an existing version made active: other workers switch
            await self._bump_epoch()
        return version, how == 1

    async def delete_artifact(self, name: str, version: int) -> bool:
        k = _keys(name)
        res = await self._script(
            scripts.DEL_ART, [k["config"], k["art"], k["artmeta"]], [str(int(version))]
        )
        if res == -1:
            raise ModelNotFound(name)
        if res == -3:
            raise ArtifactActive(name, version)
        return bool(res)

    async def list_artifacts(self, name: str) -> list[ArtifactVersion]:
        h: Any = await self._call(lambda: self.r.hgetall(_keys(name)["artmeta"]))
        out = []
        for f, raw in h.items():
            if f.isdigit():
                m = json.loads(raw)
                out.append(
                    ArtifactVersion(int(f), m["size"], m["checksum"], m["created_at"], m["kind"])
                )
        return sorted(out, key=lambda a: a.version)

    async def get_artifact(self, name: str, version: int) -> bytes | None:
        b: Any = await self._call(lambda: self.r.hget(_keys(name)["art"], str(int(version))))
        return None if b is None else bytes(b)

    async def get_active_version(self, name: str) -> int | None:
        v = await self._call(lambda: self.r.hget(_keys(name)["artmeta"], "active"))
        return None if v is None else int(v)

    async def set_active_version(
        self, name: str, version: int, *, expected: int | None = None
    ) -> None:
        k = _keys(name)
        want = "" if expected is None else str(int(expected))
        res = await self._script(
            scripts.SET_ACTIVE, [k["config"], k["artmeta"]], [int(version), want]
        )
        if isinstance(res, list):  # [-3, active]: the compare-and-set lost
            assert expected is not None
            raise ActiveVersionChanged(name, expected, None if res[1] is None else int(res[1]))
        if res == -1:
            raise ModelNotFound(name)
        if res == -2:
            raise ValueError(f"model {name!r} has no artifact version {version}")
        await self._bump_epoch()
