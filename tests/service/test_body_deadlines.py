"""service.api.body_deadlines: one timer per loop gives each body read its own deadline."""

from __future__ import annotations

import asyncio

import pytest

from service.api.body_deadlines import _watchdogs, body_deadline


async def _read(seconds: float, takes: float) -> str:
    try:
        async with body_deadline(seconds):
            await asyncio.sleep(takes)
    except TimeoutError:
        return "timeout"
    return "read"


def test_each_read_keeps_its_own_deadline() -> None:
    async def main() -> list[str]:
        return list(
            await asyncio.gather(
                _read(0.30, 0.05),  # in time
                _read(0.05, 1.0),  # the shortest deadline, armed after a longer one
                _read(0.20, 1.0),
                _read(5.00, 0.40),  # long deadline, a slow but timely body
            )
        )

    loop_time = asyncio.new_event_loop()
    try:
        out = loop_time.run_until_complete(main())
    finally:
        loop_time.close()
    assert out == ["read", "timeout", "timeout", "read"]


def test_a_timed_out_read_takes_its_time_not_the_later_deadline() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        slow = asyncio.create_task(_read(10.0, 10.0))  # arms the timer at +10 s
        await asyncio.sleep(0)
        assert await _read(0.05, 10.0) == "timeout"  # re-armed earlier
        slow.cancel()
        return loop.time() - t0

    assert asyncio.run(main()) < 2.0


def test_a_finished_read_is_forgotten_and_never_cancelled_later() -> None:
    async def main() -> None:
        assert await _read(0.05, 0.0) == "read"
        dog = _watchdogs[asyncio.get_running_loop()]
        assert dog.readers == {}
        await asyncio.sleep(0.1)  # past the deadline: this task must not be cancelled
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        assert dog.expired == set()

    asyncio.run(main())


def test_a_cancel_from_elsewhere_stays_a_cancel() -> None:
    async def main() -> None:
        task = asyncio.create_task(_read(5.0, 5.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancel_during_a_timeout_is_not_swallowed() -> None:
    """Both the deadline and an outside cancel hit the same read: the cancel wins."""

    async def reader() -> None:
        async with body_deadline(0.01):
            try:
                await asyncio.sleep(5)
            finally:
                await asyncio.sleep(0.2)  # the outside cancel lands here

    async def main() -> None:
        task = asyncio.create_task(reader())
        await asyncio.sleep(0.05)  # the deadline has fired by now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
