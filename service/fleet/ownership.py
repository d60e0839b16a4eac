"""Which members of the fleet own which models: shards + rendezvous hashing.

With ``LEARNSERVE_OWNERSHIP=sharded`` a model is held, applied and checkpointed by
``LEARNSERVE_REPLICAS_PER_MODEL`` (R) members instead of by every worker. The model
names are cut into :data:`SHARDS` fixed shards by a stable hash of the name (never
Python's ``hash()``, which is salted per process); each shard is owned by the R live
members with the highest rendezvous (highest-random-weight) score for it. Every
member computes the same answer from the same member list, with no coordination:
the list comes from heartbeat leases in the store (:mod:`service.fleet.membership`). When
a member joins or leaves, only the shards whose top-R set it enters or leaves move
(about R/N of them), which is what rendezvous hashing is for.

>>> v = OwnershipView(("a", "b", "c"), replicas=2)
>>> owners = v.owners("clicks")
>>> len(owners), len(set(owners)), set(owners) <= {"a", "b", "c"}
(2, 2, True)
>>> OwnershipView(("c", "b", "a"), 2).owners("clicks") == owners  # order-free
True
>>> shard_of("clicks") == shard_of("clicks") and 0 <= shard_of("clicks") < SHARDS
True
>>> OwnershipView(("a",), replicas=2).owners("clicks")  # fewer members than R: all
('a',)
"""

from __future__ import annotations

import hashlib
import os
import socket
from typing import Literal

SHARDS = 1024  # fixed: changing it moves models between members on an upgrade

Mode = Literal["replicate", "sharded"]


def stable_hash(text: str) -> int:
    """A 64-bit hash of ``text`` that every process and machine computes alike."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def shard_of(name: str) -> int:
    return stable_hash(name) % SHARDS


def shard_owners(shard: int, members: tuple[str, ...], replicas: int) -> tuple[str, ...]:
    """The ``replicas`` members with the highest rendezvous weight for ``shard``
    (ties, which a 64-bit hash makes vanishingly rare, go to the smaller id)."""
    ranked = sorted(members, key=lambda m: (-stable_hash(f"{m}\x00{shard}"), m))
    return tuple(ranked[:replicas])


class OwnershipView:
    """The owners of every shard for one list of live members (immutable; a new
    view is made when the membership changes). Shard owners are computed once per
    shard and cached: a lookup is a hash of the name plus a dict read."""

    def __init__(self, members: tuple[str, ...] | list[str], replicas: int) -> None:
        self.members = tuple(sorted(set(members)))
        self.replicas = replicas
        self._shards: dict[int, tuple[str, ...]] = {}

    def owners(self, name: str) -> tuple[str, ...]:
        shard = shard_of(name)
        got = self._shards.get(shard)
        if got is None:
            got = self._shards[shard] = shard_owners(shard, self.members, self.replicas)
        return got

    def owns(self, member: str, name: str) -> bool:
        return member in self.owners(name)


def member_id(configured: str | None, workers: int) -> str:
    """This worker's id in the fleet: ``LEARNSERVE_MEMBER_ID`` (e.g. the pod's name),
    else ``<hostname>-<pid>``. With several workers per server every worker is its
    own member, so the pid is appended to a configured id."""
    pid = os.getpid()
    if not configured:
        return f"{socket.gethostname()}-{pid}"
    return configured if workers <= 1 else f"{configured}-{pid}"
