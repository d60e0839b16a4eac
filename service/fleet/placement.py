"""Which models this worker holds, and in what role: owner or guest.

``LEARNSERVE_OWNERSHIP=replicate`` (the default): every worker owns every model;
nothing here changes what the registry does.

``LEARNSERVE_OWNERSHIP=sharded``: this worker is a member of the fleet
(:mod:`service.fleet.membership`) and owns the models :mod:`service.fleet.ownership` assigns it.

- **Owner**: restores the model at start (or when it gains it), its apply loop
  applies every entry of the log, and it writes the checkpoints.
- **Guest**: a request for a model this worker does not own loads it from
  checkpoint + log into a bounded LRU (``LEARNSERVE_LRU_BYTES``). The apply loop
  leaves guests alone; each request catches the guest up from the log before it
  answers (one read of the log: slower, never wrong), and updates are applied in
  log order as everywhere. Guests are evicted, least recently used first, when the
  LRU is over its budget.

Rebalancing (a member joined or left): models this worker gains are loaded (or a
guest copy promoted) first; models it loses become guests, pinned in the LRU for
``handover_seconds`` so the new owners have loaded them before this copy can go.
For that moment both serve; the log orders the writes, so both answer correctly.

Counting (``entries_applied``, ``learnserve_log_entries_applied_total{role}``): an
entry applied to a copy while this worker owns the model counts as ``owner``, else
as ``guest``. With a steady membership every entry is applied exactly R times as
``owner`` across the fleet, and only as often as requests ask as ``guest``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from service.fleet.membership import Membership, membership_for
from service.fleet.ownership import OwnershipView, member_id
from service.models.base import state_nbytes
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import Store, StoreUnavailable


class HeldModel(Protocol):
    """What placement reads and sets of a model held here (the engine's handle)."""

    name: str
    owned: bool
    adapter: Any
    entries_applied: Any


class PlacementHooks(Protocol):
    """What placement may do to the models this process holds: the engine gives these
    (``service.engine.facade``), never itself."""

    def held(self) -> Mapping[str, HeldModel]: ...

    def is_ready(self) -> bool: ...

    async def load(self, name: str, config: dict[str, Any]) -> HeldModel | None:
        """The model held here, loaded from the store if it is not held yet."""
        ...

    async def catch_up(self, h: Any) -> None: ...

    def drop(self, name: str) -> None: ...

    def store_failed(self, operation: str, error: BaseException) -> None: ...


log = logging.getLogger("learnserve.placement")


class Placement:
    def __init__(self, store: Store, settings: Settings, hooks: PlacementHooks) -> None:
        self.store = store
        self.hooks = hooks
        self.settings = settings
        self.sharded = settings.ownership == "sharded"
        self.member = member_id(settings.member_id, settings.workers)
        self.replicas = settings.replicas_per_model
        self.view = OwnershipView((self.member,), self.replicas)
        self.membership: Membership | None = None
        self._task: asyncio.Task[None] | None = None
        # Guests, least recently used first: name -> bytes held.
        self.guests: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.pinned: dict[str, float] = {}  # lost owners' copies: not evicted before then
        self.guest_bytes = 0
        self._m_owned = M.OWNED_MODELS.labels(self.member)
        self._m_members = M.FLEET_MEMBERS.labels(self.member)
        self._m_lru_bytes = M.LRU_BYTES.labels(self.member)
        self._m_lru_models = M.LRU_MODELS.labels(self.member)
        self._m_hits = M.LRU_HITS.labels(self.member)
        self._m_misses = M.LRU_MISSES.labels(self.member)
        self._m_evictions = M.LRU_EVICTIONS.labels(self.member)
        self._m_members.set(1)

    # ------------------------------------------------------------ predicates
    # Which name places a model: its own, or (a challenger) its leader's, set by the
    # engine (service.engine.followers): a follower lives where its leader's log is.
    key: Callable[[str], str] = staticmethod(lambda name: name)

    def owns(self, name: str) -> bool:
        """True when this worker applies and checkpoints ``name`` (always, replicated)."""
        return not self.sharded or self.view.owns(self.member, self.key(name))

    def owners(self, name: str) -> list[str]:
        return list(self.view.owners(name)) if self.sharded else list(self.view.members)

    def fleet(self) -> dict[str, Any]:
        """For ``/readyz``: the mode, this member and the live members it sees."""
        return {
            "mode": self.settings.ownership,
            "member": self.member,
            "members": list(self.view.members),
            "owned_models": sum(1 for n in self.hooks.held() if self.owns(n)),
            "guest_models": len(self.guests),
            "guest_bytes": self.guest_bytes,
        }

    def describe(self, name: str, held: bool) -> dict[str, Any]:
        """The ``ownership`` block of ``GET /models/{name}``."""
        h = self.hooks.held().get(name)
        return {
            "mode": self.settings.ownership,
            "member": self.member,
            "members": list(self.view.members),
            "owners": self.owners(name) if self.sharded else ["*"],
            "owned_here": self.owns(name),
            "held_here": held,
            "entries_applied": dict(h.entries_applied) if h is not None else None,
        }

    # ------------------------------------------------------------ membership
    async def start(self) -> None:
        """Join the fleet (before the registry restores: it restores what we own)."""
        if not self.sharded or self._task is not None:
            return
        self.membership = membership_for(self.store)
        members = await self.membership.renew(self.member, self.settings.member_lease_seconds)
        self._set_view(members)
        self._task = asyncio.get_running_loop().create_task(self._heartbeat(), name="membership")
        log.info("member %s joined a fleet of %d: %s", self.member, len(members), members)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.membership is not None:
            with contextlib.suppress(Exception):  # the lease expires by itself anyway
                await self.membership.leave(self.member)
            await self.membership.close()
            self.membership = None

    async def _heartbeat(self) -> None:
        assert self.membership is not None
        period = self.settings.member_lease_seconds / 3
        while True:
            await asyncio.sleep(period)
            try:
                members = await self.membership.renew(
                    self.member, self.settings.member_lease_seconds
                )
                if tuple(sorted(set(members) | {self.member})) != self.view.members:
                    await self.rebalance(members)
                self.evict()  # handover pins expire
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as e:
                # Keep the last view: the store is needed to apply anything anyway.
                self.hooks.store_failed("membership", e)
            except Exception:
                log.exception("membership heartbeat failed; retrying")

    def _set_view(self, members: tuple[str, ...] | list[str]) -> None:
        # We are a member even when our own lease just lapsed (a slow heartbeat):
        # dropping every model for that would be worse than one extra owner.
        self.view = OwnershipView(tuple(set(members) | {self.member}), self.replicas)
        self._m_members.set(len(self.view.members))

    async def rebalance(self, members: tuple[str, ...] | list[str]) -> None:
        """Take the new member list: load what we gained, then demote what we lost."""
        held = self.hooks.held()
        before = {n for n in held if self.owns(n)}
        self._set_view(members)
        log.info("fleet is now %d member(s): %s", len(self.view.members), self.view.members)
        if not self.hooks.is_ready():
            return  # the restore (running or next) loads what we own now
        configs = await self.store.list_models()
        gained = [n for n in configs if self.owns(n) and n not in before]
        for name in gained:
            h = held.get(name)
            if h is None:
                await self.hooks.load(name, configs[name])
            else:
                self._promote(h)
        lost = [n for n in before if not self.owns(n)]
        until = time.monotonic() + self.settings.handover_seconds
        for name in lost:
            h = held.get(name)
            if h is not None:
                h.owned = False
                self.pinned[name] = until
                self.admit(h)
        self.update_gauges()
        self.evict()
        if gained or lost:
            log.info("rebalanced: gained %d model(s), handing over %d", len(gained), len(lost))

    def _promote(self, h: HeldModel) -> None:
        h.owned = True
        size = self.guests.pop(h.name, None)
        if size is not None:
            self.guest_bytes -= size
        self.pinned.pop(h.name, None)

    # ------------------------------------------------------------ guests (the LRU)
    async def guest(self, name: str) -> HeldModel | None:
        """Load a model we do not own, as a guest (None: there is no such model)."""
        self._m_misses.inc()
        config = await self.store.get_config(name)
        if config is None:
            return None
        h = await self.hooks.load(name, config)
        if h is not None and not self.owns(name):
            self.admit(h)
            self.evict(keep=name)
        return h

    async def refresh(self, h: HeldModel) -> None:
        """Before a guest answers: the entries the apply loop did not apply to it."""
        self._m_hits.inc()
        for name in dict.fromkeys((self.key(h.name), h.name)):  # a follower's leader too
            if name in self.guests:
                self.guests.move_to_end(name)
        if h.adapter.online:
            with contextlib.suppress(StoreUnavailable):  # then answer from what we have
                await self.hooks.catch_up(h)

    def admit(self, h: HeldModel) -> None:
        h.owned = False
        size = state_nbytes(h.adapter.model, 3)
        self.guest_bytes += size - self.guests.get(h.name, 0)
        self.guests[h.name] = size
        self.guests.move_to_end(h.name)
        self.update_gauges()

    def forget(self, name: str) -> None:
        """The registry dropped ``name`` (deleted, evicted)."""
        size = self.guests.pop(name, None)
        if size is not None:
            self.guest_bytes -= size
        self.pinned.pop(name, None)
        self.update_gauges()

    def evict(self, keep: str | None = None) -> None:
        """Drop least recently used guests while over budget (never ``keep``, the one
        just loaded for a request, nor a pinned handover copy)."""
        now = time.monotonic()
        for name in [n for n, t in self.pinned.items() if t <= now]:
            del self.pinned[name]
        for name in list(self.guests):
            if self.guest_bytes <= self.settings.lru_bytes:
                break
            if keep is not None and name in (keep, self.key(keep)):
                continue  # the one just loaded (and a follower's leader)
            if name in self.pinned or self.owns(name):
                continue
            self._m_evictions.inc()
            self.hooks.drop(name)  # calls forget()
            log.info("evicted guest model %r", name)

    def update_gauges(self) -> None:
        self._m_owned.set(sum(1 for n in self.hooks.held() if self.owns(n)))
        self._m_lru_bytes.set(self.guest_bytes)
        self._m_lru_models.set(len(self.guests))
