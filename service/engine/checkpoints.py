"""Checkpoints of online models: a snapshot under the model's lock, serialised and
written off the event loop, then the log before it trimmed.

A checkpoint is the learner's state plus the log position it covers (and the
handle's bookkeeping: examples learned, the online-metrics window), written
atomically by the store. Restoring loads the latest one and replays the log
after it. The copy is taken in a thread while the lock is held (nothing mutates
the model meanwhile; predicts, which read it, keep flowing), and the linear
learners serialise into a buffer without holding the GIL, so a 2**20-dimension
model's checkpoint does not stall the loop (``bench/http.py`` measures it).

Functions over the :class:`~service.engine.registry.Registry` table.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from service.engine.log_application import recover_lost_tail
from service.engine.model_handle import ModelHandle, pack_checkpoint
from service.engine.registry import Registry
from service.models.base import state_nbytes
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import LogDiverged, ModelNotFound, StoreUnavailable

log = logging.getLogger("learnserve.registry")


def _pack(meta: dict[str, Any], serialise: Callable[[], bytes | memoryview]) -> memoryview:
    return pack_checkpoint(meta, serialise())


async def checkpoint(registry: Registry, h: ModelHandle) -> bool:
    """Snapshot quickly under the lock, serialise + write off-loop, then trim the log."""
    if not h.adapter.online or h.checkpointing or h.version <= h.checkpoint_position:
        h.checkpoint_outcome = "not_needed"
        return False
    if h.leader is not None:  # a follower is checkpointed with its leader
        h.checkpoint_outcome = "follower"
        return False
    h.checkpoint_outcome = "failed"  # until it is known
    h.checkpointing = True
    t0 = time.perf_counter()
    settings = registry.settings
    try:
        # One writer per model: the others would write the same state again.
        if not await registry.store.try_lease(
            h.name, "checkpoint", registry.member_id, settings.checkpoint_lease_seconds
        ):
            now = time.monotonic()
            h.lease_retry_at = now + settings.checkpoint_lease_seconds / 2
            h.next_time_checkpoint = now + settings.checkpoint_every_seconds
            h.checkpoint_outcome = "leased_elsewhere"
            return False
        async with h.lock:
            position = h.version
            meta = h.checkpoint_meta()
            # The copy runs in a thread: the loop keeps serving (predicts read the
            # model, which nothing mutates while we hold the lock).
            serialise = await asyncio.to_thread(h.adapter.snapshot)
            # Followers at the same position (they move in lockstep under this lock).
            fs = [(f, f.checkpoint_meta(), await asyncio.to_thread(f.adapter.snapshot))
                  for f in h.followers.values() if f.version == position]  # fmt: skip
        blob = await asyncio.to_thread(lambda: pack_checkpoint(meta, serialise()))
        # With the handle's generation: a stale handle (the model was deleted and
        # created again by another worker) must not checkpoint into the new model.
        # With the chain head: a worker whose applied entries the store has lost (a
        # failover) must not make its state the checkpoint everybody restores from.
        await registry.store.put_checkpoint(
            h.name, position, blob, h.generation, head=meta.get("head")
        )
        # Each follower's, before the log they read from is trimmed (its head was
        # checked with the leader's: the same log).
        for f, f_meta, f_serialise in fs:
            f_blob = await asyncio.to_thread(_pack, f_meta, f_serialise)
            await registry.store.put_checkpoint(f.name, position, f_blob, f.generation)
            f.checkpoint_position = position
            f.checkpoint_at = time.time()
        upto = position - registry.settings.log_retain_entries
        # The store never trims past what a follower it knows needs (its checkpoint's
        # position, or its from_version), read atomically with the trim: a follower
        # created by another worker moments ago, unknown here yet, keeps its entries.
        # Here too, not while a follower this worker knows has no checkpoint at this
        # position (one not held here, or behind here): a store that cannot check it
        # (a Redis Cluster, where a leader and a follower are two slots) relies on it.
        followed = {f for f, lead in registry.leader_names.items() if lead == h.name}
        if upto > 0 and followed <= {f.name for f, _, _ in fs}:
            await registry.store.trim_log(h.name, upto)
    except StoreUnavailable as e:
        registry.health.failed("put_checkpoint", e)
        _back_off(registry.settings, h, e)
        h.checkpoint_outcome = "store_unavailable"
        return False
    except ModelNotFound:
        h.checkpoint_outcome = "deleted"
        return False  # deleted meanwhile
    except LogDiverged as e:
        log.error("checkpoint of %r refused: %s", h.name, e)
        registry.spawn(recover_lost_tail(registry, h))
        return False
    except Exception as e:
        log.exception("checkpoint of %r failed", h.name)
        _back_off(registry.settings, h, e)
        return False
    finally:
        h.checkpointing = False
    if h.checkpoint_failures:
        log.info("checkpoint of %r written after %d failures", h.name, h.checkpoint_failures)
    h.checkpoint_failures = 0
    h.checkpoint_retry_at = -math.inf
    h.checkpoint_error = None
    M.CHECKPOINT_BACKOFF.labels(h.name).set(0.0)
    h.checkpoint_position = position
    h.checkpoint_outcome = "written"
    h.checkpoint_at = time.time()
    h.checkpoint_done = time.monotonic()
    h.next_time_checkpoint = time.monotonic() + registry.settings.checkpoint_every_seconds
    M.CHECKPOINT_DURATION.labels(h.name).observe(time.perf_counter() - t0)
    M.CHECKPOINT_AGE.labels(h.name).set(0.0)
    M.MODEL_MEMORY.labels(h.name).set(state_nbytes(h.adapter))
    log.info("checkpoint of %r at position %d (%d bytes)", h.name, position, len(blob))
    return True


def _back_off(settings: Settings, h: ModelHandle, error: BaseException) -> None:
    """No new try of the model's checkpoint for a while: a store that cannot take it
    (a value over its limit, a full disk, an outage) would otherwise be sent the whole
    state again at every update or tick."""
    h.checkpoint_failures += 1
    delay = min(
        settings.checkpoint_retry_max_seconds,
        settings.checkpoint_retry_base_seconds * 2.0 ** min(h.checkpoint_failures - 1, 60),
    )
    h.checkpoint_retry_at = time.monotonic() + delay
    # The state is still not written: the periodic tick tries again once the wait is over.
    h.next_time_checkpoint = min(h.next_time_checkpoint, h.checkpoint_retry_at)
    h.checkpoint_error = f"{type(error).__name__}: {error}"[:1000]
    M.CHECKPOINT_FAILURES.labels(h.name).inc()
    M.CHECKPOINT_BACKOFF.labels(h.name).set(delay)
    log.warning(
        "checkpoint of %r failed (%d in a row); next try in %.0f s",
        h.name,
        h.checkpoint_failures,
        delay,
    )


def count_due(settings: Settings, h: ModelHandle) -> bool:
    """``checkpoint_every_updates`` entries since the last checkpoint, and at least
    ``checkpoint_min_interval_seconds`` since this process wrote one, and not backing
    off after a failed one."""
    now = time.monotonic()
    return (
        h.version - h.checkpoint_position >= settings.checkpoint_every_updates
        and now - h.checkpoint_done >= settings.checkpoint_min_interval_seconds
        and now >= h.lease_retry_at  # another worker holds the checkpoint lease
        and now >= h.checkpoint_retry_at
    )


def maybe_checkpoint(registry: Registry, h: ModelHandle) -> None:
    """Start a checkpoint of ``h`` in the background if one is due by count."""
    if h.owned and h.leader is None and count_due(registry.settings, h) and not h.checkpointing:
        registry.spawn(checkpoint(registry, h))


async def periodic(registry: Registry) -> None:
    """Time-based checkpoints and slow-moving gauges (called about once a second)."""
    now = time.monotonic()
    for h in list(registry.models.values()):
        if h.auc_stale:  # every worker that applies sets the learning gauges
            h.auc_stale = False
            auc = h.window.auc()
            if auc is not None or h.auc_shown:  # NaN once there is none (multiclass now)
                M.ONLINE_ROC_AUC.labels(h.name).set(math.nan if auc is None else auc)
                h.auc_shown = True
        if not h.adapter.online or not h.owned or h.leader is not None:
            continue  # owners checkpoint (a follower with its leader); guests only read
        if h.checkpoint_at is not None:
            M.CHECKPOINT_AGE.labels(h.name).set(max(0.0, time.time() - h.checkpoint_at))
        # Backing off after a failure: the timer stays due, for when the wait is over.
        timed = now >= h.next_time_checkpoint and now >= h.checkpoint_retry_at
        if timed:
            h.next_time_checkpoint = now + registry.settings.checkpoint_every_seconds
        # A count-triggered one held back by the minimum interval is taken here.
        due = timed or count_due(registry.settings, h)
        due = due and now >= h.lease_retry_at
        if due and h.version > h.checkpoint_position and not h.checkpointing:
            registry.spawn(checkpoint(registry, h))
