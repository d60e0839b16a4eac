"""A lean Redis connection for the store's hot path: appends and their durable acks,
log reads, and the wake readers' ``XREAD BLOCK``.

redis-py's asyncio client spends ~50 us of CPU per command beyond the round trip (a
pooled connection checked out under a condition, a ``Pipeline`` object, per-argument
encoding, a timeout context per reply); a pipeline of one append cost more CPU than the
rest of a 1-example ``/update``'s store work (``bench/update_path.py --profile``). A
:class:`Wire` speaks RESP2 over an asyncio ``Protocol``: commands are packed by hiredis
(``pack_command``, C) and written in one go, replies are parsed by hiredis's ``Reader``
and handed out in order (pipelining: a reply belongs to the oldest call still waiting).
Error replies become redis-py's exception classes (:func:`reply_error`), so the store
maps them as it maps redis-py's.

Nothing is ever sent twice: a connection that breaks (closed, a reply not in time, a
protocol error) fails every call in flight with ``ConnectionError`` / ``TimeoutError``
(the store's ``StoreUnavailable``: the writes may or may not have happened, as with any
network write) and is replaced at the next call. A cancelled caller's replies are still
read and dropped, so the next caller never reads someone else's reply.

Plain TCP (``redis://``) and Unix sockets (``unix://``) with a password, user and
database; anything else (``rediss://``, options in the query string but ``db``) is not
a :func:`supported` URL and the store keeps redis-py for it.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import hiredis
from redis import exceptions as rex

# Error replies by their first word, as redis-py maps them (redis._parsers.base); the
# message keeps the code when the class does not say it (MISCONF..., NOREPLICAS...).
_ERRORS: dict[str, type[rex.RedisError]] = {
    "LOADING": rex.BusyLoadingError,
    "READONLY": rex.ReadOnlyError,
    "NOSCRIPT": rex.NoScriptError,
    "OOM": rex.OutOfMemoryError,
    "MASTERDOWN": rex.MasterDownError,
    "CLUSTERDOWN": rex.ClusterDownError,
    "TRYAGAIN": rex.TryAgainError,
    "MOVED": rex.MovedError,
    "ASK": rex.AskError,
    "CROSSSLOT": rex.ClusterCrossSlotError,
    "NOAUTH": rex.AuthenticationError,
    "WRONGPASS": rex.AuthenticationError,
    "NOPERM": rex.NoPermissionError,
    "EXECABORT": rex.ExecAbortError,
}


def reply_error(message: str) -> rex.RedisError:
    """redis-py's exception for an error reply (``"NOSCRIPT No matching script"``...)."""
    code, _, rest = message.partition(" ")
    cls = _ERRORS.get(code)
    return rex.ResponseError(message) if cls is None else cls(rest)


# (name, *args) -> the RESP request (hiredis's stub types the tuple as of one item)
pack: Callable[[tuple[Any, ...]], bytes] = hiredis.pack_command


def supported(url: str) -> bool:
    """Whether :class:`Wire` can connect where ``url`` says (else: redis-py)."""
    try:
        u = urlparse(url)
        query = parse_qs(u.query)
        return u.scheme in ("redis", "unix") and set(query) <= {"db"} and u.port != 0
    except ValueError:
        return False


class _Call:
    __slots__ = ("deadline", "future", "n", "replies")

    def __init__(self, future: asyncio.Future[list[Any]], n: int, deadline: float) -> None:
        self.future = future
        self.n = n
        self.deadline = deadline  # loop.time(); inf: no limit
        self.replies: list[Any] = []


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.waiting: collections.deque[_Call] = collections.deque()
        self.closed = False
        # One timer for all the calls in flight (not one per call): it fires at the
        # earliest deadline it knows of and then looks again.
        self.watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        waiting = self.waiting
        try:
            while (reply := self.reader.gets()) is not False:
                if not waiting:
                    raise hiredis.ProtocolError("a reply nobody asked for")
                call = waiting[0]
                call.replies.append(reply)
                if len(call.replies) == call.n:
                    waiting.popleft()
                    if not call.future.done():  # else: its caller was cancelled
                        call.future.set_result(call.replies)
        except hiredis.ProtocolError as e:
            self.fail(ConnectionError(f"redis protocol error: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError(f"redis connection lost: {exc or 'closed by the server'}"))

    def watch(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self.watchdog is None and deadline != _NEVER:
            self.watchdog = loop.call_at(deadline, self._check, loop)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        self.watchdog = None
        now = loop.time()
        first = min((c.deadline for c in self.waiting), default=_NEVER)
        if first <= now:
            # The replies may still come: nobody could tell them from the next call's.
            self.fail(TimeoutError("redis did not answer in time"))
        else:
            self.watch(loop, first)

    def fail(self, exc: BaseException) -> None:
        """Fail every call in flight and drop the connection."""
        self.closed = True
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        if self.transport is not None:
            self.transport.abort()
        while self.waiting:
            call = self.waiting.popleft()
            if not call.future.done():
                call.future.set_exception(exc)


class Wire:
    """One lazily (re)connected Redis connection; calls are pipelined on it in order.

    ``call`` sends commands (packed with :func:`pack`) and returns their replies, error
    replies as exceptions (not raised). ``timeout`` bounds the wait for all of them
    (None: unbounded, for ``XREAD BLOCK``; bound it outside)."""

    def __init__(self, url: str, connect_timeout: float, client_name: str = "learnserve") -> None:
        if not supported(url):
            raise ValueError(f"not a plain redis:// or unix:// URL: {url.split('@')[-1]}")
        u = urlparse(url)
        self._unix = u.path if u.scheme == "unix" else None
        self._host = u.hostname or "localhost"
        self._port = u.port or 6379
        db = u.path.lstrip("/") if u.scheme == "redis" else ""
        self._db = int(db or parse_qs(u.query).get("db", ["0"])[0])
        self._user = unquote(u.username) if u.username else None
        self._password = unquote(u.password) if u.password else None
        self._name = client_name
        self._connect_timeout = connect_timeout
        self._proto: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None

    async def _connected(self) -> _Protocol:
        proto = self._proto
        if proto is not None and not proto.closed:
            return proto
        fut = self._connecting
        if fut is None or fut.done():  # done: its result is in _proto, or it failed
            if fut is not None and not fut.cancelled():
                fut.exception()  # retrieved (a failed connect is reported to its callers)
            fut = self._connecting = asyncio.ensure_future(self._connect())
        # Shielded: callers share one connect, and one cancelled caller cancels none.
        return await asyncio.shield(fut)

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        proto: _Protocol | None = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                if self._unix is not None:
                    _, proto = await loop.create_unix_connection(_Protocol, self._unix)
                else:
                    _, proto = await loop.create_connection(_Protocol, self._host, self._port)
                hello: list[bytes] = []
                if self._password is not None:
                    auth = (self._user, self._password) if self._user else (self._password,)
                    hello.append(pack(("AUTH", *auth)))
                if self._db:
                    hello.append(pack(("SELECT", self._db)))
                hello.append(pack(("CLIENT", "SETNAME", self._name)))
                for reply in await _send(proto, hello, None):
                    if isinstance(reply, Exception):
                        raise reply
        except BaseException:
            if proto is not None:
                proto.fail(ConnectionError("redis connection not set up"))
            raise
        self._proto = proto
        return proto

    async def call(self, commands: list[bytes], timeout: float | None) -> list[Any]:
        proto = self._proto
        if proto is None or proto.closed:
            proto = await self._connected()
        return await _send(proto, commands, timeout)

    def close(self) -> None:
        if self._proto is not None:
            self._proto.fail(ConnectionError("redis connection closed"))
            self._proto = None
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()


_NEVER = float("inf")


async def _send(proto: _Protocol, commands: list[bytes], timeout: float | None) -> list[Any]:
    if proto.closed or proto.transport is None:
        raise ConnectionError("redis connection lost")
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[list[Any]] = loop.create_future()
    deadline = _NEVER if timeout is None else loop.time() + timeout
    proto.waiting.append(_Call(fut, len(commands), deadline))
    proto.watch(loop, deadline)
    proto.transport.write(b"".join(commands) if len(commands) > 1 else commands[0])
    replies = await fut
    # Error replies at the top level (the scripts never nest one in a table).
    for i, r in enumerate(replies):
        if isinstance(r, hiredis.ReplyError):
            replies[i] = reply_error(str(r))
    return replies
