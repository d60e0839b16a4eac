"""The models of this process, by name: a table, and the rules for changing it.

:class:`Registry` holds the handles (:class:`~service.engine.model_handle.ModelHandle`),
the models that could not be restored and why, the catalog epoch last seen, the
readiness, the store's health and the process's background tasks. It does no work
of its own: the verbs (find, create, delete, submit an update, deploy, checkpoint...)
are in :class:`service.engine.facade.Engine`, over the modules that implement them.
Who owns what comes from the fleet as two hooks (:attr:`Registry.owns`,
:attr:`Registry.on_guest`) and drops are announced to :attr:`Registry.on_drop`.

Lock rules (the only place they are written; every module here follows them):

1. **A model's state** (its adapter, ``version``, chain head, counters) changes only
   under its ``ModelHandle.lock``, on the event loop. ``/predict`` reads without the
   lock: it never sees half a batch because applying an entry does not yield.
2. **The table** (``models``, ``failed``, ``epoch``) changes under
   :attr:`Registry.catalog_lock` whenever the change depends on a read of the store's
   catalog (restore, create, delete, catalog sync, reload, a fleet's rebalance or
   guest load): a sync that read the model list before a delete must not load the
   deleted model back. Order: the catalog lock first, then a model's lock, never the
   other way round.
3. **A batch model's version swap** (deploy, activate, rollback) happens under the
   model's :meth:`Registry.switch_lock`, so swaps happen in the order of the store's
   writes; a swap is one assignment to ``models[name]`` (requests in flight keep the
   old handle).
4. Checkpoints snapshot under the model's lock and write outside it; a model has at
   most one checkpoint in flight (``ModelHandle.checkpointing``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import secrets
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from service.engine.model_handle import ModelHandle, StoreHealth
from service.errors import KernelsCompiling, ServiceError, model_unavailable, not_found
from service.models.kernel_loader import KernelLoader
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import Store


class Registry:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.models: dict[str, ModelHandle] = {}
        self.failed: dict[str, str] = {}  # models that could not be restored, and why
        # Models in the catalog waiting for numba kernels still compiling (by family):
        # loaded by service.engine.catalog as soon as their families are ready.
        self.pending: dict[str, list[str]] = {}
        self.kernels = KernelLoader()
        self.ready = False
        # What the service waits for before it is ready (shown by /readyz and its 503s).
        self.waiting_for = "start-up"
        self.epoch: int | None = None  # the store's catalog epoch last synced
        self.health = StoreHealth(store.name)
        self.catalog_lock = asyncio.Lock()  # rule 2
        # Set: a catalog sync is due now, not at the next poll (an entry applied here
        # promotes a follower not held here yet; the apply-loop's task syncs).
        self.catalog_wanted = asyncio.Event()
        self.installs = 0  # handles installed so far (the apply-loop's late wakes)
        self.batch_locks: dict[str, asyncio.Lock] = {}  # rule 3
        self.tasks: set[asyncio.Task[Any]] = set()
        # This process's name in the store's leases (unique per process and start).
        self.member_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        # Hooks from the fleet: whether this worker applies and checkpoints a model,
        # what to do with a model loaded here that it does not own, and who to tell
        # when a name leaves the table (held or not: the fleet's LRU forgets it).
        self.owns: Callable[[str], bool] = lambda name: True
        # Followers by name -> their leader's (service.engine.followers): a follower is
        # placed with its leader (the leader's name decides its owners).
        self.leader_names: dict[str, str] = {}
        self.on_guest: Callable[[ModelHandle], None] = lambda h: None
        self.on_drop: list[Callable[[str], None]] = []

    def get(self, name: str) -> ModelHandle:
        h = self.models.get(name)
        if h is None:
            raise self.missing(name)
        return h

    def missing(self, name: str) -> ServiceError:
        """The error for a model this process does not serve."""
        if name in self.failed:
            return model_unavailable(name, self.failed[name])
        if name in self.pending:
            families = self.pending[name]
            return KernelsCompiling(name, families, self.kernels.describe(families))
        return not_found(name)

    def not_ready_reason(self) -> str:
        """What the service still waits for, in words ("" once ready)."""
        if self.ready:
            return ""
        if not self.health.up:
            return f"the {self.store.name} store to answer ({self.waiting_for})"
        return self.waiting_for

    def install(self, h: ModelHandle) -> None:
        """Put ``h`` in the table (replacing the model's previous handle, if any)."""
        self.models[h.name] = h
        self.installs += 1

    def drop(self, name: str) -> bool:
        """Take ``name`` out of the table; False when it was not held here."""
        h = self.models.pop(name, None)
        self.pending.pop(name, None)
        for hook in self.on_drop:
            hook(name)
        if h is None:
            return False
        if h.leader is not None:  # a follower: its leader no longer applies to it
            h.leader.followers.pop(name, None)
        for f in list(h.followers):  # a leader dropped here: its followers come back with it
            self.drop(f)
        M.forget_model(name)  # every per-model series (also with several workers)
        self.update_kind_gauge()
        return True

    def update_kind_gauge(self) -> None:
        counts = collections.Counter(h.adapter.kind for h in self.models.values())
        for kind in set(counts) | {"linear"}:
            M.MODELS.labels(kind).set(counts.get(kind, 0))

    def switch_lock(self, name: str) -> asyncio.Lock:
        """The lock that orders a batch model's version swaps (rule 3)."""
        lock = self.batch_locks.get(name)
        if lock is None:
            lock = self.batch_locks[name] = asyncio.Lock()
        return lock

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background; cancelled by :meth:`cancel_tasks`."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def cancel_tasks(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
