"""Delayed labels: predict now with an ``id``, learn when the label arrives.

In click, fraud or churn prediction the label comes long after the prediction. A
``/predict`` instance may carry ``"id"``: its features, encoded as the model learns
them, and the prediction served are kept in the store under (model, id) for
``feedback_ttl_seconds`` (``Store.put_feedback``), so any worker can take the label.
An ``/update`` example ``{"id", "y"}`` (no ``x``) learns those features with ``y``:

- the log entry holds the features (``feedback_rows.build_entry``), so every replica
  applies the same entry, as for any other example;
- the id is marked labelled in the same atomic step as the append
  (``Store.append_labelled``): learned at most once, whichever worker gets the label,
  and a refused or failed append leaves it unmarked;
- progressive metrics of the example score the prediction that was served (true
  online evaluation), not the model's at learn time;
- an unknown or expired id is 422, another label for a labelled id 409 (both naming
  ``examples[i].id``); the same label again changes nothing: a batch of nothing but
  such repeats is answered as the first time, and in a batch that learns something
  else they are not counted (``applied`` and ``correct`` count what the batch's
  entry learned). A refused batch changes nothing.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson

from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.engine.update_submission import key_reused
from service.errors import ServiceError, conflict, invalid, not_found, store_unavailable
from service.models.base import ModelAdapter
from service.models.example_weights import entry_weights
from service.models.feedback_rows import Record, build_entry, decode_record
from service.models.finite_answers import refuse_nonfinite
from service.models.json_fields import check_id, require_list
from service.models.linear import LinearAdapter
from service.models.payload import decode_payload
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

_TRIES = 3  # a conflict (another worker labelled or re-predicted an id meanwhile): re-read


def _ids(items: list[Any], where: str) -> list[str | None]:
    """Each item's checked ``id`` (None without one); the same id twice is refused."""
    ids: list[str | None] = []
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        fid = item.get("id") if type(item) is dict else None
        if fid is not None or (type(item) is dict and "id" in item):
            loc = f"{where}[{i}].id"
            fid = check_id(fid, loc)
            if fid in first:
                raise invalid(f"{loc}: the same id as {where}[{first[fid]}].id", loc)
            first[fid] = i
        ids.append(fid)
    return ids


def sent_ids(body: dict[str, Any], key: str) -> bool:
    """Whether some item of ``body[key]`` (instances, examples) has an ``id`` field."""
    items = body.get(key)
    return type(items) is list and any(type(x) is dict and "id" in x for x in items)


def _adapter(h: ModelHandle, where: str, ids: list[str | None]) -> LinearAdapter:
    loc = f"{where}[{next(i for i, x in enumerate(ids) if x is not None)}].id"
    if isinstance(h.adapter, LinearAdapter):
        if h.adapter.spec.stateful:  # a kept prediction holds features, not the record
            raise invalid(
                f"{loc}: ids (delayed labels) are not taken by a model whose features use "
                "statistics of the records (standardize, idf); send x and y together",
                loc,
            )
        return h.adapter
    raise invalid(f"{loc}: ids (delayed labels) are for online classifiers only", loc)


# ---------------------------------------------------------------------- /predict
async def predict_tracked(
    engine: Engine,
    settings: Settings,
    h: ModelHandle,
    body: dict[str, Any],
    raw: bytes,
    served: ModelAdapter | None = None,
) -> list[dict[str, Any]]:
    """Predict, and keep what is needed to learn each instance with an id later; the
    answer only once the store holds it (else the label could not be taken).
    ``served``: the adapter that answers (a promoted follower's), else ``h``'s."""
    instances = require_list(body, "instances", settings.max_batch_examples)
    ids = _ids(instances, "instances")
    adapter = _adapter(h, "instances", ids)
    if isinstance(served, LinearAdapter):
        adapter = served
    bare = [x if i is None else {k: v for k, v in x.items() if k != "id"}
            for x, i in zip(instances, ids, strict=True)]  # fmt: skip
    predictions, records = adapter.predict_tracked(bare, ids, settings, raw)
    refuse_nonfinite(predictions, "instances")  # before anything is kept
    try:
        taken = await engine.store.put_feedback(h.name, records, settings.feedback_ttl_seconds)
    except StoreUnavailable as e:
        engine.health.failed("put_feedback", e)
        raise store_unavailable("the store is unreachable; the prediction was not kept") from e
    except ModelNotFound:
        raise not_found(h.name) from None
    if taken is not None:
        row = next(k for k, i in enumerate(ids) if i == records[taken][0])
        loc = f"instances[{row}].id"
        raise conflict(
            "id_labelled", f"{loc}: this id was labelled already; an id is used once", loc
        )
    return predictions


# ---------------------------------------------------------------------- /update
async def update_with_ids(
    engine: Engine,
    settings: Settings,
    h: ModelHandle,
    body: dict[str, Any],
    raw: bytes,
    keyed: tuple[str, str] | None,
    state: dict[str, Any],
) -> dict[str, Any]:
    """Learn a batch some of whose examples are ``{"id", "y"}``; the /update answer.

    An id is learned at most once by itself (a label sent again is answered as the first
    time); an ``Idempotency-Key`` makes the whole batch, its examples with ``x`` too,
    learned at most once (recorded in the same atomic step as the append and the ids'
    marks: a retry finds the key although its ids are labelled by then). ``keyed``: the
    key and the SHA-256 of the request's bytes."""
    examples = require_list(body, "examples", settings.max_batch_examples)
    ids = _ids(examples, "examples")
    adapter = _adapter(h, "examples", ids)
    ttl = settings.idempotency_ttl_seconds
    for i, (ex, fid) in enumerate(zip(examples, ids, strict=True)):
        if fid is not None and "x" in ex:
            loc = f"examples[{i}].x"
            raise invalid(f"{loc}: an example with an id is learned from the features "
                          "kept with its prediction; send x or id, not both", loc)  # fmt: skip
    # Every example checked (labels, x, sizes) by the adapter, with the ids' features
    # as zero stand-ins: then each label is checked in place, with its index.
    zero = adapter.zero_features()
    stand_ins = [ex if fid is None else {**{k: v for k, v in ex.items() if k != "id"}, "x": zero}
                 for ex, fid in zip(examples, ids, strict=True)]  # fmt: skip
    parse = adapter.parse_update
    args = ({**body, "examples": stand_ins}, settings, raw)
    if len(raw) > settings.parse_in_thread_bytes:
        payload, n = await asyncio.to_thread(parse, *args)
    else:
        payload, n = parse(*args)
    batch, meta = decode_payload(payload, adapter.spec.dim)
    labels: list[Any] = meta["y"]
    wanted = [k for k, fid in enumerate(ids) if fid is not None]
    for _ in range(_TRIES):
        found = dict(zip(wanted, await _read(engine, h, [str(ids[k]) for k in wanted]),
                         strict=True))  # fmt: skip
        rows: list[int | tuple[Record, int, float]] = []  # what the entry learns, in order
        src: list[int] = []  # the example each row of the entry is
        marks: list[tuple[str, str, str]] = []
        answered, repeated = 0, [0]  # served right / positions of ids labelled before
        for k in range(n):
            fid = ids[k]
            if fid is None:
                rows.append(k)
                src.append(k)
                continue
            fb = found[k]
            if fb is None or (fb.mark is None and fb.record is None):
                loc = f"examples[{k}].id"
                raise invalid(
                    f"{loc}: no prediction with this id is kept (unknown, or older than "
                    f"feedback_ttl_seconds = {settings.feedback_ttl_seconds:g})",
                    loc,
                )
            if fb.mark is not None:  # labelled before: the same label is a no-op
                answered += _repeat(fb, labels[k], k)
                repeated.append(fb.position)
                continue
            assert fb.record is not None
            rec = _decode(fb.record, adapter, k)
            correct, loss = adapter.served_outcome(rec, labels[k])
            rows.append((rec, correct, loss))
            src.append(k)
            mark = orjson.dumps({"y": labels[k], "c": correct}).decode()
            marks.append((fid, record_digest(fb.record), mark))
        # The key records what the entry learns (its answer's "applied"), as for a batch
        # of x examples; ids labelled before are not learned again, so not counted.
        once = None if keyed is None else KeyGuard(keyed[0], keyed[1], len(rows) or n, ttl)
        if not rows:  # nothing new to learn: answered as the first time
            await durable(engine, h)  # that time's marks may be on the master only
            first = None if once is None else await _replay(engine, h, once, state)
            if first is not None:
                return first  # this key's own first attempt, appended meanwhile
            version = max(repeated)
            if not await engine.wait_for_version(h, version, settings.min_version_wait_seconds):
                raise store_unavailable(f"version {version} is not applied on this worker yet")
            return {"model": h.name, "applied": n, "version": version, "correct": answered}
        sent_w = entry_weights(meta)  # importance weights, by example
        entry = build_entry(
            batch, [labels[k] for k in src], rows, dense=adapter.spec.kind == "dense",
            weights=None if sent_w is None else [sent_w[k] for k in src],
        )  # fmt: skip
        try:
            _check(adapter, entry, src, ids)
        except ServiceError:
            # A retry of a batch appended before (by a worker whose state was behind) is
            # answered as the first request was, not refused anew on today's state.
            first = None if once is None else await _replay(engine, h, once, state)
            if first is None:
                raise
            await durable(engine, h)
            return first
        try:
            position, replayed = await engine.submit_labelled(h, entry, marks, once)
        except FeedbackConflict:
            continue  # read again: the id is now labelled (or gone, or predicted again)
        finally:  # applied, or never to be by this object: what the dry run kept goes
            adapter.forget_checked(entry)
        if replayed:  # this key's own first attempt, appended meanwhile: its answer
            await durable(engine, h)
            first = await _replay(engine, h, once, state) if once is not None else None
            return first or _replayed(h, len(rows), position, state)
        M.EXAMPLES_ACCEPTED.labels(h.name).inc(len(rows))
        # What this entry learned: its rows (the ids labelled before are not among them;
        # "correct" of the entry counts its own rows only).
        return {
            "model": h.name,
            "applied": len(rows),
            "version": position,
            "correct": h.correct_at.get(position),
        }
    raise conflict(
        "conflict", "the ids of this batch kept changing meanwhile; send it again", "examples"
    )


async def durable(engine: Engine, h: ModelHandle) -> None:
    """Before answering from what an earlier attempt stored (a label's mark, a kept
    decision, a reward's mark): make it as durable as that attempt's acknowledgement
    would have (its WAIT may have timed out, the store then answering 503; a failover
    would lose it)."""
    try:
        await engine.store.fence(h.name)
    except StoreUnavailable as e:
        engine.health.failed("fence", e)
        raise store_unavailable(f"{e}") from e
    except ModelNotFound:
        raise not_found(h.name) from None


async def _replay(
    engine: Engine, h: ModelHandle, once: KeyGuard, state: dict[str, Any]
) -> dict[str, Any] | None:
    """The first answer again when ``once``'s key is recorded with this body (its entry
    applied here, or its failure raised again, as ``submit_update_once`` replays); a key
    recorded with another body is a 409; None when the key is not recorded."""
    found = await engine.key_entry(h, once.key)
    if found is None:
        return None
    position, n, payload_hash = found
    if payload_hash != once.payload_hash:
        raise key_reused(h)
    await engine.replay(h, once.key, position)
    return _replayed(h, n, position, state)


def _replayed(h: ModelHandle, n: int, position: int, state: dict[str, Any]) -> dict[str, Any]:
    state["replayed"] = True  # the API says so (Idempotent-Replayed)
    correct = h.correct_at.get(position)
    return {"model": h.name, "applied": n, "version": position, "correct": correct}


async def _read(engine: Engine, h: ModelHandle, ids: list[str]) -> list[Feedback | None]:
    try:
        return await engine.store.get_feedback(h.name, ids)
    except StoreUnavailable as e:
        engine.health.failed("get_feedback", e)
        raise store_unavailable() from e


def _repeat(fb: Feedback, y: Any, k: int) -> int:
    """A labelled id: the same label again is a no-op (its served prediction was right:
    1, else 0); another label is refused."""
    d = orjson.loads(fb.mark or "{}")
    first = d.get("y")
    if type(first) is not type(y) or first != y:
        loc = f"examples[{k}].id"
        raise conflict(
            "id_labelled",
            f"{loc}: this id was labelled {first!r} already (version {fb.position}); an "
            f"id is learned once, so {y!r} is refused",
            loc,
        )
    return int(d.get("c", 0))


def _decode(record: bytes, adapter: LinearAdapter, k: int) -> Record:
    try:
        return decode_record(record, adapter.spec.dim)
    except ValueError:  # e.g. a record of another dimension
        loc = f"examples[{k}].id"
        raise invalid(f"{loc}: the prediction kept with this id cannot be read", loc) from None


_ROW = re.compile(r"examples\[(\d+)\]\.x")


def _check(adapter: LinearAdapter, entry: bytes, src: list[int], ids: list[str | None]) -> None:
    """The adapter's dry run (weights that would become non-finite), its error naming
    the request's example: ``examples[i].x``, or ``examples[i].id`` for kept features."""
    try:
        adapter.check_update(entry)
    except ServiceError as e:
        m = _ROW.fullmatch(e.field or "")
        if m is None:
            raise
        k = src[int(m.group(1))]
        loc = f"examples[{k}].x" if ids[k] is None else f"examples[{k}].id"
        raise ServiceError(e.kind, e.code, e.message.replace(m.group(0), loc, 1), loc) from None
