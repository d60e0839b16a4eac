"""The decision log of a decision model, as DSJSON lines (the format VW's
``--dsjson``, Personalizer and learning-loop read: :mod:`learners.decisions.dsjson`).

It is derived from the model's log, not kept apart: every reward entry holds its
events' decisions (context and actions as sent, every probability, the chosen action,
the version that decided, the time) and rewards (``"d": 1`` for a default reward, which
DSJSON marks with nothing special: it is the reward that was learned). So the export
has the decisions whose rewards are in the log past ``after``; entries covered by a
checkpoint are trimmed from the store, so an export holds the rewards learned since the
last checkpoint unless read before (``after`` resumes where a previous page ended: the
answer's ``X-Next-After``). Decisions still waiting for a reward are not
in the log yet, so not exported.
"""

from __future__ import annotations

from typing import Any

from learners.decisions.dsjson import DecisionRecord, to_dsjson
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.errors import store_unavailable
from service.models.payload import MAGIC, PayloadError, decode_payload
from service.store.base import StoreUnavailable

_PAGE = 500


def records_of(payload: bytes, dim: int) -> list[DecisionRecord]:
    """The decisions a log entry learned (none for an entry of another shape)."""
    if payload[:4] != MAGIC:
        return []
    try:
        _, meta = decode_payload(payload, dim)
    except (PayloadError, ValueError):
        return []
    events = meta.get("ev")
    if type(events) is not list:
        return []
    return [_record(ev) for ev in events if type(ev) is dict]


def _record(ev: dict[str, Any]) -> DecisionRecord:
    actions = [{"_id": aid, **feats} for aid, feats in zip(ev["ids"], ev["feat"], strict=True)]
    rec = DecisionRecord(
        event_id=str(ev["id"]),
        context=dict(ev.get("ctx") or {}),
        actions=actions,
        chosen=int(ev["a"]),
        probabilities=[float(p) for p in ev["p"]],
        reward=float(ev["r"]),
        timestamp=str(ev.get("ts") or ""),
        version=str(ev["v"]),
    )
    return rec


async def dsjson_page(engine: Engine, h: ModelHandle, after: int, limit: int) -> tuple[bytes, int]:
    """DSJSON lines (each ending in a newline) of the decisions rewarded in the log
    entries past position ``after`` (at most ``limit`` entries, in log order), and the
    position to read on from (the last entry read; ``after`` when none)."""
    dim = h.adapter.spec.dim  # type: ignore[attr-defined]
    lines: list[str] = []
    read = 0
    while read < limit:
        try:
            entries = await engine.store.read_log(h.name, after, min(_PAGE, limit - read))
        except StoreUnavailable as e:
            engine.health.failed("read_log", e)
            raise store_unavailable() from e
        if not entries:
            break
        for entry in entries:
            lines += [to_dsjson(rec) for rec in records_of(bytes(entry.payload), dim)]
            after = entry.position
        read += len(entries)
    return "".join(line + "\n" for line in lines).encode(), after
