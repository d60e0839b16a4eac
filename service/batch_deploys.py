"""Batch models: load the active artifact, deploy a new one, activate a stored version.

A batch model (``BATCH_KINDS``: trained offline, served as-is) has no log: its
state is one stored artifact, and its ``version`` is that artifact's number in
the store. Changing it is never a mutation of the live model: a new adapter is
loaded fully (in a thread, off the event loop) and a new :class:`ModelHandle`
replaces the old one in ``registry.models`` in one assignment, so a request
either sees the old version or the new one, never a half-loaded model.

These are functions over the :class:`~service.registry.Registry` (its store,
settings, health and model table) rather than methods on it, so the registry
keeps to the online log/checkpoint/catalog machinery; it delegates ``deploy``
and ``activate`` here under the same names.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from learners.artifact import ArtifactError, ArtifactTooLarge
from learners.artifact import loads as artifact_loads
from learners.registry import BATCH_KINDS
from service import metrics as M
from service.api.errors import ApiError, invalid, not_found, store_unavailable
from service.model_handle import ModelHandle
from service.models import adapter_class
from service.models.base import ModelAdapter
from service.models.batch import BatchAdapter
from service.settings import Settings
from service.store.base import (
    ActiveVersionChanged,
    ConfigConflict,
    ModelNotFound,
    StoreUnavailable,
    ValueTooLarge,
)

if TYPE_CHECKING:  # the registry imports this module; only the type is needed here
    from service.registry import Registry


async def load_batch(
    registry: Registry, name: str, cls: type[ModelAdapter], config: dict[str, Any]
) -> ModelHandle:
    """A batch model at its active artifact version (loaded fully before use)."""
    store = registry.store
    version = await store.get_active_version(name)
    blob = None if version is None else await store.get_artifact(name, version)
    if version is None or blob is None:
        h = ModelHandle(name, cls.create(config), registry.settings)
    else:
        adapter = await asyncio.to_thread(cls.from_checkpoint, config, blob)
        h = ModelHandle(name, adapter, registry.settings)
        h.version = version
    h._m_version.set(h.version)
    return h


async def deploy(registry: Registry, name: str, blob: bytes) -> tuple[ModelHandle, bool]:
    """Store an artifact as the model's next version and swap it in atomically:
    the new model is loaded fully first; the old one serves until the switch."""
    # Validation and loading hash and copy up to max_artifact_bytes: all of it in
    # a thread, so the loop keeps serving meanwhile.
    kind, config, adapter = await asyncio.to_thread(load_artifact, blob, registry.settings)
    async with switch_lock(registry, name):
        return await _store_and_swap(registry, name, blob, kind, config, adapter)


async def _store_and_swap(
    registry: Registry,
    name: str,
    blob: bytes,
    kind: str,
    config: dict[str, Any],
    adapter: ModelAdapter,
) -> tuple[ModelHandle, bool]:
    store = registry.store
    try:
        created = await store.create_model(name, config)
        generation = await store.get_generation(name) or ""
        version = await store.add_artifact(name, blob, kind, adapter.state_digest())
    except ConfigConflict:
        raise ApiError(
            409, "conflict", f"model {name!r} exists and is not a {kind} model", "name"
        ) from None
    except ModelNotFound:
        raise ApiError(409, "conflict", f"model {name!r} was deleted meanwhile") from None
    except StoreUnavailable as e:
        registry.health.failed("add_artifact", e)
        raise store_unavailable() from e
    except ValueTooLarge as e:
        raise ApiError(413, "too_large", f"artifact: {e}", "artifact") from None
    h = ModelHandle(name, adapter, registry.settings)
    h.version = version
    h.generation = generation
    h._m_version.set(version)
    registry.models[name] = h  # the swap: requests from now on see the new version
    M.DEPLOYS.labels(name).inc()
    registry._update_kind_gauge()
    return h, created


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
        raise ApiError(413, "model_too_large", f"artifact: {e}", "artifact") from None
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
    lock = registry.batch_locks.get(name)
    if lock is None:
        lock = registry.batch_locks[name] = asyncio.Lock()
    return lock


async def activate(registry: Registry, name: str, version: int) -> ModelHandle:
    """Make an earlier (or later) stored artifact version the active one."""
    async with switch_lock(registry, name):
        return await _activate_locked(registry, name, version, None)


async def rollback(registry: Registry, name: str) -> tuple[ModelHandle, int]:
    """Serve the stored version before the active one; returns it and the version it
    replaced. Concurrent rollbacks in this process run one after the other (each goes
    one step further back); across workers the switch is a compare-and-set on the
    store's active version, so of two rollbacks from the same version one is refused
    (409 ``rollback_conflict``) instead of both "rolling back" to the same one."""
    async with switch_lock(registry, name):
        h = await registry.find(name)
        if h.adapter.online:
            raise ApiError(409, "not_batch", f"model {name!r} is an online model; no artifacts")
        try:
            stored = [v.version for v in await registry.store.list_artifacts(name)]
            active = await registry.store.get_active_version(name)
        except StoreUnavailable as e:
            raise store_unavailable() from e
        current = active if active is not None else h.version
        earlier = [v for v in stored if v < current]
        if not earlier:
            raise ApiError(
                409,
                "no_previous_version",
                f"model {name!r} has no version before {current}",
                "name",
            )
        return await _activate_locked(registry, name, max(earlier), current), current


async def _activate_locked(
    registry: Registry, name: str, version: int, expected: int | None
) -> ModelHandle:
    h = await registry.find(name)
    if h.adapter.online:
        raise ApiError(409, "not_batch", f"model {name!r} is an online model; no artifacts")
    try:
        blob = await registry.store.get_artifact(name, version)
        if blob is None:
            raise ApiError(
                404, "version_not_found", f"model {name!r} has no version {version}", "version"
            )
        try:
            adapter = await asyncio.to_thread(type(h.adapter).from_checkpoint, h.config, blob)
        except (ArtifactError, ValueError, KeyError) as e:
            # Stored but unreadable (corrupted at rest): keep serving the active one.
            raise ApiError(
                409,
                "artifact_unreadable",
                f"model {name!r} version {version} cannot be loaded: {e}; "
                f"version {h.version} stays active",
                "version",
            ) from None
        await registry.store.set_active_version(name, version, expected=expected)
    except ActiveVersionChanged as e:
        raise ApiError(
            409,
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
    registry.models[name] = new
    (M.ROLLBACKS if rollback else M.DEPLOYS).labels(name).inc()
    return new
