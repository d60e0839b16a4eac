"""The apply-loop: every worker applies every model's log, in log order.

One background task per process. It waits on the store for the models that changed
(``wait_for_changes``: the Redis wake streams, ``service.store.redis_wakes``; a
short poll of the positions on SQLite) and catches up only those, so a pass costs
O(models changed), not O(models held). Every ``reconcile_seconds`` (and whenever the
store says some wakes may be lost) it reads every model's position in batched reads:
a lost wake, or a log that lost its tail in a failover, is found there, and the
log-lag gauges are refreshed. It also polls ``catalog_epoch()`` to pick up models
created or deleted by other workers, and once a second runs time-based checkpoints.
A second task syncs the catalog at once when an entry applied here promotes a follower
not held here yet (``catalog_on_demand``): a promotion reaches every worker as
promptly as an update.
While the store is unreachable it backs off and keeps trying; ``/predict`` keeps
answering from memory meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.observability import metrics as M
from service.store.base import StoreUnavailable

log = logging.getLogger("learnserve.replication")

_MODEL_BACKOFF = 1.0  # first retry of a model whose log cannot be applied (seconds)
_MODEL_BACKOFF_MAX = 60.0
_LATE_SECONDS = 5.0  # how long a wake of a model not listed in the pass is kept
_LATE_MAX = 10_000  # ... and how many such wakes before the old ones go


class Replicator:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings = engine.settings
        self._task: asyncio.Task[None] | None = None
        self._catalog_task: asyncio.Task[None] | None = None
        # Wakes of models a pass did not list: name -> (position, when) (_held_since).
        self._late: dict[str, tuple[int, float]] = {}
        self._installs_seen = 0
        # Models whose log failed to apply: the handle, when to try again, the delay.
        self._failing: dict[str, tuple[ModelHandle, float, float]] = {}

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self.run(), name="replication")
        self._catalog_task = loop.create_task(self.catalog_on_demand(), name="catalog-wanted")

    async def stop(self) -> None:
        for task in (self._task, self._catalog_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._catalog_task = None

    async def catalog_on_demand(self) -> None:
        """A catalog sync whenever one is asked for (``registry.catalog_wanted``: an
        entry applied here promotes a follower not held here yet), besides the poll."""
        wanted = self.engine.registry.catalog_wanted
        while True:
            await wanted.wait()
            wanted.clear()
            try:
                await self.engine.sync_catalog()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the store: the poll does it later
                log.warning("catalog sync for a promotion failed (%s); the poll retries", e)

    async def _catch_up_one(self, h: ModelHandle) -> None:
        """Catch one model up; a model whose log cannot be applied (corrupt checkpoint,
        a gap) is reported and retried with a backoff, never blocking the others."""
        reg = self.engine
        try:
            await reg.catch_up(h)
        except (asyncio.CancelledError, StoreUnavailable, ConnectionError, TimeoutError, OSError):
            raise  # the store, not the model: the whole loop backs off
        except Exception as e:
            prev = self._failing.get(h.name)
            delay = _MODEL_BACKOFF if prev is None else min(prev[2] * 2, _MODEL_BACKOFF_MAX)
            self._failing[h.name] = (h, time.monotonic() + delay, delay)
            reg.failed[h.name] = f"{type(e).__name__}: {e}"  # shown by /readyz
            log.error(
                "model %r: cannot apply its log (%s: %s); retrying in %.0fs",
                h.name, type(e).__name__, e, delay,
            )  # fmt: skip
            return
        if self._failing.pop(h.name, None) is not None:
            if reg.models.get(h.name) is h:
                reg.failed.pop(h.name, None)
            log.warning("model %r: applying its log again", h.name)

    def _applies(self, h: ModelHandle) -> bool:
        """Whether this loop applies ``h``'s log: owned models only (guests catch up
        when a request reads them; a follower learns with its leader)."""
        return h.adapter.online and h.owned and h.leader is None and self._due(h)

    def _held_since(self, changes: dict[str, int], online: list[ModelHandle]) -> list[ModelHandle]:
        """The models woken while this pass waited that it did not list: held (loaded,
        or loaded again) since the list was made, e.g. by a request that asked for one
        moments before another worker appended to it. Their wakes are kept a few
        seconds (``_late``), and the models caught up once held (``changes`` is given
        their positions). Without this such a wake was dropped, and the entry (a
        promotion, say) not applied here until the model's next update or the
        reconciliation."""
        now = time.monotonic()
        listed = {h.name for h in online}
        for name, pos in changes.items():
            if name not in listed:
                self._late[name] = (max(pos, self._late.get(name, (0, 0.0))[0]), now)
        if len(self._late) > _LATE_MAX:  # a member that owns few of many busy models
            self._late = {n: v for n, v in self._late.items() if now - v[1] < _LATE_SECONDS}
        reg = self.engine.registry
        if not self._late or reg.installs == self._installs_seen:
            return []  # nothing held anew since the last look: the common case, O(1)
        self._installs_seen = reg.installs
        out = []
        for name, (pos, at) in list(self._late.items()):
            h = reg.models.get(name)
            if h is not None and self._applies(h):
                del self._late[name]
                if pos > h.version:  # (listed: woken by an earlier pass, held since)
                    changes[name] = max(changes.get(name, 0), pos)
                    if name not in listed:
                        out.append(h)
            elif now - at > _LATE_SECONDS:
                del self._late[name]
        return out

    def _due(self, h: ModelHandle) -> bool:
        """False while ``h`` is backing off after a failure (a reloaded or re-created
        model under the same name starts afresh)."""
        failing = self._failing.get(h.name)
        if failing is None:
            return True
        if failing[0] is not h:
            del self._failing[h.name]
            return True
        return failing[1] <= time.monotonic()

    async def run(self) -> None:
        reg = self.engine
        backoff = 0.1
        last_catalog = last_periodic = last_reconcile = 0.0
        while True:
            try:
                if not reg.ready:
                    await reg.restore_all()
                    reg.health.ok()
                    last_reconcile = 0.0
                    continue
                # Owned models only: guests catch up when a request reads them; a
                # follower learns with its leader (it has no log of its own).
                online = [h for h in reg.models.values() if self._applies(h)]
                after = {h.name: h.version for h in online}
                # Also with no model held (a member owning none): the store's wakes are
                # drained, not queued up without bound.
                changes = await reg.store.wait_for_changes(after, timeout=0.5 if after else 0.1)
                if after:
                    # Coalesce: under a stream of writes the wait returns at once every
                    # time; a few ms let one read_log per model pick up many entries
                    # (this worker's own entries are already applied by their requests).
                    await asyncio.sleep(0.005)
                now = time.monotonic()
                every = self.settings.reconcile_seconds
                if reg.store.wakes_complete:
                    every *= 10  # a safety net only: no wake is lost without a None
                if changes is None or now - last_reconcile >= every:
                    # Every model's position, in batched reads: catches lost wakes, a
                    # log that lost its tail, and refreshes every lag gauge.
                    changes = await reg.store.last_positions(list(after))
                    last_reconcile = now
                    for h in online:
                        pos = changes.get(h.name, 0)
                        M.log_lag(h.name).set(max(0, pos - h.version))
                        if pos < h.version and not h.lock.locked():
                            reg.spawn(reg.recover_lost_tail(h))
                online += self._held_since(changes, online)
                for h in online:
                    if changes.get(h.name, 0) <= h.version:
                        continue  # not woken: nothing new (a pass is O(models changed))
                    if reg.models.get(h.name) is h:  # not dropped/replaced meanwhile
                        await self._catch_up_one(h)
                        M.log_lag(h.name).set(max(0, changes[h.name] - h.version))
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
