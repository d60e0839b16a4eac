"""The models of this process: restore, apply the log in order, checkpoint.

Every model's state is a pure function of its log: a checkpoint (state + the
position it covers) and the entries after it, applied in position order. Every
worker applies every entry, so all replicas hold bit-identical state. A model's
``version`` is the position of the last entry applied here.

All mutation of a model happens under its ``asyncio.Lock`` on the event loop;
``/predict`` reads without the lock (it never sees a half-applied batch since
``apply`` does not yield to the loop).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import logging
import os
import secrets
import socket
import time
from typing import Any

from service import batch_deploys, checkpoints, log_integrity, update_outcomes
from service import metrics as M
from service.api.errors import ApiError, invalid, not_found, store_unavailable
from service.model_handle import ModelHandle, StoreHealth, unpack_checkpoint
from service.models import adapter_class
from service.models.base import ModelAdapter
from service.placement import Placement
from service.settings import Settings
from service.store.base import (
    ConfigConflict,
    IdempotencyKeyReused,
    ModelNotFound,
    Store,
    StoreUnavailable,
    ValueTooLarge,
    payload_digest,
)
from service.warmup import Family, warm_all

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
        if not self._warm:
            # JIT-compile (or load cached) kernels off the loop before taking traffic.
            await asyncio.to_thread(warm_all, self._warming, self._warmed)
            self._warm = True
        await self.placement.start()  # join the fleet first: we restore what we own
        async with self._catalog_lock:
            self.waiting_for = "restoring models: reading the catalog from the store"
            epoch = await self.store.catalog_epoch()
            configs = await self.store.list_models()
            for i, (name, config) in enumerate(configs.items(), 1):
                if not self.owns(name):  # the others load on demand
                    continue
                self.waiting_for = f"restoring models: {name!r} ({i}/{len(configs)})"
                await self._load(name, config)
            self.epoch = epoch
        # Start-up leaves ~150k long-lived objects (modules, numba, pydantic, the
        # models); a full collection walks them all (~40 ms measured, 50-140 ms the
        # first time: an event-loop stall) though they never die. Frozen, the
        # collector scans only what came after (a full collection then takes ~0 ms).
        gc.collect()
        gc.freeze()
        self.ready = True
        self.waiting_for = ""
        self._update_kind_gauge()
        self.placement.update_gauges()
        log.info("restored %d model(s); ready", len(self.models))

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
        try:
            cls = adapter_class(config.get("kind", "linear"))
        except ValueError:
            log.error("model %r has unknown kind %r; not loaded", name, config.get("kind"))
            return None
        old = self.models.get(name)
        if old is not None and old.generation != (await self.store.get_generation(name) or ""):
            M.forget_model(name)  # deleted and re-created elsewhere: its series start anew
        try:
            h = await self._restore_handle(name, cls, config)
        except (StoreUnavailable, asyncio.CancelledError):
            raise
        except Exception as e:
            # A model whose stored state cannot be read (corrupt checkpoint, a kind
            # this version cannot load...) must not keep every other model offline.
            log.exception("model %r could not be restored; it is not served", name)
            self.failed[name] = f"{type(e).__name__}: {e}"
            return None
        self.failed.pop(name, None)
        self.models[name] = h
        return h

    async def _restore_handle(
        self, name: str, cls: type[ModelAdapter], config: dict[str, Any]
    ) -> ModelHandle:
        # Read before the state: if the model is re-created while we load, the handle
        # carries the old generation and the next catalog sync reloads it.
        generation = await self.store.get_generation(name) or ""
        if not cls.online:
            h = await batch_deploys.load_batch(self, name, cls, config)
            h.generation = generation
            return h
        cp = await self.store.get_checkpoint(name)
        if cp is not None:
            meta, blob = unpack_checkpoint(cp.blob)
            adapter = await asyncio.to_thread(cls.from_checkpoint, config, blob)
            h = ModelHandle(name, adapter, self.settings)
            h.version = cp.position
            h.checkpoint_position = cp.position
            h.checkpoint_at = cp.created_at
            h.examples_learned = int(meta.get("examples_learned", 0))
            h.entries_skipped = int(meta.get("entries_skipped", 0))
            h.window.restore(meta)
            h.head = meta.get("head")
            h.load_failed(meta)
        else:
            h = ModelHandle(name, cls.create(config), self.settings)
        h.generation = generation
        h.owned = self.owns(name)  # before the catch-up: its entries count in this role
        h._m_version.set(h.version)
        async with h.lock:
            await self._catch_up_locked(h)
        self._record_failures_soon(h)
        return h

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
        """Apply every entry past ``h.version`` (up to ``target`` if given), checking that
        each one continues the chain of heads of the entries applied before it."""
        while target is None or h.version < target:
            nxt = h.local.pop(h.version + 1, None)
            if nxt is not None:
                if h.chain_breaks(*nxt):
                    await self._lost_tail(h, h.version + 1)
                    continue
                h.apply_entry(h.version + 1, *nxt)
                continue
            limit = 256 if target is None else max(1, min(256, target - h.version))
            entries = await self.store.read_log(h.name, h.version, limit)
            if not entries:
                return
            if entries[0].position != h.version + 1:
                # The entries we need were trimmed behind a newer checkpoint: reload it.
                await self._reload_from_checkpoint(h, entries[0].position)
                continue
            broken = False
            for e in entries:
                if e.position != h.version + 1:
                    raise RuntimeError(f"model {h.name!r}: log gap at {e.position}")
                if h.chain_breaks(e.payload, e.head):
                    await self._lost_tail(h, e.position)
                    broken = True
                    break
                h.apply_entry(e.position, e.payload, e.head)
                h.local.pop(e.position, None)
            if broken:
                continue
            if len(entries) < limit:
                return
            await asyncio.sleep(0)  # a long catch-up lets predicts through between chunks

    async def _reload_from_checkpoint(self, h: ModelHandle, first: int) -> None:
        cp = await self.store.get_checkpoint(h.name)
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
        h.notify_advanced()

    # Log integrity (a store that lost the log's tail) lives in service.log_integrity;
    # these keep the names the apply path, the apply-loop and the checkpoints call.
    async def _lost_tail(self, h: ModelHandle, position: int) -> None:
        await log_integrity.lost_tail(self, h, position)

    async def _store_lost_tail(self, h: ModelHandle) -> bool:
        return await log_integrity.store_lost_tail(self, h)

    async def recover_lost_tail(self, h: ModelHandle) -> None:
        await log_integrity.recover_lost_tail(self, h)

    def _stored_not_applied(self, e: StoreUnavailable) -> ApiError:
        """The 503 for an update that is in the log but could not be applied here yet."""
        self.health.failed("read_log", e)
        return store_unavailable(
            "the update is stored but could not be applied yet; "
            "it will be applied when the store is back"
        )

    async def submit_update(self, h: ModelHandle, payload: bytes) -> int:
        """Append durably, apply in log order up to our entry, return its position."""
        # Hashed once: the store's chain head and our own check of it take the digest.
        digest = payload_digest(payload)
        try:
            position, head = await self.store.append_entry(h.name, payload, digest)
        except StoreUnavailable as e:
            self.health.failed("append", e)
            raise store_unavailable("the store is unreachable; the update was not accepted") from e
        except ModelNotFound:
            self._drop(h.name)  # deleted by another worker meanwhile
            raise not_found(h.name) from None
        self.health.ok()
        await self._apply_own(h, position, payload, head, digest)
        return position

    async def submit_labelled(
        self, h: ModelHandle, payload: bytes, labels: list[tuple[str, str, str]]
    ) -> int:
        """``submit_update`` of an entry that learns delayed labels: the ids are marked
        labelled in the same atomic step as the append (``Store.append_labelled``, which
        raises ``FeedbackConflict`` and appends nothing when one cannot be)."""
        try:
            position, head = await self.store.append_labelled(h.name, payload, labels)
        except StoreUnavailable as e:
            self.health.failed("append", e)
            raise store_unavailable("the store is unreachable; the update was not accepted") from e
        except ModelNotFound:
            self._drop(h.name)
            raise not_found(h.name) from None
        self.health.ok()
        await self._apply_own(h, position, payload, head)
        return position

    async def key_recorded(self, h: ModelHandle, key: str) -> bool:
        try:
            return await self.store.key_recorded(h.name, key)
        except StoreUnavailable as e:
            self.health.failed("append", e)
            raise store_unavailable("the store is unreachable; the update was not accepted") from e

    async def submit_update_once(
        self, h: ModelHandle, payload: bytes, key: str, payload_hash: str, n: int
    ) -> tuple[int, int, bool]:
        """``submit_update`` at most once per (model, idempotency ``key``).

        Returns ``(position, n, replayed)``: a key seen before (within
        ``idempotency_ttl_seconds``) appends nothing and gives the first request's
        position and ``n``, once this worker has applied that position, exactly as a
        new entry is waited for. A key seen with another ``payload_hash`` is a 409."""
        try:
            position, n, replayed = await self.store.append_once(
                h.name, payload, key, payload_hash, n, self.settings.idempotency_ttl_seconds
            )
        except StoreUnavailable as e:
            self.health.failed("append", e)
            raise store_unavailable("the store is unreachable; the update was not accepted") from e
        except ModelNotFound:
            self._drop(h.name)
            raise not_found(h.name) from None
        except IdempotencyKeyReused:
            raise ApiError(
                409,
                "idempotency_key_reused",
                f"this Idempotency-Key was already used for model {h.name!r} with a "
                "different body; send a new key for a new batch",
                "Idempotency-Key",
            ) from None
        self.health.ok()
        # A replayed entry is applied from the log (it may be applied already).
        try:
            await self._apply_own(h, position, None if replayed else payload)
        except ApiError as e:
            if replayed and e.status == 422:  # the entry failed here, as the first time
                e.headers = dict(update_outcomes.REPLAYED)
            raise
        if replayed:
            # Applied fine as far as this worker knows; but it may have forgotten the
            # failure (restarted, restored from a later checkpoint, thousands of later
            # failures): the store keeps the first answer with the key.
            try:
                failure = await update_outcomes.recorded_failure(self, h, key)
            except StoreUnavailable as e:
                raise self._stored_not_applied(e) from e
            if failure is not None:
                raise failure
        return position, n, replayed

    async def _apply_own(
        self,
        h: ModelHandle,
        position: int,
        payload: bytes | None,
        head: str | None = None,
        digest: str | None = None,
    ) -> None:
        """Apply the log up to ``position`` (our entry, ``payload`` if we hold it, with
        the chain ``head`` the store gave it); raise the error the entry failed with, if
        it could not be applied."""
        if position <= h.version:
            # Already applied by the apply-loop, or our copy is of a model deleted and
            # created again elsewhere (its log restarted at 1): then load the new one.
            try:
                if await self.store.get_generation(h.name) != h.generation:
                    h = await self._reload(h.name)
            except StoreUnavailable as e:
                raise self._stored_not_applied(e) from e
        if head and position <= h.version and dict(h.recent_heads).get(position) != head:
            # Applied here already (by the apply-loop), unless the store handed out a
            # position we had applied for another entry: it lost the log's tail. Then
            # rebuild from the store and apply as usual.
            async with h.lock:
                try:
                    lost = position <= h.version and (
                        dict(h.recent_heads).get(position, head) != head
                        or await self._store_lost_tail(h)
                    )
                    if lost:
                        await self._lost_tail(h, position)
                except StoreUnavailable as e:
                    raise self._stored_not_applied(e) from e
        if payload is not None and position > h.version:
            h.local[position] = (payload, head, digest)
        async with h.lock:
            if h.version < position:
                try:
                    await self._catch_up_locked(h, position)
                except StoreUnavailable as e:
                    raise self._stored_not_applied(e) from e
            h.local.pop(position, None)
            error = h.failed.get(position)
        if error is not None:
            # Recorded before answering: a retry of it (if it had a key) answers alike.
            await update_outcomes.record_failures(self, h)
            raise update_outcomes.failure_error(error)
        self._record_failures_soon(h)
        self._maybe_checkpoint(h)

    async def wait_for_version(self, h: ModelHandle, version: int, timeout: float) -> bool:
        """Until this process has applied ``version`` of the model (or ``timeout``)."""
        if h.version >= version:
            return True
        deadline = time.monotonic() + timeout
        try:
            # One cheap read: a version the log has not reached yet is refused at
            # once, so it can never hold the model's lock or poll the store.
            if h.adapter.online:
                last = await self.store.last_position(h.name)
                what = f"log (last position {last})"
            else:
                last = await self.store.get_active_version(h.name) or 0
                what = f"active artifact version ({last})"
            if version > last:
                raise invalid(
                    f"min_version: {version} is ahead of the model's {what}", "min_version"
                )
            if h.adapter.online and not h.lock.locked():
                # The entries exist: apply them now (one read) unless someone holding
                # the lock is at it already; then we wait for them below.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.catch_up(h, version), timeout)
        except StoreUnavailable as e:
            self.health.failed("read_log", e)
            return h.version >= version
        if h.version >= version or not h.adapter.online:
            # A batch model's new version comes as a new handle (catalog sync): the
            # client retries on the 503 instead of waiting on this one.
            return h.version >= version
        # Someone else holds the work (e.g. a reload): wait until the version moves.
        return await h.wait_applied(version, max(0.0, deadline - time.monotonic()))

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
        try:
            if checkpoint is None:
                created = await self.store.create_model(name, config)
            else:
                created = await self.store.create_model_from_checkpoint(name, config, checkpoint)
            generation = await self.store.get_generation(name) or ""
        except ConfigConflict:
            raise ApiError(
                409,
                "conflict",
                f"model {name!r} already exists with a different configuration",
                "name",
            ) from None
        except StoreUnavailable as e:
            self.health.failed("create_model", e)
            raise store_unavailable() from e
        except ValueTooLarge as e:
            raise ApiError(413, "too_large", f"artifact: {e}", "artifact") from None
        h = self.models.get(name)
        if h is None or h.config != config or h.generation != generation:
            async with self._catalog_lock:
                h = self.models.get(name)
                if h is None or h.config != config or h.generation != generation:
                    if h is not None and h.generation != generation:
                        M.forget_model(name)  # a new model of that name: new series
                    try:
                        h = await self._restore_handle(name, cls, config)
                    except StoreUnavailable as e:
                        # Created (or found) in the store; any worker loads it later.
                        self.health.failed("create_model", e)
                        raise store_unavailable() from e
                    self.models[name] = h
                    if not h.owned:
                        self.placement._admit(h)
        self._update_kind_gauge()
        return h, created

    async def delete(self, name: str) -> None:
        try:
            existed = await self.store.delete_model(name)
        except StoreUnavailable as e:
            self.health.failed("delete_model", e)
            raise store_unavailable() from e
        local = self._drop(name)
        local = self.failed.pop(name, None) is not None or local
        if not existed and not local:
            raise not_found(name)

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
        epoch = await self.store.catalog_epoch()
        if epoch == self.epoch:
            return
        async with self._catalog_lock:
            configs = await self.store.list_models()
            generations = await self.store.list_generations()
            for name in [n for n in self.failed if n not in configs]:
                del self.failed[name]
            for name in [n for n in self.models if n not in configs]:
                log.info("model %r was deleted elsewhere; dropping it", name)
                self._drop(name)
            for name, config in configs.items():
                h = self.models.get(name)
                stale = h is not None and (
                    h.config != config or h.generation != generations.get(name, h.generation)
                )
                if h is not None and not stale:
                    if h.adapter.online:
                        # The same model (same generation) whose log ends before what
                        # we applied: the store lost the log's tail. Rebuilt in place.
                        if await self.store.last_position(name) < h.version:
                            await self.recover_lost_tail(h)
                        continue
                    else:  # another worker deployed or rolled back
                        stale = await self.store.get_active_version(name) != h.version
                if (h is None and self.owns(name)) or stale:
                    await self._load(name, config)
            self.epoch = epoch
        self._update_kind_gauge()

    async def _reload(self, name: str) -> ModelHandle:
        """Load the model afresh from the store (our copy belongs to a deleted one)."""
        async with self._catalog_lock:
            config = await self.store.get_config(name)
            if config is None:
                self._drop(name)
                raise not_found(name)
            log.info("model %r was re-created elsewhere; reloading it", name)
            h = await self._load(name, config)
        if h is None:
            raise self._missing(name)
        self._update_kind_gauge()
        return h

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
