"""What ``GET /models/{name}`` says of a model: its kind, configuration, version,
learning counters, progressive metrics, checkpoint and state digest (a batch model:
its artifact's facts instead)."""

from __future__ import annotations

import os
import time
from typing import Any

from service.engine.model_handle import ModelHandle


async def _side_by_side(f: ModelHandle) -> dict[str, Any]:
    """A follower, as its leader's description lists it (a decision challenger: with
    its policy and off-policy estimates)."""
    own = getattr(f.adapter, "side_by_side", None)
    return {
        "name": f.name,
        "algorithm": f.config.get("algorithm"),
        "version": f.version,
        "examples_learned": f.examples_learned,
        "online_metrics": f.online_metrics(),
        "drift": None if f.drift is None else f.drift.summary(),
        **({} if own is None else own()),
        "state_digest": await f.digest(),
    }


async def describe(h: ModelHandle) -> dict[str, Any]:
    """The body of ``GET /models/{name}`` (and of the answers that create a model)."""
    digest = await h.digest()
    if not h.adapter.online:
        # A batch model learns nothing here: no examples, progressive metrics or
        # checkpoints (absent, not null); its artifact's training facts instead.
        return {
            "name": h.name,
            "kind": h.adapter.kind,
            "config": h.config,
            "version": h.version,
            **h.adapter.describe(),
            "state_digest": digest,
            "worker": os.getpid(),
        }
    cp = None
    if h.checkpoint_at is not None:
        cp = {
            "position": h.checkpoint_position,
            "created_at": h.checkpoint_at,
            "age_seconds": max(0.0, time.time() - h.checkpoint_at),
        }
    return {
        "name": h.name,
        "kind": h.adapter.kind,
        "config": h.config,
        "version": h.version,
        "examples_learned": h.examples_learned,
        "entries_skipped": h.entries_skipped,
        **h.adapter.describe(),
        "online_metrics": h.online_metrics(),
        "drift": None if h.drift is None else h.drift.summary(),
        "followers": [await _side_by_side(f) for f in h.followers.values()],
        "serving": h.serving or h.name,
        "last_checkpoint": cp,
        "checkpoint_backoff": h.checkpoint_backoff(),
        "state_digest": digest,
        "worker": os.getpid(),
    }
