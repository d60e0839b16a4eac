"""Decisions for both clients: the requests of ``choose`` (``POST /models/{name}/rank``),
``reward`` (``POST /models/{name}/reward``) and ``decision_log``
(``GET /models/{name}/decisions``), and their answers.

Both writes are safe to retry: ``choose`` always sends an ``event_id`` (a fresh one
unless given), so a retried request answers the decision of the first and keeps nothing
new; ``reward`` always sends an ``Idempotency-Key``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from service.client._core import Call, json_call, model_path


@dataclass(frozen=True)
class RankedAction:
    id: str
    probability: float
    score: float


@dataclass(frozen=True)
class Decision:
    """The chosen ``action`` (its id), its ``probability``, every action in ``ranking``
    (the chosen first), the model ``version`` that decided; ``rewarded``: the event was
    rewarded already (a retry after its reward)."""

    model: str
    event_id: str
    action: str
    probability: float
    ranking: list[RankedAction]
    version: int
    rewarded: bool = False


@dataclass(frozen=True)
class RewardResult:
    """``applied``: rewards this request learned; ``events``: (event id, learned now)."""

    model: str
    applied: int
    version: int
    events: list[tuple[str, bool]] = field(default_factory=list)
    replayed: bool = False


def choose_call(
    model: str,
    context: dict[str, Any] | None,
    actions: Iterable[dict[str, Any]],
    excluded: Iterable[str] | None,
    event_id: str | None,
) -> Call:
    body: dict[str, Any] = {
        "context": context or {},
        "actions": list(actions),
        "event_id": event_id or uuid.uuid4().hex,
    }
    if excluded:
        body["excluded"] = list(excluded)
    return json_call("POST", model_path(model, "/rank"), body)


def reward_call(model: str, rewards: Iterable[tuple[str, float]], key: str | None) -> Call:
    items = [{"event_id": e, "reward": r} for e, r in rewards]
    return json_call(
        "POST",
        model_path(model, "/reward"),
        {"rewards": items},
        headers={"Idempotency-Key": key or uuid.uuid4().hex},
    )


def log_call(model: str, after: int, limit: int) -> Call:
    return Call("GET", model_path(model, f"/decisions?after={int(after)}&limit={int(limit)}"))


def decision_of(b: dict[str, Any]) -> Decision:
    ranking = [RankedAction(x["id"], x["probability"], x["score"]) for x in b["ranking"]]
    return Decision(b["model"], b["event_id"], b["action"], b["probability"], ranking,
                    int(b["version"]), bool(b.get("rewarded")))  # fmt: skip


def reward_result(b: dict[str, Any], replayed: str | None) -> RewardResult:
    events = [(e["event_id"], bool(e["learned"])) for e in b.get("events", [])]
    return RewardResult(b["model"], int(b["applied"]), int(b["version"]), events,
                        replayed == "true")  # fmt: skip
