"""Which models this process holds: restored at start, created, deleted, and kept in
step with the store's catalog (models other workers created, deleted or re-created).

A model is loaded from its checkpoint and the log after it (an online model) or from
its active artifact (a batch model, ``service.engine.batch_versions``); one whose stored state
cannot be read is listed in ``registry.failed`` and not served, without keeping the
others offline. The catalog epoch makes a sync cheap when nothing changed.

Functions over the :class:`~service.engine.registry.Registry` table, under its
catalog lock (rule 2).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

from service.engine import (
    batch_versions,
    followers,
    kernel_waits,
    log_application,
    update_outcomes,
)
from service.engine.model_handle import ModelHandle, unpack_checkpoint
from service.engine.registry import Registry
from service.errors import KernelsCompiling, Kind, ServiceError, not_found, store_unavailable
from service.models import config_compare
from service.models.base import ModelAdapter
from service.models.kinds import adapter_class
from service.observability import metrics as M
from service.store.base import (
    ConfigConflict,
    LeaderGone,
    ModelInUse,
    StoreUnavailable,
    ValueTooLarge,
)

log = logging.getLogger("learnserve.registry")


async def restore_all(registry: Registry) -> None:
    """Load every model this worker owns from the store (the others load on demand),
    then mark the process ready. The kernels they run are loaded first where numba's
    cache has them; a model whose kernels must be compiled waits for them in
    ``registry.pending`` (503 + Retry-After) while the others are served."""
    async with registry.catalog_lock:
        registry.waiting_for = "restoring models: reading the catalog from the store"
        epoch = await registry.store.catalog_epoch()
        configs = leaders_first(await registry.store.list_models())
        registry.leader_names = followers.leader_names(configs)
        owned = [c for n, c in configs.items() if registry.owns(n)]
        await kernel_waits.kernels_at_start(registry, owned)
        for i, (name, config) in enumerate(configs.items(), 1):
            if name in registry.models or not registry.owns(name):  # (others: on demand)
                continue
            registry.waiting_for = f"restoring models: {name!r} ({i}/{len(configs)})"
            await load(registry, name, config)
        registry.epoch = epoch
    # Start-up leaves ~150k long-lived objects (modules, numba, pydantic, the
    # models); a full collection walks them all (~40 ms measured, 50-140 ms the
    # first time: an event-loop stall) though they never die. Frozen, the
    # collector scans only what came after (a full collection then takes ~0 ms).
    gc.collect()
    gc.freeze()
    registry.ready = True
    registry.waiting_for = ""
    registry.update_kind_gauge()
    log.info("restored %d model(s); ready", len(registry.models))


def leaders_first(configs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The catalog with every leader before its followers (a follower attaches to its
    leader's handle, which must be loaded first)."""
    return dict(sorted(configs.items(), key=lambda kv: followers.leader_of(kv[1]) is not None))


async def load(
    registry: Registry, name: str, config: dict[str, Any], reattach: bool = True
) -> ModelHandle | None:
    """Build a model from its checkpoint + log and install it (replacing any old one);
    a leader's followers held here (or owned) are loaded again onto the new handle."""
    try:
        cls = adapter_class(config.get("kind", "linear"))
    except ValueError:
        log.error("model %r has unknown kind %r; not loaded", name, config.get("kind"))
        return None
    old = registry.models.get(name)
    if old is not None and old.generation != (await registry.store.get_generation(name) or ""):
        M.forget_model(name)  # deleted and re-created elsewhere: its series start anew
    try:
        h = await restore_handle(registry, name, cls, config)
    except KernelsCompiling as e:  # loaded when they are ready; the others go on
        registry.models.pop(name, None)
        kernel_waits.defer(registry, name, e.families, load)
        return None
    except (StoreUnavailable, asyncio.CancelledError):
        raise
    except Exception as e:
        # A model whose stored state cannot be read (corrupt checkpoint, a kind
        # this version cannot load...) must not keep every other model offline.
        log.exception("model %r could not be restored; it is not served", name)
        registry.failed[name] = f"{type(e).__name__}: {e}"
        return None
    registry.failed.pop(name, None)
    registry.install(h)
    if reattach:
        await _reattach(registry, h)
    return h


async def _reattach(registry: Registry, h: ModelHandle) -> None:
    """A leader loaded (again): its followers held here, or owned, follow this handle."""
    mine = [f for f, lead in registry.leader_names.items() if lead == h.name]
    for f in mine:
        if f in h.followers or (f not in registry.models and not registry.owns(f)):
            continue
        config = await registry.store.get_config(f)
        if config is not None:
            await load(registry, f, config, reattach=False)


async def restore_handle(
    registry: Registry, name: str, cls: type[ModelAdapter], config: dict[str, Any]
) -> ModelHandle:
    await kernel_waits.kernels_ready(registry, name, config, 0.0)
    # Read before the state: if the model is re-created while we load, the handle
    # carries the old generation and the next catalog sync reloads it.
    generation = await registry.store.get_generation(name) or ""
    if not cls.online:
        h = await batch_versions.load_batch(registry, name, cls, config)
        h.generation = generation
        return h
    lead = followers.leader_of(config)
    if lead is not None:
        leader = registry.models.get(lead)
        if leader is None:  # not held here (a follower asked of a member not owning it)
            lconfig = await registry.store.get_config(lead)
            leader = None if lconfig is None else await load(registry, lead, lconfig, False)
            if leader is not None and not registry.owns(lead):
                registry.on_guest(leader)
        if leader is None and lead in registry.pending:  # its leader waits for kernels
            families = registry.pending[lead]
            raise KernelsCompiling(name, families, registry.kernels.describe(families))
        if leader is None or leader.leader is not None or not leader.adapter.online:
            raise RuntimeError(f"model {name!r} follows {lead!r}, which is not loaded here")
        async with leader.lock:
            return await followers.restore_follower_locked(registry, leader, name, cls, config)
    cp = await registry.store.get_checkpoint(name)
    if cp is not None:
        meta, blob = unpack_checkpoint(cp.blob)
        adapter = await asyncio.to_thread(cls.from_checkpoint, config, blob)
        h = ModelHandle(name, adapter, registry.settings)
        h.version = cp.position
        h.checkpoint_position = cp.position
        h.checkpoint_at = cp.created_at
        h.load_meta(meta)
        h.head = meta.get("head")
    else:
        h = ModelHandle(name, cls.create(config), registry.settings)
    h.generation = generation
    h.owned = registry.owns(name)  # before the catch-up: its entries count in this role
    h._m_version.set(h.version)
    async with h.lock:
        await log_application.catch_up_locked(registry, h)
    update_outcomes.record_failures_soon(registry, h)
    return h


async def create(
    registry: Registry,
    name: str,
    cls: type[ModelAdapter],
    config: dict[str, Any],
    checkpoint: bytes | memoryview | None = None,
) -> tuple[ModelHandle, bool]:
    """Create the model (``checkpoint``: its starting state, an import, stored with it
    atomically) and load it here as every worker does: from the store. An existing
    model of that name is the answer when it is the same model (its config with
    defaults filled in, ``service.models.config_compare``), else a 409 naming the
    first field that differs."""
    asked = config
    try:
        try:
            if isinstance(asked.get("follows"), str):  # a challenger: from the leader's log
                config, created = await _create_follower(registry, name, asked)
            elif checkpoint is None:
                created = await registry.store.create_model(name, config)
            else:
                created = await registry.store.create_model_from_checkpoint(
                    name, config, checkpoint
                )
        except ConfigConflict:
            config = await _same_model(registry, name, config)
            created = False
        generation = await registry.store.get_generation(name) or ""
    except StoreUnavailable as e:
        registry.health.failed("create_model", e)
        raise store_unavailable() from e
    except ValueTooLarge as e:
        raise ServiceError(Kind.TOO_LARGE, "too_large", f"artifact: {e}", "artifact") from None
    lead = followers.leader_of(config)
    if lead is not None:  # placed with its leader from now on (the sync says so too)
        registry.leader_names[name] = lead
    try:  # (before the catalog lock: a compile must not hold the other models' catalog)
        await kernel_waits.kernels_ready(
            registry, name, config, registry.settings.kernel_wait_seconds
        )
    except KernelsCompiling as e:
        kernel_waits.defer(registry, name, e.families, load)  # loaded once they are
        raise
    h = registry.models.get(name)
    if h is None or h.config != config or h.generation != generation:
        async with registry.catalog_lock:
            h = registry.models.get(name)
            if h is None or h.config != config or h.generation != generation:
                if h is not None and h.generation != generation:
                    M.forget_model(name)  # a new model of that name: new series
                try:
                    h = await restore_handle(registry, name, cls, config)
                except StoreUnavailable as e:
                    # Created (or found) in the store; any worker loads it later.
                    registry.health.failed("create_model", e)
                    raise store_unavailable() from e
                registry.install(h)
                if not h.owned:
                    registry.on_guest(h)
    registry.update_kind_gauge()
    return h, created


async def _create_follower(
    registry: Registry, name: str, asked: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """The follower ``asked`` for, created in one atomic step with the check that its
    leader exists (``Store.create_follower``): a 409 when the leader was deleted
    meanwhile; its ``from_version`` read again when the leader's log was trimmed past
    it meanwhile."""
    for _ in range(5):
        config, generation = await followers.follower_config(registry, name, asked)
        try:
            return config, await registry.store.create_follower(name, config, generation)
        except ConfigConflict:
            return await _same_model(registry, name, config), False
        except LeaderGone as e:
            if not e.trimmed:
                raise followers.leader_gone(name, e.leader) from None
    raise followers.leader_gone(name, asked["follows"])


async def _same_model(registry: Registry, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """The stored config of ``name`` when it is the model ``config`` asks for (the two
    differ in spelled-out defaults only); else a 409 naming the field and both values."""
    stored = await registry.store.get_config(name)
    found = None if stored is None else config_compare.difference(stored, config)
    if stored is not None and found is None:
        return stored
    if found is None:  # deleted meanwhile: nothing to compare with (send the PUT again)
        message, field = f"model {name!r} was being deleted or re-created; send it again", "name"
    else:
        message = config_compare.conflict_message(name, *found)
        field = config_compare.field_of(found[0], config)
    raise ServiceError(Kind.CONFLICT, "conflict", message, field)


async def delete(registry: Registry, name: str) -> None:
    # Under the catalog lock: a catalog sync that read the list before the store
    # deleted the model would load it again after our drop (a deleted model back in
    # this worker, its series on /metrics, until the next sync).
    async with registry.catalog_lock:
        await followers.check_delete(registry, name)
        try:
            existed = await registry.store.delete_model(name)
        except ModelInUse as e:  # the store's atomic check (a race the one above missed)
            raise followers.in_use(name, e) from None
        except StoreUnavailable as e:
            registry.health.failed("delete_model", e)
            raise store_unavailable() from e
        pending = registry.pending.pop(name, None) is not None
        local = registry.drop(name) or pending
        local = registry.failed.pop(name, None) is not None or local
    if not existed and not local:
        raise not_found(name)


async def sync_catalog(registry: Registry) -> None:
    """Pick up models created or deleted by other workers (cheap when nothing changed)."""
    epoch = await registry.store.catalog_epoch()
    if epoch == registry.epoch:
        return
    async with registry.catalog_lock:
        configs = leaders_first(await registry.store.list_models())
        registry.leader_names = followers.leader_names(configs)
        generations = await registry.store.list_generations()
        for name in [n for n in registry.failed if n not in configs]:
            del registry.failed[name]
        for name in [n for n in registry.pending if n not in configs]:
            del registry.pending[name]
        for name in [n for n in registry.models if n not in configs]:
            log.info("model %r was deleted elsewhere; dropping it", name)
            registry.drop(name)
        for name, config in configs.items():
            h = registry.models.get(name)
            stale = h is not None and (
                h.config != config or h.generation != generations.get(name, h.generation)
            )
            if h is not None and not stale:
                if h.leader is not None:  # learns its leader's log: checked with it
                    continue
                if h.adapter.online:
                    # The same model (same generation) whose log ends before what
                    # we applied: the store lost the log's tail. Rebuilt in place.
                    if await registry.store.last_position(name) < h.version:
                        await log_application.recover_lost_tail(registry, h)
                    continue
                else:  # another worker deployed or rolled back
                    stale = await registry.store.get_active_version(name) != h.version
            if (h is None and registry.owns(name)) or stale:
                await load(registry, name, config)
        registry.epoch = epoch
    registry.update_kind_gauge()


async def reload(registry: Registry, name: str) -> ModelHandle:
    """Load the model afresh from the store (our copy belongs to a deleted one)."""
    async with registry.catalog_lock:
        config = await registry.store.get_config(name)
        if config is None:
            registry.drop(name)
            raise not_found(name)
        log.info("model %r was re-created elsewhere; reloading it", name)
        h = await load(registry, name, config)
    if h is None:
        raise registry.missing(name)
    registry.update_kind_gauge()
    return h
