"""The engine: every verb on the models this process hosts, in one place.

:class:`Engine` is what the API, the apply loop and the CLI's server call: find,
create, delete, import, submit an update (plain, once per idempotency key, with
delayed labels), wait for a version, deploy, activate, roll back, checkpoint. It
owns the :class:`~service.engine.registry.Registry` (the table, whose docstring has
the lock rules) and the fleet's :class:`~service.fleet.placement.Placement`, which
it gives hooks (:class:`_PlacementHooks`), never itself. The work is in the modules
below it, each given the table::

    catalog            restore at start, create, delete, sync with other workers
    kernel_waits       a model waits for its kind's numba kernels (pending while compiled)
    log_application    the log applied in order, checked against the chain
    update_submission  an update appended, applied here, answered
    group_commit       plain updates that wait for the store together: one entry
    reward_groups      the same for a decision model's unkeyed rewards
    update_outcomes    failures recorded for idempotent replays
    checkpoints        when and how a model's state is checkpointed
    batch_versions     a batch model's artifacts (deploy, activate, rollback)
    transfers          export and import of an online model's state
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any, cast

from service.engine import (
    batch_versions,
    catalog,
    checkpoints,
    followers,
    group_commit,
    log_application,
    reward_groups,
    transfers,
    update_submission,
)
from service.engine.decision_defaults import DefaultRewards
from service.engine.model_handle import ModelHandle, StoreHealth
from service.engine.registry import Registry
from service.errors import store_unavailable
from service.fleet.placement import Placement
from service.models.base import ModelAdapter
from service.settings import Settings
from service.store.base import ArtifactVersion, KeyGuard, Store, StoreUnavailable

log = logging.getLogger("learnserve.registry")


class Engine:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.registry = Registry(store, settings)
        self._sweep_at = 0.0  # time.monotonic() of the next sweep of expired feedback
        self._defaults = DefaultRewards(self.registry)  # decision models' default rewards
        # Who holds what (LEARNSERVE_OWNERSHIP): with "sharded", this worker owns some
        # models and loads the others on demand as guests (service.fleet.placement).
        self.placement = Placement(store, settings, _PlacementHooks(self))
        self.registry.owns = self._owns
        # a follower lives where its leader's log is: placed by the leader's name
        self.placement.key = lambda name: self.registry.leader_names.get(name, name)
        self.registry.on_guest = self.placement.admit
        self.registry.on_drop.append(self.placement.forget)

    # ------------------------------------------------------------ the table, read
    @property
    def store(self) -> Store:
        return self.registry.store

    @property
    def settings(self) -> Settings:
        return self.registry.settings

    @property
    def models(self) -> dict[str, ModelHandle]:
        return self.registry.models

    @property
    def failed(self) -> dict[str, str]:
        return self.registry.failed

    @property
    def ready(self) -> bool:
        return self.registry.ready

    @property
    def epoch(self) -> int | None:
        return self.registry.epoch

    @property
    def health(self) -> StoreHealth:
        return self.registry.health

    @property
    def tasks(self) -> set[asyncio.Task[Any]]:
        return self.registry.tasks

    @property
    def waiting_for(self) -> str:
        return self.registry.waiting_for

    def _owns(self, name: str) -> bool:
        return self.placement.owns(name)  # (placed by the leader's name: placement.key)

    def owns(self, name: str) -> bool:
        """Whether this worker applies (apply loop) and checkpoints ``name``: always
        when replicated; when sharded, if this member is one of its owners."""
        return self._owns(name)

    def get(self, name: str) -> ModelHandle:
        return self.registry.get(name)

    def not_ready_reason(self) -> str:
        return self.registry.not_ready_reason()

    def spawn(self, coro: Any) -> None:
        self.registry.spawn(coro)

    # ------------------------------------------------------------ lookup
    async def find(self, name: str) -> ModelHandle:
        """The model, picking up a catalog change made by another worker if needed."""
        reg = self.registry
        h = reg.models.get(name)
        if h is None and reg.ready:
            with contextlib.suppress(StoreUnavailable):
                await self.sync_catalog()
            h = reg.models.get(name)
            if h is None and self.placement.sharded and name not in reg.failed:
                try:  # not ours: load it as a guest (slower, never wrong)
                    # the hooks load ModelHandles: what placement returns is one
                    h = cast(ModelHandle | None, await self.placement.guest(name))
                except StoreUnavailable as e:
                    raise store_unavailable() from e
        elif h is not None and not h.owned:
            await self.placement.refresh(h)  # a guest: catch up before answering
        if h is None:
            raise reg.missing(name)
        return h

    # ------------------------------------------------------------ start-up
    async def restore_all(self) -> None:
        # The kernels the stored models run are loaded (or compiled, in processes of
        # their own) by the catalog's restore, kind by kind: nothing else is compiled.
        await self.placement.start()  # join the fleet first: we restore what we own
        await catalog.restore_all(self.registry)
        self.placement.update_gauges()

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
        return await catalog.create(self.registry, name, cls, config, checkpoint)

    async def import_model(self, name: str, blob: bytes) -> tuple[ModelHandle, bool]:
        """Create ``name`` from an exported online model's artifact."""
        return await transfers.import_model(self.registry, name, blob)

    async def delete(self, name: str) -> None:
        await catalog.delete(self.registry, name)

    async def promote(self, name: str, follower: str | None) -> tuple[ModelHandle, int]:
        """Make ``follower`` (None: the model itself) answer ``/predict`` under ``name``,
        from a control entry in its log on (``service.engine.followers``); the model and
        the entry's position, once applied here."""
        h = await self.find(name)
        if follower not in (None, name) and follower not in h.followers:
            await self.sync_catalog()  # created by another worker moments ago
        payload = followers.control_for(h, follower)
        target = None if follower in (None, name) else follower
        return h, await update_submission.submit_serving(self.registry, h, payload, target)

    async def sync_catalog(self) -> None:
        """Pick up models created or deleted by other workers (cheap when nothing changed)."""
        await catalog.sync_catalog(self.registry)

    # ------------------------------------------------------------ batch models
    async def deploy(self, name: str, blob: bytes) -> batch_versions.Deployed:
        """Store an artifact as the model's next version and swap it in atomically
        (the same bytes as a stored version: that version, nothing stored)."""
        return await batch_versions.deploy(self.registry, name, blob)

    async def stored_versions(
        self, name: str
    ) -> tuple[ModelHandle, list[ArtifactVersion], int | None]:
        """A batch model, its stored artifact versions and the active version."""
        return await batch_versions.stored_versions(self.registry, self.find, name)

    async def delete_version(self, name: str, version: int) -> None:
        """Delete a stored artifact version (never the active one)."""
        await batch_versions.delete_version(self.registry, self.find, name, version)

    async def activate(self, name: str, version: int) -> ModelHandle:
        """Make an earlier (or later) stored artifact version the active one (rollback)."""
        return await batch_versions.activate(self.registry, self.find, name, version)

    async def rollback(self, name: str) -> tuple[ModelHandle, int]:
        """Serve the version before the active one (compare-and-set); returns it and the
        version it replaced."""
        return await batch_versions.rollback(self.registry, self.find, name)

    # ------------------------------------------------------------ log application
    async def catch_up(self, h: ModelHandle, target: int | None = None) -> None:
        await log_application.catch_up(self.registry, h, target)

    async def catch_up_locked(self, h: ModelHandle, target: int | None = None) -> None:
        """``catch_up`` for a caller that holds ``h.lock``."""
        await log_application.catch_up_locked(self.registry, h, target)

    async def recover_lost_tail(self, h: ModelHandle) -> None:
        await log_application.recover_lost_tail(self.registry, h)

    # ------------------------------------------------------------ updates
    async def submit_update(self, h: ModelHandle, payload: bytes) -> int:
        """Append durably, apply in log order up to our entry, return its position."""
        return await update_submission.submit_update(self.registry, h, payload)

    async def submit_grouped(self, h: ModelHandle, payload: bytes) -> tuple[int, int | None]:
        """``submit_update`` of a plain update, in one entry with the others that wait
        for the store at the same moment (``service.engine.group_commit``):
        ``(version, correct)``."""
        return await group_commit.submit(self.registry, h, payload)

    async def submit_rewards(
        self, h: ModelHandle, payload: bytes, labels: list[tuple[str, str, str]]
    ) -> int:
        """``submit_labelled`` of an unkeyed reward entry, in one entry with the others
        that wait for the store at the same moment (``service.engine.reward_groups``)."""
        return await reward_groups.submit(self.registry, h, payload, labels)

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
        return await update_submission.submit_labelled(self.registry, h, payload, labels, once)

    async def key_recorded(self, h: ModelHandle, key: str) -> bool:
        return await update_submission.key_recorded(self.registry, h, key)

    async def key_entry(self, h: ModelHandle, key: str) -> tuple[int, int, str] | None:
        """The live idempotency key's ``(position, n, payload_hash)``, or None."""
        return await update_submission.key_entry(self.registry, h, key)

    async def replay(self, h: ModelHandle, key: str, position: int) -> None:
        """Answer a keyed request sent again as the first was (its entry applied here)."""
        await update_submission.replay(self.registry, h, key, position)

    async def submit_update_once(
        self, h: ModelHandle, payload: bytes, key: str, payload_hash: str, n: int
    ) -> tuple[int, int, bool]:
        """``submit_update`` at most once per (model, idempotency ``key``): returns
        ``(position, n, replayed)``."""
        return await update_submission.submit_update_once(
            self.registry, h, payload, key, payload_hash, n
        )

    async def wait_for_version(self, h: ModelHandle, version: int, timeout: float) -> bool:
        """Until this process has applied ``version`` of the model (or ``timeout``)."""
        return await update_submission.wait_for_version(self.registry, h, version, timeout)

    # ------------------------------------------------------------ checkpoints
    async def checkpoint(self, h: ModelHandle) -> bool:
        """Snapshot quickly under the lock, serialise + write off-loop, then trim the log."""
        return await checkpoints.checkpoint(self.registry, h)

    async def periodic(self) -> None:
        """Time-based checkpoints and slow-moving gauges (called about once a second);
        once a minute, the store's expired delayed-label records are swept."""
        await checkpoints.periodic(self.registry)
        self._defaults.tick()
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
        await self.registry.cancel_tasks()
        await self.registry.kernels.close()  # a compile on its way: its child is killed


class _PlacementHooks:
    """What the fleet's placement may do to the engine's table, and nothing more."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._registry = engine.registry

    def held(self) -> Mapping[str, ModelHandle]:
        return self._registry.models

    def is_ready(self) -> bool:
        return self._registry.ready

    async def load(self, name: str, config: dict[str, Any]) -> ModelHandle | None:
        """The model held here, loaded from the store under the catalog lock if it is
        not held yet (None: it could not be loaded)."""
        reg = self._registry
        async with reg.catalog_lock:
            h = reg.models.get(name)
            if h is None:
                h = await catalog.load(reg, name, config)
        return h

    async def catch_up(self, h: ModelHandle) -> None:
        await self._engine.catch_up(h)

    def drop(self, name: str) -> None:
        self._registry.drop(name)

    def store_failed(self, operation: str, error: BaseException) -> None:
        self._registry.health.failed(operation, error)
