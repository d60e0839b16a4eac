"""The apply-loop: every worker applies every model's log, in log order.

One background task per process. It waits on the store for new entries
(``wait_for_entries``: XREAD BLOCK on Redis, a short poll on SQLite), applies
them to every model, polls ``catalog_epoch()`` to pick up models created or
deleted by other workers, and once a second runs time-based checkpoints and
refreshes lag/age gauges. While the store is unreachable it backs off and keeps
trying; ``/predict`` keeps answering from memory meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from service.registry import Registry
from service.store.base import StoreUnavailable

log = logging.getLogger("learnserve.replication")


class Replicator:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.settings = registry.settings
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="replication")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(self) -> None:
        reg = self.registry
        backoff = 0.1
        last_catalog = last_periodic = 0.0
        while True:
            try:
                if not reg.ready:
                    await reg.restore_all()
                    reg.health.ok()
                    continue
                online = [h for h in reg.models.values() if h.adapter.online]
                after = {h.name: h.version for h in online}
                if after:
                    await reg.store.wait_for_entries(after, timeout=0.5)
                    # Coalesce: under a stream of writes the wait returns at once every
                    # time; a few ms let one read_log per model pick up many entries
                    # (this worker's own entries are already applied by their requests).
                    await asyncio.sleep(0.005)
                else:
                    await asyncio.sleep(0.1)
                for h in online:
                    if reg.models.get(h.name) is h:  # not dropped/replaced meanwhile
                        await reg.catch_up(h)
                now = time.monotonic()
                if now - last_catalog >= self.settings.catalog_poll_seconds:
                    await reg.sync_catalog()
                    last_catalog = now
                if now - last_periodic >= 1.0:
                    await reg.periodic()
                    last_periodic = now
                reg.health.ok()
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except (StoreUnavailable, ConnectionError, TimeoutError, OSError) as e:
                reg.health.failed("replication", e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception:
                log.exception("replication loop error; retrying")
                await asyncio.sleep(1.0)
