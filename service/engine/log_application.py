"""A model's log applied here in position order, each entry checked against the chain.

``catch_up_locked`` applies every entry past the handle's version: the ones this
worker holds already (``h.local``, its own appends) without reading them back, the
others read from the store in chunks. A log that starts past the version was
trimmed behind a newer checkpoint, which is loaded instead.

**Integrity.** Redis replicates asynchronously: a failover without ``WAIT`` can lose
the last entries of a log, which a worker had applied (and acknowledged), and later
appends then take those positions again with other entries. Every entry carries the
log's chain head (``service.store.base.chain_head``), so a worker notices (a position
it applied holding another entry, or a log that ends before its version), counts
the entries it had applied that are gone (``learnserve_log_entries_lost_total``),
says so loudly, and rebuilds the model from the store's checkpoint + log, instead
of answering a version it never applied.

Functions over the :class:`~service.engine.registry.Registry` table; the caller
holds the model's lock where a name ends in ``_locked``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from service.engine import followers, update_outcomes
from service.engine.model_handle import ModelHandle, unpack_checkpoint
from service.engine.registry import Registry
from service.observability import metrics as M

log = logging.getLogger("learnserve.registry")


async def catch_up(registry: Registry, h: ModelHandle, target: int | None = None) -> None:
    """Apply the log past ``h.version`` (up to ``target``) under the model's lock; the
    outcomes of entries that failed here are then recorded in the background."""
    h = h.leader or h  # a follower learns its leader's log, in step with it
    async with h.lock:
        await catch_up_locked(registry, h, target)
    update_outcomes.record_failures_soon(registry, h)


async def catch_up_locked(registry: Registry, h: ModelHandle, target: int | None = None) -> None:
    """Apply every entry past ``h.version`` (up to ``target`` if given), checking that
    each one continues the chain of heads of the entries applied before it. An entry
    that promotes a follower not held here (created by another worker moments ago)
    asks for a catalog sync now (``registry.catalog_wanted``): the promotion answers
    ``/predict`` here as soon as an update would, not at the next catalog poll."""
    h = h.leader or h
    serving = h.serving
    try:
        await _catch_up_locked(registry, h, target)
    finally:
        if h.serving != serving and h.serving is not None and h.serving not in h.followers:
            registry.catalog_wanted.set()


async def _catch_up_locked(registry: Registry, h: ModelHandle, target: int | None) -> None:
    while target is None or h.version < target:
        nxt = h.local.pop(h.version + 1, None)
        if nxt is not None:
            if h.chain_breaks(*nxt):
                if not await lost_tail(registry, h, h.version + 1):
                    return
                continue
            h.apply_entry(h.version + 1, *nxt)
            continue
        limit = 256 if target is None else max(1, min(256, target - h.version))
        if h.local:
            # Read up to our next own entry only: it is applied from our copy, which
            # the dry run's decode and checks are kept for (the store's copy would be
            # sent, decoded and checked again).
            ahead = min((p for p in h.local if p > h.version), default=None)
            if ahead is not None:
                limit = min(limit, ahead - h.version - 1)
        entries = await registry.store.read_log(h.name, h.version, limit)
        if not entries:
            # Nothing past our version, or a log trimmed wholly behind a checkpoint at
            # its last entry (say a promotion, then a checkpoint): the store's position
            # tells. Without this look a replica stayed behind until the next append.
            if await registry.store.last_position(h.name) <= h.version:
                return
            # (read again: an entry appended since the first read is no trim)
            entries = await registry.store.read_log(h.name, h.version, limit)
            if not entries:
                await reload_from_checkpoint(registry, h, h.version + 2)
                continue
        if entries[0].position != h.version + 1:
            # The entries we need were trimmed behind a newer checkpoint: reload it.
            await reload_from_checkpoint(registry, h, entries[0].position)
            continue
        broken = False
        try:
            for e in entries:
                if e.position != h.version + 1:
                    raise RuntimeError(f"model {h.name!r}: log gap at {e.position}")
                if h.chain_breaks(e.payload, e.head, e.digest):
                    broken = True
                    break
                # A run of entries: the gauges and waiters once, after it (publish).
                h.apply_entry(e.position, e.payload, e.head, e.digest, publish=False)
                h.local.pop(e.position, None)
        finally:
            h.publish()
        if broken:
            if not await lost_tail(registry, h, h.version + 1):
                return
            continue
        if len(entries) < limit:
            return
        await asyncio.sleep(0)  # a long catch-up lets predicts through between chunks


async def reload_from_checkpoint(registry: Registry, h: ModelHandle, first: int) -> None:
    cp = await registry.store.get_checkpoint(h.name)
    if cp is None or cp.position < first - 1:
        raise RuntimeError(
            f"model {h.name!r}: log starts at {first} but no checkpoint covers {h.version}"
        )
    log.warning("model %r lagged behind the trimmed log; reloading checkpoint", h.name)
    meta, blob = unpack_checkpoint(cp.blob)
    h.adapter = await asyncio.to_thread(type(h.adapter).from_checkpoint, h.config, blob)
    h.version = cp.position
    h.checkpoint_position = cp.position
    h.checkpoint_at = cp.created_at
    h.examples_learned = int(meta.get("examples_learned", h.examples_learned))
    h.head = meta.get("head")
    h.recent_heads.clear()
    h.load_failed(meta)
    h.local = {p: v for p, v in h.local.items() if p > h.version}
    h.load_drift(meta)
    h.serving = meta.get("serving")
    h.notify_advanced()
    await followers.rebuild(registry, h)


async def lost_tail(registry: Registry, h: ModelHandle, position: int) -> bool:
    """The log's entry at ``position`` does not continue the entries applied here:
    the store lost entries this worker applied (a failover of an asynchronously
    replicated Redis) and later appends took their positions. Count them, say so
    loudly, and rebuild the model from the store's checkpoint + log (caller holds
    the lock; it then catches up as usual): answering from this state would serve
    a version the log never had.

    Or the model was deleted and created again elsewhere (another generation): no
    entry was lost. With the same config it is rebuilt the same way, under the new
    generation (read before the state, as a load does); with another config nothing
    is done and False returned: the catalog sync loads it afresh."""
    h = h.leader or h
    generation = await registry.store.get_generation(h.name) or ""
    if generation != h.generation:
        if await registry.store.get_config(h.name) != h.config:
            return False
        log.info("model %r was re-created elsewhere; rebuilding it from the store", h.name)
        h.generation = generation
        await _reset_to_checkpoint(registry, h)
        return True
    if h.reset_at == h.version and position == h.version + 1:
        # We just rebuilt from the store's checkpoint and the log does not go on
        # from it (a checkpoint stored without the head check): trust the log.
        log.error(
            "model %r: the log at %d does not continue the checkpoint at %d; "
            "continuing from the log",
            h.name, position, h.version,
        )  # fmt: skip
        h.head = None
        return True
    lost = await _count_lost(registry, h, position)
    M.LOG_ENTRIES_LOST.labels(h.name).inc(lost)
    log.error(
        "model %r: the store lost %d log entr%s this worker had applied (it was at "
        "version %d; the log now differs at position %d): reloading the model "
        "from the store",
        h.name, lost, "y" if lost == 1 else "ies", h.version, position,
    )  # fmt: skip
    await _reset_to_checkpoint(registry, h)
    return True


async def store_lost_tail(registry: Registry, h: ModelHandle) -> bool:
    """True when the store does not hold the entry ``h`` is at (its log lost it):
    one read of that entry, compared by chain head."""
    h = h.leader or h  # a follower's log is its leader's
    if h.version == 0 or h.head is None:
        return False
    entries = await registry.store.read_log(h.name, h.version - 1, 1)
    if entries and entries[0].position == h.version:
        return bool(entries[0].head) and entries[0].head != h.head
    return await registry.store.last_position(h.name) < h.version  # else trimmed: fine


async def recover_lost_tail(registry: Registry, h: ModelHandle) -> None:
    """The store's log ends before ``h.version`` (seen by the periodic lag check):
    rebuild the model from the store if it is still the same model."""
    h = h.leader or h
    async with h.lock:
        if registry.models.get(h.name) is not h:
            return
        if await registry.store.get_generation(h.name) != h.generation:
            return  # deleted and created again: the catalog sync reloads it
        if await store_lost_tail(registry, h):
            last = await registry.store.last_position(h.name)
            await lost_tail(registry, h, min(last + 1, h.version))
            await catch_up_locked(registry, h)


async def _count_lost(registry: Registry, h: ModelHandle, position: int) -> int:
    """How many of the entries applied here the store no longer holds (as far as
    ``h.recent_heads`` reaches back; at least 1)."""
    recent = dict(h.recent_heads)
    if not recent:
        return max(1, h.version - position + 1)
    first = min(recent)
    stored = {e.position: e.head for e in await registry.store.read_log(h.name, first - 1, 1000)}
    for p in range(first, h.version + 1):
        if p in recent and stored.get(p) != recent[p]:
            return h.version - p + 1
    return max(1, h.version - position + 1)


async def _reset_to_checkpoint(registry: Registry, h: ModelHandle) -> None:
    """Rebuild ``h`` in place from the store's checkpoint (or from nothing): the
    caller then replays the log from there."""
    cp = await registry.store.get_checkpoint(h.name)
    if cp is None:
        adapter = type(h.adapter).create(h.config)
        meta: dict[str, Any] = {}
        position = 0
    else:
        meta, blob = unpack_checkpoint(cp.blob)
        adapter = await asyncio.to_thread(type(h.adapter).from_checkpoint, h.config, blob)
        position = cp.position
    h.adapter = adapter
    h.version = position
    h.checkpoint_position = position
    h.checkpoint_at = None if cp is None else cp.created_at
    h.load_meta(meta)
    h.head = meta.get("head") if cp is not None else ""
    h.reset_at = position
    h.recent_heads.clear()
    h.local.clear()
    h._m_version.set(position)
    h.notify_advanced()
    await followers.rebuild(registry, h)
