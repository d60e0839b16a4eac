"""The Redis store's update log: appends (group-committed), reads, trims, waits.

Each model's log is a stream (``ls:{NAME}:log``, entry id ``<position>-0``) appended to
by the APPEND script, which also advances ``seq`` and the chain ``head``. Concurrent
appends are group-committed: whatever is queued while one pipeline is in flight goes
out as the next pipeline of scripts (in call order). Other workers learn of appends
from the wake streams (:mod:`service.store.redis_wakes`).

On a single Redis with a plain ``redis://`` or ``unix://`` URL the pipelines go over a
:class:`~service.store.redis_wire.Wire` of their own (one connection, the scripts by
SHA: ``EVALSHA``, and those Redis does not know, after a restart or ``SCRIPT FLUSH``,
sent again with their text: a ``NOSCRIPT`` reply means the script did not run);
otherwise through redis-py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from redis import exceptions as rex

from service.store import redis_scripts as scripts
from service.store.base import LogEntry, ModelNotFound, check_payload, payload_digest
from service.store.redis_connection import _UNAVAILABLE, RedisConnection
from service.store.redis_keys import _keys, _pos, _text
from service.store.redis_wakes import WakeStreams, wake_key
from service.store.redis_wire import Wire, pack, supported

# (name, payload, payload_digest(payload), the caller's future)
_Pending = tuple[str, bytes, str, "asyncio.Future[tuple[int, str]]"]
_MAX_GROUP = 500  # appends per pipeline
_MAX_GROUP_BYTES = 8 << 20  # ... and payload bytes per pipeline
_APPEND_SHA = scripts.sha(scripts.APPEND)


def _append_args(name: str, payload: bytes, digest: str, wake: str | None) -> tuple[Any, ...]:
    """numkeys, KEYS and ARGV of the APPEND script; ``wake``: the writer's token, to add
    the model's wake in the same script (a single Redis; on a cluster the wake stream is
    in another slot)."""
    p = f"ls:{{{name}}}:"
    if wake is not None:
        return (5, p + "config", p + "seq", p + "log", p + "head", wake_key(name),
                payload, digest, name, wake)  # fmt: skip
    return (4, p + "config", p + "seq", p + "log", p + "head", payload, digest)


def _append_command(
    name: str, payload: bytes, digest: str, wake: str | None = None
) -> tuple[Any, ...]:
    """The APPEND script call, with the script's text."""
    return ("EVAL", scripts.APPEND, *_append_args(name, payload, digest, wake))


def _entry(eid: bytes, fields: list[bytes]) -> LogEntry:
    """An XRANGE row (RESP2: the id and the flat field list) as a LogEntry."""
    if len(fields) == 6 and fields[0] == b"p" and fields[2] == b"h" and fields[4] == b"d":
        # As the APPEND scripts write them (a replica reads every entry: no dict)
        return LogEntry(_pos(eid), fields[1], fields[3].decode(),
                        fields[5].decode())  # fmt: skip
    f = dict(zip(fields[::2], fields[1::2], strict=True))
    d = f.get(b"d")
    return LogEntry(_pos(eid), f[b"p"], _text(f.get(b"h", b"")), None if d is None else _text(d))


class RedisLog(RedisConnection):
    _pending: list[_Pending]  # appends waiting for the next pipeline
    _flusher: asyncio.Task[None] | None  # sends the queued appends
    wakes: WakeStreams
    wake_in_script: bool  # appends add their wakes themselves (see APPEND)
    _use_wire = True  # a single Redis (not a cluster): the hot path on Wire connections
    _wire: Wire | None = None  # the appends' connection, made at the first append
    _read_wire: Wire | None = None  # reads of the log and positions (not behind a WAIT)
    _wake_wire: Wire | None = None  # the wake readers' XREAD BLOCK

    async def append_entry(
        self, name: str, payload: bytes, digest: str | None = None
    ) -> tuple[int, str]:
        """Queued and sent with whatever other appends are waiting, as one pipeline of
        scripts (group commit): one round trip and one connection for many appends, in
        the order they were called. A single append is sent at once."""
        check_payload(payload)
        if self._r is None or (self.waitaof_requested and self.server_version is None):
            await self._ready_to_append()
        fut: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        if type(payload) is not bytes:
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
                    if isinstance(res, list):  # so nobody here applies it: wake ourselves
                        self.wakes.wake_self(name, int(res[0]))
                    continue
                if isinstance(res, _UNAVAILABLE):
                    fut.set_exception(self._unavailable(res))
                elif isinstance(res, Exception):
                    fut.set_exception(res)
                elif res == -1:
                    fut.set_exception(ModelNotFound(name))
                else:
                    fut.set_result((int(res[0]), _text(res[1])))

    def _append_wire(self) -> Wire | None:
        if self._wire is None and self._use_wire and supported(self.url):
            self._wire = Wire(self.url, self.connect_timeout)
        return self._wire

    def _reads(self) -> Wire | None:
        if self._read_wire is None and self._use_wire and supported(self.url):
            self.r  # noqa: B018 -- raises if the store is not open
            self._read_wire = Wire(self.url, self.connect_timeout)
        return self._read_wire

    async def _read(self, *command: Any) -> Any:
        """One command on the reads' connection (an error reply raised)."""
        assert self._read_wire is not None
        (reply,) = await self._read_wire.call([pack(command)], self.socket_timeout)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def _send_appends(self, batch: list[_Pending]) -> list[Any]:
        wire = self._append_wire()
        if wire is not None:
            return await self._send_appends_wire(wire, batch)
        acks = self._ack_commands()
        async with self.r.pipeline(transaction=False) as p:
            for name, payload, digest, _ in batch:
                p.execute_command(*_append_command(name, payload, digest, self.wakes.token))
            # WAIT/WAITAOF cover the earlier writes of *this connection*, i.e. the
            # whole pipeline: one wait for the group.
            for cmd in acks:
                p.execute_command(*cmd)
            results = await p.execute(raise_on_error=False)
        if acks:
            self._check_acks(results[-len(acks) :])
            del results[-len(acks) :]
        return list(results)

    async def _send_appends_wire(self, wire: Wire, batch: list[_Pending]) -> list[Any]:
        """The group as one write on the appends' connection: the scripts by SHA, then
        the acks (which cover the connection's earlier writes: the whole group)."""
        acks = [pack(cmd) for cmd in self._ack_commands()]
        timeout = self.socket_timeout + (self.wait_timeout if acks else 0.0)
        token = self.wakes.token
        cmds = [pack(("EVALSHA", _APPEND_SHA, *_append_args(n, p, d, token)))
                for n, p, d, _ in batch]  # fmt: skip
        results = await wire.call(cmds + acks, timeout)
        if acks:
            self._check_acks(results[len(cmds) :])
            del results[len(cmds) :]
        redo = [i for i, r in enumerate(results) if isinstance(r, rex.NoScriptError)]
        if redo:  # Redis does not know the script (restarted, flushed): it did not run
            cmds = [pack(_append_command(*batch[i][:3], token)) for i in redo]
            again = await wire.call(cmds + acks, timeout)
            if acks:
                self._check_acks(again[len(cmds) :])
            for i, r in zip(redo, again, strict=False):
                results[i] = r
        return results

    async def close(self) -> None:
        await self.wakes.stop()
        if self._flusher is not None and not self._flusher.done():
            # Let queued appends finish (they were accepted before close()).
            with contextlib.suppress(Exception):
                await self._flusher
        self._flusher = None
        for wire in (self._wire, self._read_wire, self._wake_wire):
            if wire is not None:
                wire.close()
        self._wire = self._read_wire = self._wake_wire = None
        await super().close()

    async def read_log(self, name: str, after: int, limit: int = 1000) -> list[LogEntry]:
        if limit <= 0:
            return []
        key = f"ls:{{{name}}}:log"
        if self._reads() is not None:
            flat: Any = await self._call(
                lambda: self._read("XRANGE", key, f"{after + 1}-0", "+", "COUNT", limit)
            )
            return [_entry(eid, fields) for eid, fields in flat]
        rows: Any = await self._call(
            lambda: self.r.xrange(key, min=f"{after + 1}-0", max="+", count=limit)
        )
        return [
            LogEntry(
                _pos(eid),
                bytes(fields[b"p"]),
                _text(fields.get(b"h", b"")),
                _text(fields[b"d"]) if b"d" in fields else None,
            )
            for eid, fields in rows
        ]

    async def last_position(self, name: str) -> int:
        key = f"ls:{{{name}}}:seq"
        if self._reads() is not None:
            return int(await self._call(lambda: self._read("GET", key)) or 0)
        return int(await self._call(lambda: self.r.get(key)) or 0)

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
        if self._wake_wire is None and self._use_wire and supported(self.url):
            self._wake_wire = Wire(self.url, self.connect_timeout)
        q = self.wakes.start(lambda: self._blocking, self._wake_wire)
        return await self.wakes.next_changes(q, timeout)

    async def last_positions(self, names: list[str]) -> dict[str, int]:
        """One pipeline of GETs per 1,000 models."""
        out: dict[str, int] = {}
        wire = self._reads()
        for i in range(0, len(names), 1000):
            chunk = names[i : i + 1000]
            if wire is not None:
                cmds = [pack(("GET", f"ls:{{{n}}}:seq")) for n in chunk]
                got = await self._call(functools.partial(wire.call, cmds, self.socket_timeout))
                for v in got:
                    if isinstance(v, Exception):
                        raise self._unavailable(v) if isinstance(v, _UNAVAILABLE) else v
                out.update((n, int(v or 0)) for n, v in zip(chunk, got, strict=True))
                continue

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
