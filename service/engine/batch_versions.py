"""Batch models: load the active artifact, deploy a new one, activate a stored version.

A batch model (``BATCH_KINDS``: trained offline, served as-is) has no log: its
state is one stored artifact, and its ``version`` is that artifact's number in
the store. Changing it is never a mutation of the live model: a new adapter is
loaded fully (in a thread, off the event loop) and a new :class:`ModelHandle`
replaces the old one in ``registry.models`` in one assignment, so a request
either sees the old version or the new one, never a half-loaded model.

Functions over the :class:`~service.engine.registry.Registry` table; the verbs that
start from a model's name take ``find`` (the engine's lookup, which picks up other
workers' catalog changes) rather than looking the model up themselves. Swaps follow
the registry's rule 3 (:meth:`~service.engine.registry.Registry.switch_lock`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from learners.artifact import ArtifactError, ArtifactTooLarge
from learners.artifact import loads as artifact_loads
from learners.registry import BATCH_KINDS
from service.engine.model_handle import ModelHandle
from service.engine.registry import Registry
from service.errors import Kind, ServiceError, conflict, invalid, not_found, store_unavailable
from service.models.base import ModelAdapter
from service.models.batch import BatchAdapter
from service.models.kinds import adapter_class
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import (
    ActiveVersionChanged,
    ArtifactActive,
    ArtifactVersion,
    ConfigConflict,
    ModelNotFound,
    Store,
    StoreUnavailable,
    ValueTooLarge,
)

log = logging.getLogger("service.batch_deploys")  # the logger's name before the move

Find = Callable[[str], Awaitable[ModelHandle]]


async def load_batch(
    registry: Registry, name: str, cls: type[ModelAdapter], config: dict[str, Any]
) -> ModelHandle:
    """A batch model at its active artifact version (loaded fully before use)."""
    store = registry.store
    version, blob = await _active_artifact(store, name)
    if version is None or blob is None:
        h = ModelHandle(name, cls.create(config), registry.settings)
    else:
        adapter = await asyncio.to_thread(cls.from_checkpoint, config, blob)
        h = ModelHandle(name, adapter, registry.settings)
        h.version = version
    h._m_version.set(h.version)
    return h


async def _active_artifact(store: Store, name: str) -> tuple[int | None, bytes | None]:
    """The active version and its bytes. The active version is never deleted, but it can
    change (and the old one be pruned) between the two reads: then read again."""
    for _ in range(10):
        version = await store.get_active_version(name)
        if version is None:
            return None, None
        blob = await store.get_artifact(name, version)
        if blob is not None:
            return version, blob
        if await store.get_active_version(name) == version:  # the model went meanwhile
            return version, None
    raise StoreUnavailable(f"model {name!r}: the active artifact version kept changing")


class Deployed(NamedTuple):
    handle: ModelHandle
    created: bool  # the deploy created the model
    stored: bool  # a new version was stored (False: the same bytes as a stored version)


async def deploy(registry: Registry, name: str, blob: bytes) -> Deployed:
    """Store an artifact as the model's next version and swap it in atomically:
    the new model is loaded fully first; the old one serves until the switch. The same
    bytes as a stored version make that version active instead (nothing stored)."""
    # Validation and loading hash and copy up to max_artifact_bytes: all of it in
    # a thread, so the loop keeps serving meanwhile.
    kind, config, adapter = await asyncio.to_thread(load_artifact, blob, registry.settings)
    async with switch_lock(registry, name):
        done = await _store_and_swap(registry, name, blob, kind, config, adapter)
    if done.stored:
        await prune(registry, name, registry.settings.artifact_retention)
    return done


async def _store_and_swap(
    registry: Registry,
    name: str,
    blob: bytes,
    kind: str,
    config: dict[str, Any],
    adapter: ModelAdapter,
) -> Deployed:
    store = registry.store
    try:
        created = await store.create_model(name, config)
        generation = await store.get_generation(name) or ""
        version, stored = await store.put_artifact(name, blob, kind, adapter.state_digest())
    except ConfigConflict:
        raise ServiceError(
            Kind.CONFLICT, "conflict", f"model {name!r} exists and is not a {kind} model", "name"
        ) from None
    except ModelNotFound:
        raise ServiceError(
            Kind.CONFLICT, "conflict", f"model {name!r} was deleted meanwhile"
        ) from None
    except StoreUnavailable as e:
        registry.health.failed("add_artifact", e)
        raise store_unavailable() from e
    except ValueTooLarge as e:
        raise ServiceError(Kind.TOO_LARGE, "too_large", f"artifact: {e}", "artifact") from None
    current = registry.models.get(name)
    if (
        not stored
        and current is not None
        and current.version == version
        and current.generation == generation
    ):
        return Deployed(current, created, stored)  # already serving these bytes
    h = ModelHandle(name, adapter, registry.settings)
    h.version = version
    h.generation = generation
    h._m_version.set(version)
    registry.install(h)  # the swap: requests from now on see the new version
    M.DEPLOYS.labels(name).inc()
    registry.update_kind_gauge()
    return Deployed(h, created, stored)


def load_artifact(blob: bytes, settings: Settings) -> tuple[str, dict[str, Any], ModelAdapter]:
    """Validate an uploaded artifact and load it (runs in a thread).

    The loaders are the trust boundary: anything malformed is a 422 naming what is
    wrong; a model whose loading would exceed ``max_model_bytes`` (computed from its
    header before anything is allocated) a 413, as for an oversized online model."""
    limit = settings.max_model_bytes
    try:
        kind = peek_kind(blob, limit)
        if kind not in BATCH_KINDS:
            raise invalid(
                f"artifact: kind {kind!r} is not a batch model kind {sorted(BATCH_KINDS)}; "
                "online models are created with PUT /models/{name}",
                "artifact",
            )
        try:
            cls = adapter_class(kind)
        except ValueError:
            raise invalid(f"artifact: the service cannot serve kind {kind!r}", "artifact") from None
        if not issubclass(cls, BatchAdapter):  # BATCH_KINDS map to batch adapters
            raise invalid(f"artifact: kind {kind!r} is not served as a batch model", "artifact")
        config = cls.normalize_config({}, settings)
        adapter = cls.from_artifact(config, blob, max_bytes=limit)
    except ArtifactTooLarge as e:
        raise ServiceError(
            Kind.TOO_LARGE, "model_too_large", f"artifact: {e}", "artifact"
        ) from None
    except ArtifactError as e:
        raise invalid(f"artifact: {e}", "artifact") from None
    except (ValueError, KeyError) as e:  # a loader's gap; still the client's artifact
        raise invalid(f"artifact: cannot be loaded: {e}", "artifact") from None
    return kind, config, adapter


def peek_kind(blob: bytes, max_bytes: int) -> str:
    """The kind of a container that reads (magic, version, checksum, header, arrays)."""
    return artifact_loads(blob, max_bytes=max_bytes).kind


def switch_lock(registry: Registry, name: str) -> asyncio.Lock:
    """Serialises, per model in this process, the store write of a deploy/activation and
    the swap of ``registry.models``, so the swaps happen in the order of the writes (a
    slower load finishing last cannot put back an older version)."""
    return registry.switch_lock(name)


async def activate(registry: Registry, find: Find, name: str, version: int) -> ModelHandle:
    """Make an earlier (or later) stored artifact version the active one."""
    async with switch_lock(registry, name):
        return await _activate_locked(registry, find, name, version, None)


async def rollback(registry: Registry, find: Find, name: str) -> tuple[ModelHandle, int]:
    """Serve the stored version before the active one; returns it and the version it
    replaced. Concurrent rollbacks in this process run one after the other (each goes
    one step further back); across workers the switch is a compare-and-set on the
    store's active version, so of two rollbacks from the same version one is refused
    (409 ``rollback_conflict``) instead of both "rolling back" to the same one."""
    async with switch_lock(registry, name):
        h = await find(name)
        if h.adapter.online:
            raise ServiceError(
                Kind.CONFLICT, "not_batch", f"model {name!r} is an online model; no artifacts"
            )
        try:
            stored = [v.version for v in await registry.store.list_artifacts(name)]
            active = await registry.store.get_active_version(name)
        except StoreUnavailable as e:
            raise store_unavailable() from e
        current = active if active is not None else h.version
        earlier = [v for v in stored if v < current]
        if not earlier:
            raise ServiceError(
                Kind.CONFLICT,
                "no_previous_version",
                f"model {name!r} has no version before {current}",
                "name",
            )
        return await _activate_locked(registry, find, name, max(earlier), current), current


async def _activate_locked(
    registry: Registry, find: Find, name: str, version: int, expected: int | None
) -> ModelHandle:
    h = await find(name)
    if h.adapter.online:
        raise ServiceError(
            Kind.CONFLICT, "not_batch", f"model {name!r} is an online model; no artifacts"
        )
    try:
        blob = await registry.store.get_artifact(name, version)
        if blob is None:
            raise ServiceError(
                Kind.NOT_FOUND,
                "version_not_found",
                f"model {name!r} has no version {version}",
                "version",
            )
        try:
            adapter = await asyncio.to_thread(type(h.adapter).from_checkpoint, h.config, blob)
        except (ArtifactError, ValueError, KeyError) as e:
            # Stored but unreadable (corrupted at rest): keep serving the active one.
            raise ServiceError(
                Kind.CONFLICT,
                "artifact_unreadable",
                f"model {name!r} version {version} cannot be loaded: {e}; "
                f"version {h.version} stays active",
                "version",
            ) from None
        await registry.store.set_active_version(name, version, expected=expected)
    except ActiveVersionChanged as e:
        raise ServiceError(
            Kind.CONFLICT,
            "rollback_conflict",
            f"model {name!r}: the active version changed from {e.expected} to {e.active} "
            "while rolling back (a concurrent rollback or deploy); nothing was changed, "
            "check GET /models/{name}/versions and retry if still wanted",
            "name",
        ) from None
    except StoreUnavailable as e:
        registry.health.failed("set_active_version", e)
        raise store_unavailable() from e
    except ModelNotFound:
        raise not_found(name) from None
    new = ModelHandle(name, adapter, registry.settings)
    new.version = version
    new.generation = h.generation
    new._m_version.set(version)
    rollback = version < h.version
    registry.install(new)
    (M.ROLLBACKS if rollback else M.DEPLOYS).labels(name).inc()
    return new


# ------------------------------------------------------------ stored versions


def versions_to_prune(versions: list[int], active: int | None, keep: int) -> list[int]:
    """The versions beyond the ``keep`` newest (``keep`` 0: none); the active one always
    stays and counts among the kept.

    >>> versions_to_prune([1, 2, 3, 4, 5], 5, 2)
    [1, 2, 3]
    >>> versions_to_prune([1, 2, 3, 4, 5], 2, 2)  # rolled back to 2: it stays, with 5
    [1, 3, 4]
    """
    if keep <= 0:
        return []
    newest = sorted(versions, reverse=True)
    kept = [v for v in newest if v == active]
    kept += [v for v in newest if v != active][: keep - len(kept)]
    return sorted(v for v in versions if v not in kept)


async def prune(registry: Registry, name: str, keep: int) -> list[int]:
    """Delete the stored versions beyond the ``keep`` newest (the active one stays).

    Runs after a deploy; a failure only leaves an old version stored for the next deploy
    to prune. The store refuses, atomically, to delete the active version, so a
    concurrent rollback to a version listed here keeps it (skipped). Another worker
    serving a pruned version from memory switches at its next catalog sync (the deploy
    changed the active version), and a rollback can only reach a kept version."""
    if keep <= 0:
        return []
    store = registry.store
    try:
        stored = [v.version for v in await store.list_artifacts(name)]
        active = await store.get_active_version(name)
        deleted = []
        for v in versions_to_prune(stored, active, keep):
            try:
                if await store.delete_artifact(name, v):
                    deleted.append(v)
            except ArtifactActive:
                continue  # activated meanwhile: it stays
    except (StoreUnavailable, ModelNotFound):
        return []
    if deleted:
        log.info("model %r: pruned artifact versions %s (keeping %d)", name, deleted, keep)
    return deleted


async def stored_versions(
    registry: Registry, find: Find, name: str
) -> tuple[ModelHandle, list[ArtifactVersion], int | None]:
    """A batch model's handle, its stored artifact versions and the active one."""
    h = await find(name)
    if h.adapter.online:
        raise conflict("not_batch", f"model {name!r} is an online model; no artifacts")
    try:
        versions = await registry.store.list_artifacts(name)
        active = await registry.store.get_active_version(name)
    except StoreUnavailable as e:
        raise store_unavailable() from e
    return h, versions, active


async def delete_version(registry: Registry, find: Find, name: str, version: int) -> None:
    """``DELETE /models/{name}/versions/{version}``: 404 unknown, 409 the active one."""
    h = await find(name)
    if h.adapter.online:
        raise ServiceError(
            Kind.CONFLICT, "not_batch", f"model {name!r} is an online model; no artifacts"
        )
    try:
        deleted = await registry.store.delete_artifact(name, version)
    except ArtifactActive:
        raise ServiceError(
            Kind.CONFLICT,
            "active_version",
            f"model {name!r}: version {version} is the active version; activate another "
            "one first (PUT /models/{name}/active)",
            "version",
        ) from None
    except ModelNotFound:
        raise not_found(name) from None
    except StoreUnavailable as e:
        registry.health.failed("delete_artifact", e)
        raise store_unavailable() from e
    if not deleted:
        raise ServiceError(
            Kind.NOT_FOUND,
            "version_not_found",
            f"model {name!r} has no version {version}",
            "version",
        )
