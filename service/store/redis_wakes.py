"""Wake streams: how one worker tells the others which models it appended to.

Without them every worker would have to look at every model's log on every pass of
its apply-loop (one XRANGE or GET per model: with 5,000 idle models a pass took 1.5 s
and Redis served N x M commands per pass). With them a pass costs O(models changed).

After its appends are acknowledged, a worker adds one entry ``m=<name> p=<position>``
per model to that model's wake stream: ``ls:{wake<k>}:w`` with ``k = crc32(name) %
WAKE_STREAMS``, each stream its own Redis Cluster slot, capped (``MAXLEN ~``). Every
worker reads the streams with XREAD BLOCK from the last id it saw (one reader over all
streams on a single Redis; one reader per stream on a cluster, where a multi-key XREAD
would cross slots) and hands the names to its apply-loop.

A wake names its writer (``w``, a token per process and store): a worker's readers skip
its own wakes, so its own appends (applied by the requests that made them) never wake
its apply-loop. An entry stored for a request that then did not apply it (the caller was
cancelled while it was stored) is handed to the apply-loop here (``wake_self``).

A wake is a hint, never the source of truth: it is sent after the append (it can be
lost if the appender dies in between), a reader that fell behind the cap or lost its
connection may miss some. So the reader reports "check everything" after any error,
and the apply-loop also reconciles every model's ``seq`` now and then (pipelined).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import zlib
from collections.abc import Callable
from typing import Any, Protocol

from service.store.redis_wire import Wire, pack

log = logging.getLogger(__name__)

WAKE_STREAMS = 8
_MAXLEN = 10_000  # entries kept per stream (approximately): a reader further behind re-checks all
_BLOCK_MS = 1000
_COUNT = 1000
_COALESCE = 0.005  # seconds between reads while wakes keep coming
_QUEUE_MAX = 100_000  # wakes held for the apply-loop; past that it reconciles instead


def wake_key(name: str) -> str:
    return f"ls:{{wake{zlib.crc32(name.encode()) % WAKE_STREAMS}}}:w"


ALL_WAKE_KEYS = [f"ls:{{wake{k}}}:w" for k in range(WAKE_STREAMS)]

# A reader's report: (name, position), or None for "some wakes may be lost: check all".
Wake = tuple[str, int] | None


class WakeStreams:
    """Publishes wakes and runs the readers for one store (one per process)."""

    def __init__(self, one_reader_per_stream: bool) -> None:
        self.groups = [[k] for k in ALL_WAKE_KEYS] if one_reader_per_stream else [ALL_WAKE_KEYS]
        self.queue: asyncio.Queue[Wake] | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._sends: set[asyncio.Task[None]] = set()
        self.token = os.urandom(8).hex()  # names this process's wakes (field w)
        self._own = self.token.encode()

    def wake_self(self, name: str, position: int) -> None:
        """Our own apply-loop is to apply ``name`` up to ``position`` (no round trip)."""
        if self.queue is not None and self.queue.qsize() < _QUEUE_MAX:
            self.queue.put_nowait((name, position))

    # ------------------------------------------------------------ publishing
    def publish(self, client: Any, positions: dict[str, int]) -> None:
        """Send the wakes in the background: the appends are acknowledged already and
        a lost wake is caught by the readers' reconciliation."""
        if not positions:
            return
        task = asyncio.get_running_loop().create_task(self._send(client, positions))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, client: Any, positions: dict[str, int]) -> None:
        try:
            async with client.pipeline(transaction=False) as p:
                for name, pos in positions.items():
                    fields = {"m": name, "p": pos, "w": self.token}
                    p.xadd(wake_key(name), fields, maxlen=_MAXLEN, approximate=True)
                await p.execute(raise_on_error=False)
        except Exception as e:  # a hint only: the others reconcile
            log.debug("wakes not sent: %s", e)

    # ------------------------------------------------------------ reading
    def start(self, blocking: Callable[[], Any], wire: Wire | None = None) -> asyncio.Queue[Wake]:
        """Start the readers (once); ``blocking()`` gives the client for XREAD BLOCK, or
        ``wire`` (a single Redis) a connection of the readers' own."""
        if self.queue is None:
            self.queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            for keys in self.groups:
                streams = _ClientStreams(blocking) if wire is None else _WireStreams(wire)
                self._readers.append(loop.create_task(self._read(streams, keys, self.queue)))
        return self.queue

    async def _read(self, streams: _Streams, keys: list[str], q: asyncio.Queue[Wake]) -> None:
        ids: dict[str, str] = {}
        backoff = 0.1
        while True:
            try:
                if not ids:  # start from now: what came before is covered by restore
                    ids = await streams.last_ids(keys)
                reply = await streams.read(ids)
                backoff = 0.1
                for key, entries in reply:
                    # One wake per model per reply, its last position (the apply-loop
                    # takes the highest anyway): a replica gets a wake per entry.
                    latest: dict[bytes, bytes] = {}
                    for eid, fields in entries:
                        ids[key] = eid
                        if fields.get(b"w") == self._own:
                            continue  # our own append: the request that made it applies it
                        latest[fields[b"m"]] = fields[b"p"]
                    for m, pos in latest.items():
                        if q.qsize() < _QUEUE_MAX:  # nobody reading: "check all" instead
                            q.put_nowait((m.decode(), int(pos)))
                    if len(entries) >= _COUNT or q.qsize() >= _QUEUE_MAX:
                        q.put_nowait(None)  # far behind: the cap may have dropped some
                if reply:
                    # Coalesce: under a stream of appends each XREAD would return one
                    # wake, and every wake costs each worker a read and a loop pass
                    # (~0.7 ms measured), whether or not it holds the model. A few ms
                    # here batch them; the apply-loop waits as long anyway.
                    await asyncio.sleep(_COALESCE)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("wake reader %s: %s", keys, e)
                q.put_nowait(None)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def next_changes(self, q: asyncio.Queue[Wake], timeout: float) -> dict[str, int] | None:
        """The models woken within ``timeout`` (all queued wakes, coalesced), or None
        when a reader may have missed some."""
        out: dict[str, int] = {}
        with contextlib.suppress(TimeoutError):
            first = await asyncio.wait_for(q.get(), max(timeout, 0.0))
            if first is None:
                out_none = True
            else:
                out_none = False
                out[first[0]] = first[1]
            while not q.empty():
                w = q.get_nowait()
                if w is None:
                    out_none = True
                else:
                    out[w[0]] = max(out.get(w[0], 0), w[1])
            return None if out_none else out
        return out

    async def stop(self) -> None:
        for t in [*self._readers, *self._sends]:
            t.cancel()
        for t in [*self._readers, *self._sends]:
            with contextlib.suppress(BaseException):
                await t
        self._readers.clear()
        self.queue = None


# What a reader gets: [(stream key, [(entry id, fields), ...]), ...]
_Read = list[tuple[str, list[tuple[str, dict[bytes, bytes]]]]]


class _Streams(Protocol):
    async def last_ids(self, keys: list[str]) -> dict[str, str]: ...

    async def read(self, ids: dict[str, str]) -> _Read: ...


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class _ClientStreams:
    """The wake streams through redis-py (a cluster: one reader per stream)."""

    def __init__(self, blocking: Callable[[], Any]) -> None:
        self.blocking = blocking

    async def last_ids(self, keys: list[str]) -> dict[str, str]:
        client = self.blocking()
        ids = {}
        for k in keys:
            info = await client.xinfo_stream(k) if await client.exists(k) else None
            ids[k] = _str(info["last-generated-id"]) if info else "0-0"
        return ids

    async def read(self, ids: dict[str, str]) -> _Read:
        reply = await asyncio.wait_for(
            self.blocking().xread(ids, count=_COUNT, block=_BLOCK_MS), _BLOCK_MS / 1000 + 10
        )
        return [(_str(s), [(_str(e), f) for e, f in entries]) for s, entries in reply or []]


class _WireStreams:
    """The wake streams on a connection of their own (a single Redis)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    async def last_ids(self, keys: list[str]) -> dict[str, str]:
        replies = await self.wire.call([pack(("XINFO", "STREAM", k)) for k in keys], 10.0)
        ids = {}
        for k, r in zip(keys, replies, strict=True):
            if isinstance(r, Exception):
                if "no such key" not in str(r):
                    raise r
                ids[k] = "0-0"
            else:
                ids[k] = _str(dict(zip(r[::2], r[1::2], strict=True))[b"last-generated-id"])
        return ids

    async def read(self, ids: dict[str, str]) -> _Read:
        cmd = ("XREAD", "COUNT", _COUNT, "BLOCK", _BLOCK_MS, "STREAMS", *ids, *ids.values())
        (reply,) = await self.wire.call([pack(cmd)], _BLOCK_MS / 1000 + 10)
        if isinstance(reply, Exception):
            raise reply
        return [
            (_str(s), [(_str(e), _fields(f)) for e, f in entries]) for s, entries in reply or []
        ]


def _fields(f: list[bytes]) -> dict[bytes, bytes]:
    """A wake's flat field list as a dict (those the APPEND scripts write, directly)."""
    if len(f) == 6 and f[0] == b"m" and f[2] == b"p" and f[4] == b"w":
        return {b"m": f[1], b"p": f[3], b"w": f[5]}
    return dict(zip(f[::2], f[1::2], strict=True))
