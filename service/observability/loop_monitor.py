"""Event-loop lag: a production metric for "the loop could not run anything".

A task sleeps ``loop_lag_interval_seconds`` (``LEARNSERVE_LOOP_LAG_INTERVAL_SECONDS``,
default 25 ms) over and over; how much later than asked it wakes up is time during
which the loop ran nothing else: a blocking call on the loop, a long callback, or a
worker thread holding the GIL (e.g. a big copy while checkpointing). Every wake-up is
observed into ``learnserve_event_loop_lag_seconds`` (a histogram: the buckets above
10 ms count the stalls a request could have waited behind).

>>> import asyncio
>>> from service.settings import Settings
>>> async def demo() -> None:
...     task = start_loop_monitor(Settings(loop_lag_interval_seconds=0.01))
...     await asyncio.sleep(0.05)
...     await stop_loop_monitor(task)
>>> asyncio.run(demo())
"""

from __future__ import annotations

import asyncio
import time

from service.observability import metrics as M
from service.settings import Settings


async def monitor_loop_lag(interval: float) -> None:
    """Forever: sleep ``interval`` seconds, observe the oversleep (never negative)."""
    observe = M.EVENT_LOOP_LAG.observe
    clock = time.perf_counter
    while True:
        t0 = clock()
        await asyncio.sleep(interval)
        observe(max(0.0, clock() - t0 - interval))


def start_loop_monitor(settings: Settings) -> asyncio.Task[None]:
    """Start the monitor on the running loop; stop it with :func:`stop_loop_monitor`."""
    return asyncio.get_running_loop().create_task(
        monitor_loop_lag(settings.loop_lag_interval_seconds), name="learnserve-loop-lag"
    )


async def stop_loop_monitor(task: asyncio.Task[None]) -> None:
    """Cancel the monitor and wait until it has stopped (a cancellation of the caller
    still propagates)."""
    task.cancel()
    await asyncio.wait({task})
