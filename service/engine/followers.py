"""Challengers: a model that follows another learns from the leader's log, entry by entry.

A follower is created with ``"follows": "<leader>"`` (its own algorithm, parameters,
window and detector; the leader's kind and ``features``: a decision model's challenger
may have other ``bits``, :mod:`service.models.decision_follower`). The catalog stores it with the
leader's log position at its creation (``from_version``): it learns every entry after
that one, exactly as if the same requests had been sent to it, and nothing else. No
second copy of the stream is sent or stored: the follower has no log of its own.

On a worker the follower's handle is attached to its leader's: it shares the leader's
lock, and ``ModelHandle.apply_entry`` of the leader applies each entry to every follower
whose version is the entry's predecessor (lockstep; a follower's version is a position of
the leader's log). Its checkpoints are written with the leader's, at the same position,
before the leader's log is trimmed (``service.engine.checkpoints``), so a worker that
starts restores a follower from its own checkpoint and the leader's log after it, like
any model. A leader rebuilt from its checkpoint (a trimmed log, a lost tail) rebuilds its
followers too (:func:`rebuild`).

A promotion is a control entry in the leader's log (``service.models.payload``:
``{"serving": "<follower>"}``, or ``null`` to undo): from that position on, every worker
answers ``/predict`` under the leader's name with the follower's state, at the same
version, while both keep learning. Functions over the registry table; ``_locked`` ones
need the leader's lock held.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from service.engine.model_handle import ModelHandle, unpack_checkpoint
from service.engine.registry import Registry
from service.errors import ServiceError, conflict, invalid, store_unavailable
from service.models.base import ModelAdapter
from service.models.payload import encode_control
from service.store.base import ModelInUse, StoreUnavailable

log = logging.getLogger("learnserve.registry")

__all__ = [
    "FollowerLost", "check_delete", "control_for", "follower_config", "follows", "in_use",
    "leader_gone", "leader_names", "leader_of", "rebuild", "restore_follower_locked", "serving",
]  # fmt: skip


class FollowerLost(RuntimeError):
    """The follower cannot be brought to its leader's version (the leader's log was
    trimmed past the follower's state): it must be created again."""


def follows(config: dict[str, Any]) -> dict[str, Any] | None:
    """``{"model": leader, "from_version": p}`` of a follower's stored config, else None."""
    f = config.get("follows")
    return f if isinstance(f, dict) else None


def leader_of(config: dict[str, Any]) -> str | None:
    f = follows(config)
    return None if f is None else str(f["model"])


def leader_names(configs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Follower -> leader, of a catalog."""
    return {n: lead for n, c in configs.items() if (lead := leader_of(c)) is not None}


def serving(h: ModelHandle) -> ModelHandle:
    """The handle whose state answers ``/predict`` under ``h``'s name: the promoted
    follower when it is attached here and at the same version, else ``h`` itself."""
    if h.serving is None:
        return h
    f = h.followers.get(h.serving)
    if f is None or f.version != h.version:
        return h
    return f


async def restore_follower_locked(
    registry: Registry,
    leader: ModelHandle,
    name: str,
    cls: type[ModelAdapter],
    config: dict[str, Any],
) -> ModelHandle:
    """The follower ``name`` from its checkpoint (or new, at ``from_version``), brought to
    the leader's version from the leader's log, attached to it. A log trimmed past the
    state read is read again from the follower's newer checkpoint, if there is one: the
    worker that trims writes it first (the checkpoint was read before it was written)."""
    while True:
        h = await _from_checkpoint(registry, name, cls, config)
        basis = h.version  # the checkpoint's position, or from_version
        h.leader = leader
        h.lock = leader.lock
        h.owned = leader.owned
        try:
            await _catch_up_locked(registry, leader, h)
        except FollowerLost:
            cp = await registry.store.get_checkpoint(name)
            if cp is None or cp.position <= basis:
                raise
            continue  # from the newer one (checkpoints only move on: this ends)
        leader.followers[name] = h
        return h


async def _from_checkpoint(
    registry: Registry, name: str, cls: type[ModelAdapter], config: dict[str, Any]
) -> ModelHandle:
    start = int(follows(config)["from_version"])  # type: ignore[index]
    cp = await registry.store.get_checkpoint(name)
    if cp is not None and cp.position >= start:
        meta, blob = unpack_checkpoint(cp.blob)
        adapter = await asyncio.to_thread(cls.from_checkpoint, config, blob)
        h = ModelHandle(name, adapter, registry.settings)
        h.version = h.checkpoint_position = cp.position
        h.checkpoint_at = cp.created_at
        h.load_meta(meta)
    else:
        h = ModelHandle(name, cls.create(config), registry.settings)
        h.version = start
    h.head = None  # the leader checks the chain; a follower takes its heads
    h.generation = await registry.store.get_generation(name) or ""
    h._m_version.set(h.version)
    return h


async def _catch_up_locked(registry: Registry, leader: ModelHandle, h: ModelHandle) -> None:
    """Apply the leader's entries after ``h.version`` up to the leader's version."""
    while h.version < leader.version:
        limit = max(1, min(256, leader.version - h.version))
        entries = await registry.store.read_log(leader.name, h.version, limit)
        if not entries or entries[0].position != h.version + 1:
            raise FollowerLost(
                f"model {h.name!r} follows {leader.name!r} from version {h.version}, and its "
                "log no longer holds the entries after it (trimmed); create the follower again"
            )
        for e in entries:
            if e.position > leader.version:
                return
            h.apply_entry(e.position, e.payload, e.head or None, e.digest)
        await asyncio.sleep(0)


async def rebuild(registry: Registry, leader: ModelHandle) -> None:
    """Rebuild every follower of ``leader`` from its checkpoint and the leader's log (the
    leader was itself rebuilt); a follower that cannot be is dropped here and listed
    as failed (caller holds the leader's lock)."""
    olds = list(leader.followers.items())
    leader.followers.clear()  # none may be applied to until it is rebuilt
    for name, old in olds:
        try:
            await restore_follower_locked(registry, leader, name, type(old.adapter), old.config)
        except FollowerLost as e:
            log.error("%s", e)
            registry.failed[name] = str(e)
            registry.drop(name)
        except Exception as e:  # the store (a failover is when this runs), a checkpoint...
            log.warning("follower %r not rebuilt (%s); the catalog sync loads it again", name, e)
            old.leader = None  # detached: never applied to, never answering as current
            registry.drop(name)
            registry.epoch = -1  # the next catalog sync lists and loads it again
        else:
            registry.install(leader.followers[name])


# ---------------------------------------------------------------------- the catalog
async def follower_config(
    registry: Registry, name: str, config: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """A new follower's config to store: ``follows`` (the leader's name, as sent) checked
    against the leader (an online model of the same kind and features, itself no
    follower) and given the leader's log position now (``from_version``); and the
    leader's generation, which the store checks again when it creates the follower
    (``Store.create_follower``: the leader deleted meanwhile is a 409 then)."""
    lead = config["follows"]
    where = "follows"
    if lead == name:
        raise invalid(f"follows: a model cannot follow itself ({name!r})", where)
    try:  # the generation first: a leader created again after it is refused by the store
        generation = await registry.store.get_generation(lead)
        leader = await registry.store.get_config(lead)
        start = await registry.store.last_position(lead) if leader is not None else 0
    except StoreUnavailable as e:
        registry.health.failed("create_model", e)
        raise store_unavailable() from e
    if leader is None:
        raise invalid(f"follows: no model {lead!r}", where)
    if follows(leader) is not None:
        raise invalid(f"follows: {lead!r} follows {leader_of(leader)!r} itself; follow that", where)
    if leader.get("kind", "linear") != config.get("kind", "linear"):
        raise invalid(
            f"follows: {lead!r} is a {leader.get('kind', 'linear')} model; a "
            f"{config.get('kind', 'linear')} model cannot learn its log", where
        )  # fmt: skip
    stored = {"model": lead, "from_version": int(start)}
    if config.get("kind") == "decision":  # (service.models.decision_follower)
        # its leader's events keep the context and actions as sent: a challenger with
        # other bits encodes them again; the kind (hashed) is every decision model's
        kinds = (leader.get("features") or {}).get("kind"), config["features"].get("kind")
        if kinds[0] != kinds[1]:
            raise invalid(f"features: {lead!r}'s features are {kinds[0]}, so must be a "
                          "challenger's", "features")  # fmt: skip
        if kinds[0] == "records" and leader.get("features") != config["features"]:
            # (service.models.decision_records) a record another config reads may be
            # refused long after it was decided: the leader's rows, as they are
            raise invalid(f"features: a challenger of {lead!r} (a raw-record context) must "
                          f"have its features: {leader.get('features')}",
                          "features")  # fmt: skip
        stored["features"] = leader.get("features")
        stored["crossing"] = (leader.get("decision") or {}).get("crossing", "names")
    elif leader.get("features") != config.get("features"):
        raise invalid(
            f"features: a follower reads its leader's entries, so its features must be "
            f"{lead!r}'s: {leader.get('features')}", "features"
        )  # fmt: skip
    return {**config, "follows": stored}, generation or ""


def leader_gone(name: str, lead: str) -> ServiceError:
    """The 409 of a follower whose leader was deleted while it was being created."""
    return conflict(
        "leader_gone",
        f"follows: model {lead!r} was deleted while {name!r} was being created; nothing was stored",
        "follows",
    )


def in_use(name: str, e: ModelInUse) -> ServiceError:
    """The 409 of a delete the store refused (``ModelInUse``)."""
    if e.reason == "has_followers":
        message = f"model {name!r} has followers {e.others}; delete them first"
        return conflict("has_followers", message, "name")
    return conflict(
        "promoted",
        f"model {name!r} answers /predict for {e.others[0]!r} (promoted); promote another "
        "model (or none) first",
        "name",
    )


async def check_delete(registry: Registry, name: str) -> None:
    """A leader with followers, or a follower promoted, is not deleted (409)."""
    try:
        configs = await registry.store.list_models()
    except StoreUnavailable as e:
        registry.health.failed("delete_model", e)
        raise store_unavailable() from e
    mine = sorted(n for n, c in configs.items() if leader_of(c) == name)
    if mine:
        raise conflict(
            "has_followers", f"model {name!r} has followers {mine}; delete them first", "name"
        )
    lead = leader_of(configs.get(name, {}))
    leader = registry.models.get(lead) if lead else None
    if leader is not None and leader.serving == name:
        raise conflict(
            "promoted",
            f"model {name!r} answers /predict for {lead!r} (promoted); promote another "
            "model (or none) first",
            "name",
        )


# ---------------------------------------------------------------------- promotion
def control_for(h: ModelHandle, follower: str | None) -> bytes:
    """The control entry that makes ``follower`` (None or ``h.name``: the leader itself)
    answer ``/predict`` under ``h``'s name; a 4xx if it cannot."""
    if h.leader is not None:
        raise conflict(
            "follower",
            f"model {h.name!r} follows {h.leader.name!r}; promote on {h.leader.name!r}",
            "name",
        )
    if not h.adapter.online:
        raise conflict("not_online", f"model {h.name!r} is a batch model; it has no followers")
    target = None if follower in (None, h.name) else follower
    if target is not None and target not in h.followers:
        known = sorted(h.followers) or "none"
        # a well-formed name the model's followers do not hold now: a conflict with its
        # state (a follower deleted, or not yet created), not a malformed request
        raise conflict(
            "not_a_follower",
            f"follower: {target!r} does not follow {h.name!r} here (its followers: {known})",
            "follower",
        )
    return encode_control({"serving": target})
