"""The answer of an ``/update`` whose entry was appended but could not be applied, kept
so that a retry with the same ``Idempotency-Key`` gets that answer again.

An entry fails to apply deterministically (every replica holds the same state, so
every replica fails on it), but a worker only remembers the last few thousand
failures it saw itself (``ModelHandle.failed``), and a worker restored from a
checkpoint past the entry never saw it fail. So whichever worker applies a failing
entry records the failure's answer with the entry's idempotency key in the store
(``Store.record_outcome``: a no-op for an entry appended without a key), and a
replay answers from there. The most recent failures also travel in checkpoints
(``ModelHandle.checkpoint_meta``), for when the store could not take the record.

>>> e = decode(encode(failure_error("weights would become non-finite")))
>>> (e.kind.name, e.code, e.message)
('INVALID', 'invalid_input', 'the update could not be applied: weights would become non-finite')
"""

from __future__ import annotations

import logging

import orjson

from service.engine.model_handle import ModelHandle
from service.engine.registry import Registry
from service.errors import Kind, ServiceError, invalid
from service.store.base import StoreUnavailable

log = logging.getLogger("learnserve.registry")

# The stored record names an error's kind by the number it has always stored (the
# record's format predates the domain errors; records written then still read).
_STORED_CODE = {
    Kind.INVALID: 422, Kind.CONFLICT: 409, Kind.NOT_FOUND: 404, Kind.TOO_LARGE: 413,
    Kind.UNAVAILABLE: 503, Kind.BAD_REQUEST: 400,
}  # fmt: skip
_KIND_OF_CODE = {v: k for k, v in _STORED_CODE.items()}


def failure_error(message: str) -> ServiceError:
    """The answer to an update whose entry could not be applied."""
    return invalid(f"the update could not be applied: {message}")


def encode(err: ServiceError) -> str:
    return orjson.dumps(
        {
            "status": _STORED_CODE[err.kind],
            "error": err.code,
            "message": err.message,
            "field": err.field,
        }
    ).decode()


def decode(text: str) -> ServiceError:
    d = orjson.loads(text)
    kind = _KIND_OF_CODE.get(int(d["status"]), Kind.INVALID)
    return ServiceError(kind, str(d["error"]), str(d["message"]), d.get("field"))


def record_failures_soon(registry: Registry, h: ModelHandle) -> None:
    """Record in the store the outcomes of entries that just failed here, so that a
    replay of their idempotency keys answers them on any worker, at any time."""
    if h.unrecorded:
        registry.spawn(record_failures(registry, h))


async def record_failures(registry: Registry, h: ModelHandle) -> None:
    """Record the outcome of every entry this worker saw fail and has not recorded yet.

    Every worker applying a failing entry records it (the store keeps the first; they
    are equal); an entry appended without a key costs one no-op call. When the store
    is unreachable the positions are kept for the next call."""
    pending, h.unrecorded = h.unrecorded, []
    for i, position in enumerate(pending):
        message = h.failed.get(position)
        if message is None:  # evicted meanwhile (thousands of later failures)
            continue
        try:
            outcome = encode(failure_error(message))
            await registry.store.record_outcome(h.name, position, outcome, h.generation)
        except StoreUnavailable as e:
            registry.health.failed("record_outcome", e)
            h.unrecorded[:0] = pending[i:]
            return
        except Exception:
            log.exception("model %r: outcome of entry %d not recorded", h.name, position)


async def recorded_failure(registry: Registry, h: ModelHandle, key: str) -> ServiceError | None:
    """The failure recorded for a replayed ``key``, if its entry failed to apply."""
    outcome = await registry.store.get_outcome(h.name, key)
    if outcome is None:
        return None
    err = decode(outcome)
    err.replayed = True
    return err
