"""Decisions served: ``rank`` (choose an action, keep the decision) and ``reward`` (learn
the chosen action's reward, once). No HTTP here (:mod:`service.api.decisions`).

A decision is kept like a delayed label's prediction (:mod:`service.engine.delayed_labels`):
the record of an event (every action's row and the decision, see
:mod:`service.models.decision_features`) is stored under (model, event id) for
``feedback_ttl_seconds``. ``rank`` with an ``event_id`` already kept answers the kept
decision and keeps nothing new (the draw is a function of the event id and the seed,
and the probabilities of the model's state then: a retry after the model moved on
still answers the first decision). A reward is learned through the log like an
``/update`` with ids: the entry holds the event's rows and decision, and the event is
marked rewarded in the same atomic step as the append (``Store.append_labelled``), so
it is learned at most once whichever worker takes it; the same reward again is
answered as the first time, another reward for a rewarded event is a 409, an unknown
or expired event a 404, each naming ``rewards[i].event_id``.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import orjson

from service.engine import followers
from service.engine.delayed_labels import _replay, _replayed, durable
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.engine.requests import check_idempotency_key, model_name, only_known
from service.errors import Kind, ServiceError, conflict, invalid, not_found, store_unavailable
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.models.json_fields import parse_json_object, type_name
from service.models.payload import PayloadError
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import (
    Feedback,
    FeedbackConflict,
    KeyGuard,
    ModelNotFound,
    StoreUnavailable,
    record_digest,
)

RANK_MEMBERS = ("model", "context", "actions", "excluded", "event_id")
REWARD_MEMBERS = ("model", "rewards", "event_id", "reward")
_TRIES = 3


def require_decision(h: ModelHandle) -> DecisionAdapter:
    if not isinstance(h.adapter, DecisionAdapter):
        raise conflict(
            "not_a_decision_model",
            f"model {h.name!r} is a {h.adapter.kind} model; rank and reward are for "
            'decision models ("algorithm": "decision")',
            "model",
        )
    return h.adapter


def require_leader(h: ModelHandle, what: str) -> DecisionAdapter:
    """A decision model that is no challenger: a challenger does not serve, its
    decisions and rewards are its leader's (409 naming ``model``)."""
    adapter = require_decision(h)
    lead = followers.leader_of(h.config)
    if lead is not None:
        raise conflict("follower", f"model {h.name!r} is a challenger: it follows {lead!r}, "
                       f"learns its decisions and rewards, and does not serve; send {what} "
                       f"to {lead!r} (POST /models/{lead}/promote lets {h.name!r} rank "
                       "for it)", "model")  # fmt: skip
    return adapter


async def _read(engine: Engine, h: ModelHandle, ids: list[str]) -> list[Feedback | None]:
    try:
        return await engine.store.get_feedback(h.name, ids)
    except StoreUnavailable as e:
        engine.health.failed("get_feedback", e)
        raise store_unavailable() from e
    except ModelNotFound:
        raise not_found(h.name) from None


def _kept_answer(h: ModelHandle, fb: Feedback) -> dict[str, Any] | None:
    """The decision kept for an event (its record, or once rewarded its mark)."""
    adapter = require_decision(h)
    if fb.record is not None:
        try:
            _, ev = df.decode_event(fb.record, adapter.spec.dim)
        except (PayloadError, ValueError, KeyError):
            return None
        return {"model": h.name, **df.answer_of(ev, ev["s"], ev["rank"])}
    if fb.mark is not None:
        ans = orjson.loads(fb.mark).get("ans")
        return None if ans is None else {"model": h.name, **ans, "rewarded": True}
    return None


# ---------------------------------------------------------------------- rank
_THREAD_FEATURES = 20_000  # about 4 ms of encoding: more goes to a thread


def _big(body: dict[str, Any]) -> bool:
    """Whether encoding the body's actions is too much work for the event loop (the
    crosses: about actions x (1 + context) x (1 + action features))."""
    actions, context = body.get("actions"), body.get("context")
    if type(actions) is not list:
        return False
    width = 1 + (len(context) if type(context) is dict else 0)
    per = [1 + len(f) if type(a) is dict and type(f := a.get("features")) is dict else 1
           for a in actions]  # fmt: skip
    return width * sum(per) > _THREAD_FEATURES


async def rank_body(
    engine: Engine, settings: Settings, raw: bytes, state: dict[str, Any], key: str | None
) -> dict[str, Any]:
    body = parse_json_object(raw)
    only_known(body, RANK_MEMBERS, "/rank")
    h = await engine.find(model_name(body, state))
    adapter = require_leader(h, "the rank")
    served = followers.serving(h).adapter  # a promoted challenger decides for h
    assert isinstance(served, DecisionAdapter)
    state["model"] = h.name
    given = body.get("event_id") is not None
    event_id = df.event_id_of(body)
    if given:  # a retry answers the decision kept, and keeps nothing new
        (fb,) = await _read(engine, h, [event_id])
        kept = None if fb is None else _kept_answer(h, fb)
        if kept is not None:
            await durable(engine, h)
            return kept
    encoded: Any = body
    if len(raw) > settings.parse_in_thread_bytes or _big(body):  # (reads no learned state)
        encoded = await asyncio.to_thread(served.encode_rank, body, settings)
    if served is adapter:
        answer, record = adapter.rank(encoded, settings, event_id, h.version)
    else:  # the record in the leader's rows: its log is the one it goes to
        answer, record = served.rank(encoded, settings, event_id, h.version, log_as=adapter)
    try:
        taken = await engine.store.put_feedback(
            h.name, [(event_id, record)], adapter.record_seconds(settings), replace=False
        )
    except StoreUnavailable as e:
        engine.health.failed("put_feedback", e)
        raise store_unavailable("the store is unreachable; the decision was not kept") from e
    except ModelNotFound:
        raise not_found(h.name) from None
    if taken is not None:  # kept or rewarded meanwhile (a retry racing its first attempt)
        (fb,) = await _read(engine, h, [event_id])
        kept = None if fb is None else _kept_answer(h, fb)
        if kept is None:
            raise conflict("event_rewarded", "event_id: this event was rewarded already",
                           "event_id")  # fmt: skip
        await durable(engine, h)
        return kept
    M.DECISIONS.labels(h.name).inc()
    return {"model": h.name, **answer}


# ---------------------------------------------------------------------- reward
def _items(body: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
    if "rewards" in body:
        if "event_id" in body or "reward" in body:
            raise invalid("rewards: give either rewards or one event_id and reward", "rewards")
        items = body["rewards"]
        if type(items) is not list or not items:
            raise invalid(f"rewards: must be a non-empty list of {{event_id, reward}}, got "
                          f"{type_name(items)}", "rewards")  # fmt: skip
        if len(items) > settings.max_batch_examples:
            limit = settings.max_batch_examples
            msg = f"rewards: {len(items)} rewards exceed the limit of {limit}"
            raise ServiceError(Kind.TOO_LARGE, "too_large", msg, "rewards")
        return items
    return [{k: body[k] for k in ("event_id", "reward") if k in body}]


async def reward_body(
    engine: Engine, settings: Settings, raw: bytes, state: dict[str, Any], key: str | None
) -> dict[str, Any]:
    if key is not None:
        check_idempotency_key(key)
    body = parse_json_object(raw)
    only_known(body, REWARD_MEMBERS, "/reward")
    h = await engine.find(model_name(body, state))
    adapter = require_leader(h, "the rewards")
    state["model"] = h.name
    where = "rewards" if "rewards" in body else None
    items = _items(body, settings)
    ids: list[str] = []
    rewards: list[float] = []
    first: dict[str, int] = {}
    for i, it in enumerate(items):
        loc = f"rewards[{i}]" if where else ""
        dot = "." if loc else ""
        if type(it) is not dict:
            raise invalid(f"{loc}: must be an object with event_id and reward", loc)
        for k in it:
            if k not in ("event_id", "reward"):
                raise invalid(f"{loc}{dot}{k}: unknown field", f"{loc}{dot}{k}")
        eid = df.check_id(it.get("event_id"), f"{loc}{dot}event_id")
        if eid in first:
            raise invalid(f"{loc}{dot}event_id: the same event as rewards[{first[eid]}]",
                          f"{loc}{dot}event_id")  # fmt: skip
        first[eid] = i
        ids.append(eid)
        rewards.append(adapter.check_reward(it.get("reward"), f"{loc}{dot}reward"))
    keyed = None if key is None else (key, hashlib.sha256(raw).hexdigest())
    ttl = settings.idempotency_ttl_seconds

    def at(i: int) -> str:
        return f"rewards[{i}].event_id" if where else "event_id"

    for _ in range(_TRIES):
        found = await _read(engine, h, ids)
        events, new_rewards, marks, learned = [], [], [], []
        repeated = [0]
        for i, (eid, fb) in enumerate(zip(ids, found, strict=True)):
            if fb is None or (fb.mark is None and fb.record is None):
                raise ServiceError(Kind.NOT_FOUND, "event_not_found", f"{at(i)}: no decision "
                                   "with this event id is kept (unknown, or older than "
                                   f"feedback_ttl_seconds = {settings.feedback_ttl_seconds:g})",
                                   at(i))  # fmt: skip
            if fb.mark is not None:
                _repeat(h, fb, rewards[i], at(i))
                repeated.append(fb.position)
                learned.append(False)
                continue
            assert fb.record is not None
            try:
                batch, ev = df.decode_event(fb.record, adapter.spec.dim)
            except (PayloadError, ValueError):
                raise invalid(f"{at(i)}: the decision kept for this event cannot be read",
                              at(i)) from None  # fmt: skip
            ans = df.answer_of(ev, ev["s"], ev["rank"])
            events.append((batch, {k: v for k, v in ev.items() if k not in ("s", "rank")}))
            new_rewards.append(rewards[i])
            marks.append((eid, record_digest(fb.record),
                          orjson.dumps({"r": rewards[i], "ans": ans}).decode()))  # fmt: skip
            learned.append(True)
        once = None if keyed is None else KeyGuard(keyed[0], keyed[1], len(events) or 1, ttl)
        answers = [{"event_id": e, "learned": b} for e, b in zip(ids, learned, strict=True)]
        if not events:  # nothing new: answered as the first time
            await durable(engine, h)
            replay = None if once is None else await _replay(engine, h, once, state)
            if replay is not None:
                return {**replay, "events": answers}
            version = max(repeated)
            if not await engine.wait_for_version(h, version, settings.min_version_wait_seconds):
                raise store_unavailable(f"version {version} is not applied on this worker yet")
            return {"model": h.name, "applied": 0, "version": version, "events": answers}
        entry = df.reward_entry(events, new_rewards)
        try:
            adapter.check_update(entry)
        except ServiceError:
            replay = None if once is None else await _replay(engine, h, once, state)
            if replay is None:
                raise
            return {**replay, "events": answers}
        try:
            if once is None:  # in one entry with the rewards waiting with it
                position, replayed = await engine.submit_rewards(h, entry, marks), False
            else:
                position, replayed = await engine.submit_labelled(h, entry, marks, once)
        except FeedbackConflict:
            continue
        if replayed:
            await durable(engine, h)
            replay = await _replay(engine, h, once, state) if once is not None else None
            return {**(replay or _replayed(h, len(events), position, state)), "events": answers}
        M.REWARDS.labels(h.name).inc(len(events))
        return {"model": h.name, "applied": len(events), "version": position, "events": answers}
    raise conflict("conflict", "the events of this request kept changing meanwhile; send it "
                   "again", "rewards")  # fmt: skip


def _repeat(h: ModelHandle, fb: Feedback, reward: float, loc: str) -> None:
    """A rewarded event: the same reward again is a no-op; another is refused; any
    reward after the default reward was learned is refused and counted."""
    mark = orjson.loads(fb.mark or "{}")
    first = mark.get("r")
    if mark.get("d"):
        M.LATE_REWARDS.labels(h.name).inc()
        raise conflict(
            "default_reward_applied",
            f"{loc}: no reward came within reward_wait_seconds, so this event learned the "
            f"default reward {first!r} (version {fb.position}); {reward!r} is counted as "
            "late and not learned",
            loc,
        )
    if first != reward:
        raise conflict(
            "event_rewarded",
            f"{loc}: this event was rewarded {first!r} already (version {fb.position}); a "
            f"reward is learned once, so {reward!r} is refused",
            loc,
        )


# ---------------------------------------------------------------------- mode
async def set_mode(engine: Engine, h: ModelHandle, mode: Any) -> dict[str, Any]:
    """Switch a decision model to ``mode`` (``learning``, ``apprentice``) with a log entry,
    so every replica switches at the same point of its log; the answer once applied."""
    adapter = require_leader(h, "the mode")
    if mode not in df.MODES:
        raise invalid(f"mode: must be one of {list(df.MODES)}, got {mode!r}", "mode")
    version = await engine.submit_update(h, df.mode_entry(str(mode), adapter.spec.dim))
    return {"model": h.name, "mode": adapter.mode, "version": version}
