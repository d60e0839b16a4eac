"""A model's log applied here in position order, each entry checked against the chain.

``catch_up_locked`` applies every entry past the handle's version: the ones this
worker holds already (``h.local``, its own appends) without reading them back, the
others read from the store in chunks. An entry whose chain head does not continue
the entries applied before it means the store lost the log's tail
(:mod:`service.log_integrity`); a log that starts past the version was trimmed
behind a newer checkpoint, which is loaded instead.

Functions over the :class:`~service.registry.Registry`, which delegates to them
under its own names (as it does for ``service.checkpoints``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from service import log_integrity
from service.model_handle import ModelHandle, unpack_checkpoint

if TYPE_CHECKING:  # the registry imports this module; only the type is needed here
    from service.registry import Registry

log = logging.getLogger("learnserve.registry")


async def catch_up_locked(registry: Registry, h: ModelHandle, target: int | None = None) -> None:
    """Apply every entry past ``h.version`` (up to ``target`` if given), checking that
    each one continues the chain of heads of the entries applied before it."""
    while target is None or h.version < target:
        nxt = h.local.pop(h.version + 1, None)
        if nxt is not None:
            if h.chain_breaks(*nxt):
                await log_integrity.lost_tail(registry, h, h.version + 1)
                continue
            h.apply_entry(h.version + 1, *nxt)
            continue
        limit = 256 if target is None else max(1, min(256, target - h.version))
        entries = await registry.store.read_log(h.name, h.version, limit)
        if not entries:
            return
        if entries[0].position != h.version + 1:
            # The entries we need were trimmed behind a newer checkpoint: reload it.
            await reload_from_checkpoint(registry, h, entries[0].position)
            continue
        broken = False
        for e in entries:
            if e.position != h.version + 1:
                raise RuntimeError(f"model {h.name!r}: log gap at {e.position}")
            if h.chain_breaks(e.payload, e.head):
                await log_integrity.lost_tail(registry, h, e.position)
                broken = True
                break
            h.apply_entry(e.position, e.payload, e.head)
            h.local.pop(e.position, None)
        if broken:
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
    h.notify_advanced()
