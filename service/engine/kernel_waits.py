"""Models that wait for their numba kernels: which families a model runs, waiting for
those the cache holds, deferring those that must be compiled.

A model is loaded once the families its config runs
(:func:`service.models.warmup.families_for`) are loaded here. Those numba's cache holds
for this code load in about a second and are waited for; one that must be compiled (a
child process, :mod:`service.models.kernel_loader`) takes minutes: the model is listed
in ``registry.pending`` (its requests answer 503 + Retry-After naming the family), the
other models are served, and it is loaded as soon as the family is ready.

Functions over the :class:`~service.engine.registry.Registry` table; ``load`` is the
catalog's (:func:`service.engine.catalog.load`), given, never imported.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from service.engine.registry import Registry
from service.errors import KernelsCompiling, Kind, ServiceError
from service.models.kernel_families import READY, marker_valid
from service.models.warmup import families_for
from service.store.base import StoreUnavailable

Load = Callable[[Registry, str, dict[str, Any]], Awaitable[Any]]


async def kernels_at_start(registry: Registry, configs: list[dict[str, Any]]) -> None:
    """Start bringing in every family the models run (required ones first) and wait
    for those numba's cache holds for this code (about a second each)."""
    required: list[str] = []
    optional: list[str] = []
    for config in configs:
        req, opt = families_for(config)
        required += [f for f in req if f not in required]
        optional += [f for f in opt if f not in optional]
    needed = required + [f for f in optional if f not in required]
    if not needed:
        return
    cached = await asyncio.to_thread(lambda: [f for f in needed if f in READY or marker_valid(f)])
    registry.kernels.request(needed)
    if cached:
        registry.waiting_for = "loading numba kernels from the cache: " + ", ".join(cached)
        with contextlib.suppress(RuntimeError):  # its models say so, one by one
            await registry.kernels.wait(cached, None)


async def kernels_ready(registry: Registry, name: str, config: dict[str, Any], wait: float) -> None:
    """Return once the kernels model ``name`` runs are loaded here, else raise
    ``KernelsCompiling`` (503 + Retry-After naming them). Families numba's cache holds
    for this code are waited for (about a second each), the scanners among them (the
    model's first body is scanned); one that must be compiled, up to ``wait`` s."""
    required, optional = families_for(config)
    kernels = registry.kernels
    if kernels.ready(required + optional):
        return
    kernels.request(required + optional)
    cached = await asyncio.to_thread(
        lambda: [f for f in required + optional if f not in READY and marker_valid(f)]
    )
    compiling = [f for f in required if f not in READY and f not in cached]
    try:
        await kernels.wait(cached, _LOAD_LIMIT, check=[f for f in cached if f in required])
        if compiling and wait > 0:
            await kernels.wait(compiling, wait)
    except RuntimeError as e:  # the compile failed (and is tried again on the next need)
        raise ServiceError(
            Kind.UNAVAILABLE, "kernels_failed", f"model {name!r}: {e}", "model", retry_after=30
        ) from None
    if not kernels.ready(required):
        raise KernelsCompiling(name, required, kernels.describe(required))


# A family the cache holds loads in about a second; one taking longer than this is being
# compiled after all (another CPU than the marker's): its models wait as for a compile.
_LOAD_LIMIT = 120.0


def defer(registry: Registry, name: str, families: list[str], load: Load) -> None:
    """Model ``name`` waits for ``families``: listed as pending, loaded by ``load``
    (the catalog's) once they are."""
    first = name not in registry.pending
    registry.pending[name] = families
    registry.failed.pop(name, None)
    if first:
        registry.spawn(_load_when_compiled(registry, name, load))


async def _load_when_compiled(registry: Registry, name: str, load: Load) -> None:
    while (families := registry.pending.get(name)) is not None:
        try:
            await registry.kernels.wait(families, None)
        except RuntimeError as e:
            if registry.pending.pop(name, None) is not None:
                registry.failed[name] = f"kernels: {e}"
            return
        async with registry.catalog_lock:
            if registry.pending.get(name) != families:
                continue  # deleted, or waits for others now
            del registry.pending[name]
            if name in registry.models:
                return
            try:
                config = await registry.store.get_config(name)
                if config is not None:
                    await load(registry, name, config)  # (may defer it again: a new task)
                again = False
            except StoreUnavailable:
                again = registry.pending.setdefault(name, families) is families
        if again:
            await asyncio.sleep(1.0)  # the store did not answer: try again
            continue
        registry.update_kind_gauge()
        return
