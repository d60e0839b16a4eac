"""Deadlines for reading request bodies: one timer per event loop, not one per request.

``asyncio.timeout`` around each body read schedules and cancels a timer handle and
builds a context manager per request: ~7 us of a one-instance ``/predict`` that costs
~48 us in the application (measured in process under uvloop), for a timer that
almost never fires: the body of a small request is in uvicorn's buffer before the
route runs. Here a read registers its task and deadline in a dict; one timer per loop,
armed at the earliest deadline it knows, cancels the tasks whose deadline has passed
and re-arms itself at the earliest one left. A read that ends unregisters (a dict
pop). The cancellation is the one ``asyncio.timeout`` makes: the reader turns it into
:class:`TimeoutError` only if nobody else cancelled the task too (``uncancel``).

>>> import asyncio
>>> async def stalled() -> str:
...     try:
...         async with body_deadline(0.01):
...             await asyncio.sleep(10)
...     except TimeoutError:
...         return "timed out"
...     return "read"
>>> asyncio.run(stalled())
'timed out'
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from types import TracebackType

__all__ = ["body_deadline"]


class _Watchdog:
    """The tasks reading a body on one loop, their deadlines, and the one timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.readers: dict[asyncio.Task[object], float] = {}
        self.expired: set[asyncio.Task[object]] = set()
        self.handle: asyncio.TimerHandle | None = None

    def add(self, task: asyncio.Task[object], deadline: float) -> None:
        self.readers[task] = deadline
        handle = self.handle
        if handle is None or deadline < handle.when():
            if handle is not None:
                handle.cancel()
            self.handle = self.loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self.handle = None
        now = self.loop.time()
        due = [t for t, d in self.readers.items() if d <= now]
        for task in due:
            del self.readers[task]
            self.expired.add(task)
            task.cancel()
        if self.readers:
            self.handle = self.loop.call_at(min(self.readers.values()), self._fire)


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = (
    weakref.WeakKeyDictionary()
)


_this_thread = threading.local()


def _running_loop() -> asyncio.AbstractEventLoop:
    """``asyncio.get_running_loop()``, remembered per thread: in CPython 3.11 each call
    (also inside ``current_task()``) is a ``getpid`` system call (its fork check), two
    per request here. The remembered loop is this thread's running loop while it runs
    (one loop runs per thread at a time)."""
    loop: asyncio.AbstractEventLoop | None = getattr(_this_thread, "loop", None)
    if loop is None or not loop.is_running():
        loop = _this_thread.loop = asyncio.get_running_loop()
    return loop


class body_deadline:
    """``async with body_deadline(seconds):`` — :class:`TimeoutError` if the block is
    still waiting ``seconds`` after it began (as ``asyncio.timeout``)."""

    __slots__ = ("_cancelling", "_dog", "_seconds", "_task")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    async def __aenter__(self) -> None:
        loop = _running_loop()
        dog = _watchdogs.get(loop)
        if dog is None:
            dog = _watchdogs[loop] = _Watchdog(loop)
        task = asyncio.current_task(loop)
        assert task is not None
        self._dog, self._task = dog, task
        self._cancelling = task.cancelling()
        dog.add(task, loop.time() + self._seconds)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        dog, task = self._dog, self._task
        dog.readers.pop(task, None)
        if task in dog.expired:
            dog.expired.discard(task)
            # ours, and nobody else's: a timeout; a cancel from elsewhere goes on
            if task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc
