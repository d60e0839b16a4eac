"""The models of this process: restore, apply the log in order, checkpoint.

Every model's state is a pure function of its log: a checkpoint (state + the
position it covers) and the entries after it, applied in position order. Every
worker applies every entry, so all replicas hold bit-identical state. A model's
``version`` is the position of the last entry applied here.

All mutation of a model happens under its ``asyncio.Lock`` on the event loop;
``/predict`` reads without the lock (it never sees a half-applied batch since
``apply`` does not yield to the loop).

The registry holds the models and their locks; the work is in modules of functions
over it, which it delegates to under its own names::

    model_catalog       restore at start, create, delete, sync with other workers
    log_application     the log applied in order, checked against the chain
    update_submission   an update appended, applied here, answered
    log_integrity       a store that lost the log's tail
    checkpoints         when and how a model's state is checkpointed
    batch_deploys       a batch model's artifacts (deploy, activate, rollback)
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import socket
import time
from typing import Any

from service import (
    batch_deploys,
    checkpoints,
    log_application,
    log_integrity,
    model_catalog,
    update_outcomes,
    update_submission,
)
from service import metrics as M
from service.api.errors import ApiError, not_found, store_unavailable
from service.model_handle import ModelHandle, StoreHealth
from service.models.base import ModelAdapter
from service.placement import Placement
from service.settings import Settings
from service.store.base import KeyGuard, Store, StoreUnavailable
from service.warmup import Family

log = logging.getLogger("learnserve.registry")


class Registry:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.models: dict[str, ModelHandle] = {}
        self.ready = False
        self._warm = False
        # What the service waits for before it is ready (shown by /readyz and its 503s).
        self.waiting_for = "start-up"
        self.epoch: int | None = None
        self.health = StoreHealth(store.name)
        self._catalog_lock = asyncio.Lock()
        self.batch_locks: dict[str, asyncio.Lock] = {}  # see batch_deploys.switch_lock
        self._tasks: set[asyncio.Task[Any]] = set()
        self.failed: dict[str, str] = {}  # models that could not be restored, and why
        # This process's name in the store's leases (unique per process and start).
        self.member_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        # Who holds what (LEARNSERVE_OWNERSHIP): with "sharded", this worker owns some
        # models and loads the others on demand as guests (service.placement).
        self.placement = Placement(self, settings)
        self._sweep_at = 0.0  # time.monotonic() of the next sweep of expired feedback

    def owns(self, name: str) -> bool:
        """Whether this worker applies (apply loop) and checkpoints ``name``: always
        when replicated; when sharded, if this member is one of its owners."""
        return self.placement.owns(name)

    # ------------------------------------------------------------ lookup
    def get(self, name: str) -> ModelHandle:
        h = self.models.get(name)
        if h is None:
            raise self._missing(name)
        return h

    def _missing(self, name: str) -> ApiError:
        if name in self.failed:
            return ApiError(
                503,
                "model_unavailable",
                f"model {name!r} could not be restored: {self.failed[name]}",
                "model",
                headers={"Retry-After": "30"},
            )
        return not_found(name)

    async def find(self, name: str) -> ModelHandle:
        """The model, picking up a catalog change made by another worker if needed."""
        h = self.models.get(name)
        if h is None and self.ready:
            with contextlib.suppress(StoreUnavailable):
                await self.sync_catalog()
            h = self.models.get(name)
            if h is None and self.placement.sharded and name not in self.failed:
                try:  # not ours: load it as a guest (slower, never wrong)
                    h = await self.placement.guest(name)
                except StoreUnavailable as e:
                    raise store_unavailable() from e
        elif h is not None and not h.owned:
            await self.placement.refresh(h)  # a guest: catch up before answering
        if h is None:
            raise self._missing(name)
        return h

    def not_ready_reason(self) -> str:
        """What the service still waits for, in words ("" once ready)."""
        if self.ready:
            return ""
        if not self.health.up:
            return f"the {self.store.name} store to answer ({self.waiting_for})"
        return self.waiting_for

    # ------------------------------------------------------------ restore
    async def restore_all(self) -> None:
        await model_catalog.restore_all(self)

    def _warming(self, i: int, n: int, fam: Family) -> None:
        self.waiting_for = (
            f"compiling numba kernels {i}/{n}: {fam.what} "
            "(first start only: `learnserve warmup` does it ahead)"
        )
        log.info("warmup %d/%d: compiling or loading %s", i, n, fam.what)

    def _warmed(self, i: int, n: int, fam: Family, seconds: float) -> None:
        log.info("warmup %d/%d: %s ready in %.1fs", i, n, fam.name, seconds)

    async def _load(self, name: str, config: dict[str, Any]) -> ModelHandle | None:
        """Build a model from its checkpoint + log and install it (replacing any old one)."""
        return await model_catalog.load(self, name, config)

    # ------------------------------------------------------------ batch models
    # Deploy and activate live in service.batch_deploys (a batch model has no log);
    # these keep the names the API and tests call.
    async def deploy(self, name: str, blob: bytes) -> batch_deploys.Deployed:
        """Store an artifact as the model's next version and swap it in atomically
        (the same bytes as a stored version: that version, nothing stored)."""
        return await batch_deploys.deploy(self, name, blob)

    async def delete_version(self, name: str, version: int) -> None:
        """Delete a stored artifact version (never the active one)."""
        await batch_deploys.delete_version(self, name, version)

    async def activate(self, name: str, version: int) -> ModelHandle:
        """Make an earlier (or later) stored artifact version the active one (rollback)."""
        return await batch_deploys.activate(self, name, version)

    async def rollback(self, name: str) -> tuple[ModelHandle, int]:
        """Serve the version before the active one (compare-and-set); returns it and the
        version it replaced."""
        return await batch_deploys.rollback(self, name)

    # ------------------------------------------------------------ log application
    async def catch_up(self, h: ModelHandle, target: int | None = None) -> None:
        async with h.lock:
            await self._catch_up_locked(h, target)
        self._record_failures_soon(h)

    def _record_failures_soon(self, h: ModelHandle) -> None:
        """Record in the store the outcomes of entries that just failed here, so that a
        replay of their idempotency keys answers them on any worker, at any time."""
        if h.unrecorded:
            self.spawn(update_outcomes.record_failures(self, h))

    async def _catch_up_locked(self, h: ModelHandle, target: int | None = None) -> None:
        await log_application.catch_up_locked(self, h, target)

    async def recover_lost_tail(self, h: ModelHandle) -> None:
        await log_integrity.recover_lost_tail(self, h)

    # ------------------------------------------------------------ updates
    async def submit_update(self, h: ModelHandle, payload: bytes) -> int:
        """Append durably, apply in log order up to our entry, return its position."""
        return await update_submission.submit_update(self, h, payload)

    async def submit_labelled(
        self,
        h: ModelHandle,
        payload: bytes,
        labels: list[tuple[str, str, str]],
        once: KeyGuard | None = None,
    ) -> tuple[int, bool]:
        """``submit_update`` of an entry that learns delayed labels (marked labelled in
        the same atomic step as the append), at most once per ``once``'s key:
        ``(position, replayed)``."""
        return await update_submission.submit_labelled(self, h, payload, labels, once)

    async def key_recorded(self, h: ModelHandle, key: str) -> bool:
        return await update_submission.key_recorded(self, h, key)

    async def key_entry(self, h: ModelHandle, key: str) -> tuple[int, int, str] | None:
        """The live idempotency key's ``(position, n, payload_hash)``, or None."""
        return await update_submission.key_entry(self, h, key)

    async def replay(self, h: ModelHandle, key: str, position: int) -> None:
        """Answer a keyed request sent again as the first was (its entry applied here)."""
        await update_submission.replay(self, h, key, position)

    async def submit_update_once(
        self, h: ModelHandle, payload: bytes, key: str, payload_hash: str, n: int
    ) -> tuple[int, int, bool]:
        """``submit_update`` at most once per (model, idempotency ``key``): returns
        ``(position, n, replayed)``."""
        return await update_submission.submit_update_once(self, h, payload, key, payload_hash, n)

    async def wait_for_version(self, h: ModelHandle, version: int, timeout: float) -> bool:
        """Until this process has applied ``version`` of the model (or ``timeout``)."""
        return await update_submission.wait_for_version(self, h, version, timeout)

    # ------------------------------------------------------------ catalog
    async def create(
        self,
        name: str,
        cls: type[ModelAdapter],
        config: dict[str, Any],
        checkpoint: bytes | memoryview | None = None,
    ) -> tuple[ModelHandle, bool]:
        """Create the model (``checkpoint``: its starting state, an import, stored with it
        atomically) and load it here as every worker does: from the store."""
        return await model_catalog.create(self, name, cls, config, checkpoint)

    async def delete(self, name: str) -> None:
        await model_catalog.delete(self, name)

    def _drop(self, name: str) -> bool:
        h = self.models.pop(name, None)
        self.placement.forget(name)
        if h is None:
            return False
        M.forget_model(name)  # every per-model series (also with several workers)
        self._update_kind_gauge()
        return True

    async def sync_catalog(self) -> None:
        """Pick up models created or deleted by other workers (cheap when nothing changed)."""
        await model_catalog.sync_catalog(self)

    def _update_kind_gauge(self) -> None:
        counts = collections.Counter(h.adapter.kind for h in self.models.values())
        for kind in set(counts) | {"linear"}:
            M.MODELS.labels(kind).set(counts.get(kind, 0))

    # ------------------------------------------------------------ checkpoints
    def _maybe_checkpoint(self, h: ModelHandle) -> None:
        if h.owned and checkpoints.count_due(self.settings, h) and not h.checkpointing:
            self.spawn(self.checkpoint(h))

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def checkpoint(self, h: ModelHandle) -> bool:
        """Snapshot quickly under the lock, serialise + write off-loop, then trim the log."""
        return await checkpoints.checkpoint(self, h)

    async def periodic(self) -> None:
        """Time-based checkpoints and slow-moving gauges (called about once a second);
        once a minute, the store's expired delayed-label records are swept."""
        await checkpoints.periodic(self)
        now = time.monotonic()
        if now >= self._sweep_at:
            self._sweep_at = now + 60.0
            self.spawn(self._sweep_feedback())

    async def _sweep_feedback(self) -> None:
        try:
            await self.store.sweep_feedback()
        except Exception as e:  # the next sweep (or put) tries again
            log.warning("sweeping expired delayed-label records failed: %s", e)

    async def close(self) -> None:
        await self.placement.stop()  # leave the fleet: the others take over at once
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
