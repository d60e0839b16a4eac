"""The Redis store's hot path (issue 21): appends over a lean RESP connection
(``service.store.redis_wire``), the APPEND script by SHA, and no self-wake.

Real redis-servers throughout; every figure the tests pin is a count or a position,
never a duration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import exceptions as rex

from service.store import StoreUnavailable
from service.store.redis import RedisStore
from service.store.redis_wire import Wire, pack, reply_error, supported
from tests.service.procs import RedisServer, find_redis_server

CFG = {"kind": "arow"}


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def commandstats(server: RedisServer) -> dict[str, int]:
    """Calls per command since the last CONFIG RESETSTAT."""
    with server.client() as c:
        stats = c.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def test_appends_send_the_script_by_sha(redis_server: RedisServer, redis_url: str) -> None:
    async def t() -> list[int]:
        s = RedisStore(redis_url)
        await s.open()
        try:
            await s.create_model("m", CFG)
            with redis_server.client() as c:
                c.config_resetstat()
            return list(await asyncio.gather(*(s.append("m", b"%d" % i) for i in range(20))))
        finally:
            await s.close()

    positions = run(t())
    assert sorted(positions) == list(range(1, 21))
    stats = commandstats(redis_server)
    # The first group finds the script unknown (a fresh server): sent again with its
    # text once (EVAL loads it); every other append is an EVALSHA.
    assert stats.get("evalsha", 0) >= 20 - stats.get("eval", 0)
    assert stats.get("eval", 0) <= 20
    assert stats.get("evalsha", 0) > 0


def test_a_flushed_script_is_sent_again_and_appends_once(
    redis_server: RedisServer, redis_url: str
) -> None:
    """NOSCRIPT means the script did not run: the append is sent again with the text,
    and the log holds each entry exactly once, in positions without a gap."""

    async def t() -> tuple[list[int], list[int]]:
        s = RedisStore(redis_url)
        await s.open()
        try:
            await s.create_model("m", CFG)
            first = [await s.append("m", b"a%d" % i) for i in range(3)]
            with redis_server.client() as c:
                c.script_flush()
            second = list(await asyncio.gather(*(s.append("m", b"b%d" % i) for i in range(5))))
            entries = await s.read_log("m", 0, 100)
            return first + second, [e.position for e in entries]
        finally:
            await s.close()

    positions, logged = run(t())
    assert sorted(positions) == list(range(1, 9))
    assert logged == list(range(1, 9))


def test_own_appends_do_not_wake_this_worker(redis_url: str) -> None:
    """Two workers on one Redis: an append wakes the other worker's apply-loop, never
    the appender's own (its request applies the entry)."""

    async def t() -> tuple[dict[str, int] | None, dict[str, int] | None]:
        a, b = RedisStore(redis_url), RedisStore(redis_url)
        await a.open()
        await b.open()
        try:
            await a.create_model("m", CFG)
            # Readers started (from "now"), nothing pending.
            await a.wait_for_changes({"m": 0}, 0.2)
            await b.wait_for_changes({"m": 0}, 0.2)
            pos = await a.append("m", b"x")
            assert pos == 1
            woken_b = await b.wait_for_changes({"m": 0}, 5.0)
            woken_a = await a.wait_for_changes({"m": 0}, 0.5)
            return woken_a, woken_b
        finally:
            await a.close()
            await b.close()

    woken_a, woken_b = run(t())
    assert woken_b == {"m": 1}
    assert woken_a == {}


def test_an_append_whose_caller_left_wakes_its_own_worker(redis_url: str) -> None:
    """An entry stored for a caller that was cancelled meanwhile is applied by nobody's
    request: the worker's own apply-loop is woken for it (without a round trip)."""

    async def t() -> dict[str, int] | None:
        s = RedisStore(redis_url)
        await s.open()
        try:
            await s.create_model("m", CFG)
            await s.wait_for_changes({"m": 0}, 0.1)  # the readers run
            task = asyncio.create_task(s.append("m", b"x"))
            await asyncio.sleep(0)  # queued; the group is on its way
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            woken = await s.wait_for_changes({"m": 0}, 5.0)
            assert await s.last_position("m") == 1
            return woken
        finally:
            await s.close()

    assert run(t()) == {"m": 1}


@pytest.fixture
def password_server(tmp_path: Path) -> Iterator[RedisServer]:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server binary found")
    server = RedisServer(binary, tmp_path / "r")
    server.start()
    with server.client() as c:
        c.config_set("requirepass", "s3cret")
    try:
        yield server
    finally:
        server.kill()


def test_the_wire_authenticates_and_selects_the_database(password_server: RedisServer) -> None:
    url = f"redis://:s3cret@127.0.0.1:{password_server.port}/3"

    async def t() -> int:
        s = RedisStore(url)
        await s.open()
        try:
            await s.create_model("m", CFG)
            return await s.append("m", b"x")
        finally:
            await s.close()

    assert run(t()) == 1
    import redis

    c = redis.Redis(port=password_server.port, password="s3cret", db=3)
    try:
        assert c.xlen("ls:{m}:log") == 1
    finally:
        c.close()

    async def wrong() -> None:
        s = RedisStore(f"redis://:nope@127.0.0.1:{password_server.port}/0")
        await s.open()
        try:
            with pytest.raises(StoreUnavailable):
                await s.append("m", b"x")
        finally:
            await s.close()

    run(wrong())


def test_a_reply_too_late_fails_the_call_and_the_next_call_reads_its_own(
    redis_server: RedisServer, redis_url: str
) -> None:
    """A group whose reply does not come in time fails (StoreUnavailable: it may be
    stored); the connection is replaced, so no later call reads that late reply."""

    async def t() -> tuple[int, int]:
        s = RedisStore(redis_url, socket_timeout=0.3)
        await s.open()
        try:
            await s.create_model("m", CFG)
            assert await s.append("m", b"a") == 1
            with redis_server.client() as c:
                c.execute_command("CLIENT", "PAUSE", 1000, "WRITE")
            with pytest.raises(StoreUnavailable):
                await s.append("m", b"b")
            await asyncio.sleep(1.2)  # unpaused
            last = await s.last_position("m")
            return last, await s.append("m", b"c")
        finally:
            await s.close()

    last, pos = run(t())
    assert last in (1, 2)  # the late append may or may not have been stored
    assert pos == last + 1


def test_wire_reply_errors_map_to_redis_py_classes() -> None:
    assert isinstance(reply_error("NOSCRIPT No matching script"), rex.NoScriptError)
    assert isinstance(reply_error("READONLY You can't write"), rex.ReadOnlyError)
    assert isinstance(reply_error("LOADING Redis is loading"), rex.BusyLoadingError)
    e = reply_error("MISCONF Errors writing to the AOF file")
    assert type(e) is rex.ResponseError and str(e).startswith("MISCONF")
    assert pack(("GET", "k")) == b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("redis://127.0.0.1:6379/0", True),
        ("redis://:pw@h:1/2", True),
        ("redis://user:pw@h", True),
        ("unix:///tmp/r.sock?db=3", True),
        ("rediss://h:1/0", False),
        ("redis://h:1/0?socket_timeout=3", False),
    ],
)
def test_wire_urls(url: str, ok: bool) -> None:
    assert supported(url) is ok
    if ok:
        Wire(url, 1.0)


def test_log_entries_carry_their_payload_digest(redis_url: str) -> None:
    """Each entry keeps the digest its appender computed: a worker applying another's
    entry checks the chain without hashing the payload again (plain and keyed appends)."""
    from service.store.base import chain_head, payload_digest

    async def t() -> list[tuple[bytes, str | None, str]]:
        s = RedisStore(redis_url)
        await s.open()
        try:
            await s.create_model("m", CFG)
            await s.append("m", b"plain")
            await s.append_once("m", b"keyed", "k1", "h1", 1, 60.0)
            return [(e.payload, e.digest, e.head) for e in await s.read_log("m", 0, 10)]
        finally:
            await s.close()

    head = ""
    for payload, digest, stored_head in run(t()):
        assert digest == payload_digest(payload)
        head = chain_head(head, payload, digest)
        assert head == stored_head
