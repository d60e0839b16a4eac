"""The bodies of ``/update`` (learn) and ``/predict`` (score), served: parsed,
validated by the model's adapter, submitted, answered. No HTTP here: the API's one
request pipeline (:mod:`service.api.pipeline`) reads the body and renders the answer
or the :class:`~service.errors.ServiceError`.

Bodies are read as bytes: the adapter's compiled scanner takes the common shapes
without building Python objects (``parse_update_raw``); every other body is parsed
with orjson and validated field by field, with errors naming the field. Nothing is
written before the whole batch is validated and encoded: a bad batch never reaches
the log, so it never changes a model on any replica.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

from learners.csr_batch import Batch
from service.engine import delayed_labels, followers
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.errors import Kind, ServiceError, conflict, invalid
from service.models.batch import BatchAdapter
from service.models.fast_json_instances import scan_sparse_instances
from service.models.finite_answers import refuse_nonfinite
from service.models.json_fields import (
    check_utf8_start,
    optional_int,
    parse_json_object,
    require_str,
)
from service.models.kernel_families import usable
from service.observability import metrics as M
from service.settings import Settings


async def update_body(
    engine: Engine,
    settings: Settings,
    raw: bytes,
    state: dict[str, Any],
    key: str | None,
) -> dict[str, Any]:
    """Learn from one ``/update`` body; the answer once it is durable and applied.

    ``state``: the request's state: ``"path_model"`` read (the model named by the
    path, if any); the model's name set under ``"model"`` (for the per-model
    metrics) and ``"replayed"`` when the answer is a replay. ``key``: the request's
    idempotency key, which makes the update happen at most once per key (see
    ``submit_update_once``)."""
    if key is not None:
        check_idempotency_key(key)
    check_utf8_start(raw)  # before the bytes scanners, which read ASCII structure
    # Validate + encode everything before anything is written: a bad batch never
    # reaches the log, so it can never change a model on any replica.
    parsed = await _parse_raw(engine, settings, raw, state.get("path_model"))
    ignored: dict[str, int] = {}
    if parsed is not None:
        h, payload, n = parsed
    else:  # the general path: every body, with errors naming the field
        body = parse_json_object(raw)
        only_known(body, UPDATE_MEMBERS, "/update")
        only_one_of(body, "examples", "queries")
        name = model_name(body, state)
        h = await engine.find(name)
        if not h.adapter.online:
            raise conflict("not_online", f"model {name!r} is a batch model; it cannot learn online")
        if h.leader is not None:
            raise conflict(
                "follower",
                f"model {name!r} follows {h.leader.name!r} and learns from its log; "
                f"send the examples to {h.leader.name!r}",
                "model",
            )
        if delayed_labels.sent_ids(body, "examples"):  # labels of earlier predictions
            state["model"] = h.name
            keyed = None
            if key is not None:  # the request's own bytes, as below
                keyed = (key, str(await _off_loop_if_big(settings, raw, _sha256, raw)))
            return await delayed_labels.update_with_ids(
                engine, settings, h, body, raw, keyed, state
            )
        payload, n = await _off_loop_if_big(
            settings, raw, h.adapter.parse_update, body, settings, raw
        )
        # (the scanners take no body with a field the model does not read)
        ignored = h.adapter.ignored_fields(body.get("examples") or [])
    state["model"] = h.name
    # A dry run on the current state (no await: no update lands meanwhile): a batch
    # that would make the weights non-finite is refused before the log sees it.
    try:
        h.adapter.check_update(payload)
    except ServiceError:
        # A retry of a batch appended before (by a worker whose state was behind) is
        # answered as the first request was, not refused anew on today's state.
        if key is None or not await engine.key_recorded(h, key):
            raise
    correct: int | None = None
    try:
        if key is None:
            version, correct = await engine.submit_grouped(h, payload)
        else:
            # The request's own bytes, not the log entry: both parse paths must see one
            # body as one body (they may encode it differently, e.g. -0.0 as 0.0).
            digest = await _off_loop_if_big(settings, raw, _sha256, raw)
            version, n, replayed = await engine.submit_update_once(h, payload, key, digest, n)
            if replayed:
                state["replayed"] = True
                return answer(h, n, version)
            correct = h.correct_at.get(version)
    finally:  # applied, or never to be by this object: what the dry run kept goes
        h.adapter.forget_checked(payload)
    M.examples_accepted(h.name).inc(n)
    out = {"model": h.name, "applied": n, "version": version, "correct": correct}
    if ignored:  # a typo is not learned silently: the client is told what was left out
        M.IGNORED_FIELDS.labels(h.name).inc(sum(ignored.values()))
        out["ignored_fields"] = list(ignored)[:MAX_IGNORED_SHOWN]
    return out


def answer(h: ModelHandle, n: int, version: int) -> dict[str, Any]:
    """The /update answer; ``correct``: examples of the entry at ``version`` predicted
    right before they were learned (None when not known here: a ranker's, or an entry
    this worker did not apply itself)."""
    return {"model": h.name, "applied": n, "version": version, "correct": h.correct_at.get(version)}


# The ignored field names an /update answer lists at most (first met first).
MAX_IGNORED_SHOWN = 50

# Printable ASCII (space to tilde), 1 to 200 characters.
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,200}")


def check_idempotency_key(key: str) -> None:
    if _IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise invalid(
            "Idempotency-Key must be 1 to 200 printable ASCII characters", "Idempotency-Key"
        )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# The top-level "model" key: in a body the fast parsers accept, the only key so named.
_MODEL_KEY = re.compile(rb'"model"\s*:\s*"([A-Za-z0-9._-]{1,64})"')
# Smaller /predict bodies go the general way: a few rows parse as fast with orjson.
_FAST_INSTANCES_MIN = 2048
# dense /predict bodies scanned on the loop (a bigger one goes the general way, which
# also parses it off the loop when it is big)
_FAST_DENSE_MAX = 1 << 16


# The members a body may hold (the OpenAPI document's UpdateRequest / PredictRequest).
# The compiled scanners take only bodies of model and examples/instances and leave
# any other to the general path, so this check sees every body with another member.
UPDATE_MEMBERS = ("model", "examples", "queries")
PREDICT_MEMBERS = ("model", "instances", "queries", "k", "min_version")


def only_known(body: dict[str, Any], known: tuple[str, ...], route: str) -> None:
    """Refuse a member the route does not read (a typo such as ``minversion`` would
    otherwise be ignored silently): 422 naming the first one, in body order."""
    for member in body:
        if member not in known:
            shown = member if len(member) <= 80 else member[:80] + "..."
            raise invalid(
                f"{shown}: unknown field (a {route} body has only {', '.join(known)})", shown
            )


def only_one_of(body: dict[str, Any], a: str, b: str) -> None:
    """The body carries ``a`` or ``b``, not both (the document's ``oneOf``): a model
    reads only one of them, and the other would be silently ignored."""
    if a in body and b in body:
        raise invalid(f"{b}: give either {a!r} or {b!r}, not both", b)


def model_name(body: dict[str, Any], state: dict[str, Any]) -> str:
    """The body's ``model``; on ``/models/{name}/...`` the path's, which a body
    ``model`` may repeat but not contradict."""
    path = state.get("path_model")
    if path is None:
        return require_str(body, "model")
    given = body.get("model", path)
    if given != path:
        raise invalid(
            f"model: {str(given)[:80]!r} differs from the model in the path ({path!r})", "model"
        )
    return str(path)


async def _parse_raw(
    engine: Engine, settings: Settings, raw: bytes, path_model: str | None = None
) -> tuple[ModelHandle, bytes, int] | None:
    """The adapter's bytes-only parse (``parse_update_raw``), when it takes the body
    (on ``/models/{name}/update``, a body naming the path's model; any other body
    goes the general way, which says what is wrong)."""
    m = _MODEL_KEY.search(raw)
    name = m.group(1).decode() if m else None
    if path_model is not None and name != path_model:
        return None
    h = engine.models.get(name) if name else None
    if h is None or not h.adapter.online or h.leader is not None:
        return None
    fast = await _off_loop_if_big(settings, raw, h.adapter.parse_update_raw, raw, settings)
    if fast is None or fast.model != h.name:
        return None
    return h, fast.payload, fast.n


async def _off_loop_if_big(settings: Settings, raw: bytes, fn: Any, *args: Any) -> Any:
    # Encoding a big batch takes tens of ms: off the loop, so predicts keep flowing
    # (parsing reads only the model's config, never its state).
    if len(raw) > settings.parse_in_thread_bytes:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


def _dense_instances(
    engine: Engine, settings: Settings, raw: bytes, path_model: str | None
) -> tuple[ModelHandle, list[Any]] | None:
    """A small ``{"model", "instances"}`` body of dense rows for a model this worker
    holds, answered from the body's bytes (``LinearAdapter.predict_raw``: the compiled
    scanner and one kernel call, the general path's answers bit for bit); None for any
    other body or model, which goes the general way (and is refused there, naming the
    field, if it is wrong)."""
    if len(raw) > _FAST_DENSE_MAX or b'"instances"' not in raw:
        return None
    if path_model is None:
        m = _MODEL_KEY.search(raw)
        name = m.group(1).decode() if m else None
    else:
        name = path_model
    h = engine.models.get(name) if name else None
    if h is None or not h.owned or not h.adapter.online:  # (a guest catches up first)
        return None
    served = followers.serving(h)  # a promoted follower answers under the leader's name
    fast = served.adapter.predict_raw(raw, settings)
    if fast is None:
        return None
    said, predictions = fast  # the body's "model": the path's, or left out there
    if said != h.name and not (said is None and path_model is not None):
        return None
    return h, predictions


async def _batch_instances(
    engine: Engine, settings: Settings, raw: bytes, path_model: str | None
) -> tuple[ModelHandle, Batch] | None:
    """A batch model's (LambdaMART, LL-SVM, FastXML) ``{"model", "instances"}`` body of
    sparse rows as the batch its adapter would encode (``fast_json_instances``: the
    same arrays bit for bit); None for any other body or model, which goes the general
    way (and is refused there, naming the field, if it is wrong)."""
    if len(raw) < _FAST_INSTANCES_MIN or b'"instances"' not in raw[:4096]:
        return None
    if not usable("json-maps"):  # its scanner still compiling: the general path
        return None
    m = _MODEL_KEY.search(raw)
    name = m.group(1).decode() if m else None
    if name is None or (path_model is not None and name != path_model):
        return None
    h = engine.models.get(name)
    if h is None or h.adapter.online or not h.owned or not isinstance(h.adapter, BatchAdapter):
        return None
    dim = h.adapter.n_features
    if h.adapter.model is None or not dim:
        return None
    base = int(getattr(h.adapter, "index_base", 0))
    limits = (settings.max_batch_examples, settings.max_features_per_example)
    scanned = await _off_loop_if_big(settings, raw, scan_sparse_instances, raw, dim, base, *limits)
    if scanned is None or scanned[0] != h.name:
        return None
    return h, scanned[1]


async def predict_body(
    engine: Engine,
    settings: Settings,
    raw: bytes,
    state: dict[str, Any],
    key: str | None = None,
) -> dict[str, Any]:
    """Score one ``/predict`` body (after waiting for ``min_version`` if asked)."""
    fast = await _batch_instances(engine, settings, raw, state.get("path_model"))
    if fast is not None:  # a batch model's sparse instances, read by the compiled scanner
        h, batch = fast
        state["model"] = h.name
        predictions = h.adapter.predict_batch(batch)
        refuse_nonfinite(predictions, "instances")
        return {"model": h.name, "version": h.version, "predictions": predictions}
    dense = _dense_instances(engine, settings, raw, state.get("path_model"))
    if dense is not None:  # an online model's dense rows, read by the compiled scanner
        h, predictions = dense
        state["model"] = h.name
        refuse_nonfinite(predictions, "instances")
        return {"model": h.name, "version": h.version, "predictions": predictions}
    body = parse_json_object(raw)
    only_known(body, PREDICT_MEMBERS, "/predict")
    only_one_of(body, "instances", "queries")
    name = model_name(body, state)
    h = await engine.find(name)
    state["model"] = name
    min_version = optional_int(body, "min_version")
    if "k" in body:  # read by FastXML only, but documented (and checked) for every model
        k = optional_int(body, "k", minimum=1)
        if k is None or k > 100:
            raise invalid(f"k: must be an integer in [1, 100], got {body['k']!r}", "k")
    if min_version is not None and h.version < min_version:
        ok = await engine.wait_for_version(h, min_version, settings.min_version_wait_seconds)
        if not ok:
            raise ServiceError(
                Kind.UNAVAILABLE,
                "version_not_reached",
                f"this worker is at version {h.version} of {name!r}, "
                f"min_version {min_version} not reached in time",
                "min_version",
                retry_after=1,
            )
    if (b'id"' in raw or b"\\" in raw) and delayed_labels.sent_ids(body, "instances"):
        version = h.version  # that of the predictions (the store write may see a newer)
        tracked = await delayed_labels.predict_tracked(
            engine, settings, h, body, raw, followers.serving(h).adapter
        )
        return {"model": name, "version": version, "predictions": tracked}
    served = followers.serving(h)  # a promoted follower answers under the leader's name
    predictions = served.adapter.predict(body, settings, raw)
    refuse_nonfinite(predictions, "queries" if "queries" in body else "instances")
    return {"model": name, "version": h.version, "predictions": predictions}
