"""Per-worker memory and CPU, and the container's memory limit, as metrics.

prometheus-client's ``process_*`` collector does not run in multiprocess mode (the
default with ``--workers > 1``), and memory is the capacity limit of a replica (every
worker holds every model). So each worker samples itself every few seconds: resident
memory from ``/proc/self/statm``, CPU from ``os.times()``; the cgroup's ``memory.max``
(v2) or ``memory.limit_in_bytes`` (v1) gives the limit the alert compares against.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from service.observability import metrics as M

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)
_NO_LIMIT = 1 << 60  # cgroup v1 reports "unlimited" as a huge number


def memory_limit_bytes() -> int | None:
    """The container's memory limit, or None when it has none (or we cannot tell)."""
    for path in _CGROUP_LIMITS:
        with contextlib.suppress(OSError, ValueError):
            text = path.read_text().strip()
            if text == "max":
                return None
            value = int(text)
            return value if 0 < value < _NO_LIMIT else None
    return None


def resident_bytes() -> int:
    """This process's resident set size."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):  # not Linux: the peak instead
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def sample() -> None:
    M.PROCESS_RESIDENT_MEMORY.set(resident_bytes())
    t = os.times()
    M.PROCESS_CPU_SECONDS.set(t.user + t.system)


async def sample_forever(interval: float) -> None:
    limit = memory_limit_bytes()
    if limit is not None:  # no limit: no series, so the alert's ratio matches nothing
        M.MEMORY_LIMIT.set(limit)
    while True:
        sample()
        await asyncio.sleep(interval)


def start_process_stats(interval: float = 5.0) -> asyncio.Task[None]:
    sample()  # the first scrape already sees this worker
    return asyncio.get_running_loop().create_task(
        sample_forever(interval), name="learnserve-process-stats"
    )


async def stop_process_stats(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task})
