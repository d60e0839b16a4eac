"""An update from the API to the log and back: append it (plain, with an idempotency
key, or learning delayed labels), apply the log here in order up to it, answer how
it went.

The store's errors become the API's: 503 when it is unreachable (the update was not
accepted, or is stored but not applied here yet), 404 when the model was deleted by
another worker meanwhile, 409 for an idempotency key reused with another body, and
the error an entry failed with when it could not be applied (recorded in the store
first, so a retry with its key answers alike on any worker).

Functions over the :class:`~service.engine.registry.Registry` table; the engine
(:class:`service.engine.facade.Engine`) calls them under its own names.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from service.engine import catalog, checkpoints, followers, log_application, update_outcomes
from service.engine.model_handle import ModelHandle
from service.engine.registry import Registry
from service.errors import Kind, ServiceError, invalid, not_found, store_unavailable
from service.store.base import (
    IdempotencyKeyReused,
    KeyGuard,
    KeyReplayed,
    ModelNotFound,
    NotAFollower,
    StoreUnavailable,
    payload_digest,
)


def stored_not_applied(registry: Registry, e: StoreUnavailable) -> ServiceError:
    """The 503 for an update that is in the log but could not be applied here yet."""
    registry.health.failed("read_log", e)
    return store_unavailable(
        "the update is stored but could not be applied yet; "
        "it will be applied when the store is back"
    )


def _store_ok(registry: Registry) -> None:
    """The store answered: healthy (its gauge is set only when that changes)."""
    if not registry.health.up:
        registry.health.ok()


@contextlib.contextmanager
def _appending(registry: Registry, h: ModelHandle) -> Iterator[None]:
    """The API's answers to an append the store refused: a 503 when it is unreachable
    (nothing was accepted), a 404 when the model was deleted by another worker."""
    try:
        yield
    except StoreUnavailable as e:
        registry.health.failed("append", e)
        raise store_unavailable("the store is unreachable; the update was not accepted") from e
    except ModelNotFound:
        registry.drop(h.name)  # deleted by another worker meanwhile
        raise not_found(h.name) from None


async def submit_update(
    registry: Registry, h: ModelHandle, payload: bytes, entries: list[bytes] | None = None
) -> int:
    """Append durably, apply in log order up to our entry, return its position.
    ``entries``: the requests' own entry objects of a group entry ``payload``."""
    # Hashed once: the store's chain head and our own check of it take the digest.
    digest = payload_digest(payload)
    with _appending(registry, h):
        position, head = await registry.store.append_entry(h.name, payload, digest)
    _store_ok(registry)
    if entries is not None and position > h.version:
        h.local_group[position] = entries
    try:
        await apply_own(registry, h, position, payload, head, digest)
    finally:
        h.local_group.pop(position, None)
    return position


async def submit_serving(
    registry: Registry, h: ModelHandle, payload: bytes, follower: str | None
) -> int:
    """``submit_update`` of a promotion's control entry (``payload``), appended only
    while ``follower`` (None: the model itself) follows the model, in one atomic step
    with the check (``Store.append_serving``): a follower deleted meanwhile is a 409,
    and then cannot be promoted and deleted both."""
    try:
        with _appending(registry, h):
            position, head = await registry.store.append_serving(h.name, payload, follower)
    except NotAFollower:
        raise ServiceError(
            Kind.CONFLICT,
            "not_a_follower",
            f"follower: {follower!r} does not follow {h.name!r} (deleted meanwhile)",
            "follower",
        ) from None
    _store_ok(registry)
    await apply_own(registry, h, position, payload, head)
    return position


def labelled_mark_seconds(registry: Registry) -> float:
    """How long a labelled id's mark is kept from its label: as long as idempotency
    records at least (a retry of the label then is answered as the first time), and as
    long as predictions (an id is used once within the time-to-live of ids)."""
    s = registry.settings
    return max(s.feedback_ttl_seconds, s.idempotency_ttl_seconds)


async def submit_labelled(
    registry: Registry,
    h: ModelHandle,
    payload: bytes,
    labels: list[tuple[str, str, str]],
    once: KeyGuard | None = None,
    entries: list[bytes] | None = None,
) -> tuple[int, bool]:
    """``submit_update`` of an entry that learns delayed labels: the ids are marked
    labelled in the same atomic step as the append (``Store.append_labelled``, which
    raises ``FeedbackConflict`` and appends nothing when one cannot be). With ``once``
    (an idempotency key) at most once per key, as ``submit_update_once``. Returns
    ``(position, replayed)``. ``entries``: the requests' own entries of a group entry
    ``payload`` (service.engine.reward_groups)."""
    try:
        with _appending(registry, h), _key_reused(h):
            position, head = await registry.store.append_labelled(
                h.name, payload, labels, once, keep_seconds=labelled_mark_seconds(registry)
            )
    except KeyReplayed as r:
        _store_ok(registry)
        assert once is not None
        await replay(registry, h, once.key, r.position)
        return r.position, True
    _store_ok(registry)
    if entries is not None and position > h.version:
        h.local_group[position] = entries
    try:
        await apply_own(registry, h, position, payload, head)
    finally:
        h.local_group.pop(position, None)
    return position, False


async def key_recorded(registry: Registry, h: ModelHandle, key: str) -> bool:
    return await key_entry(registry, h, key) is not None


async def key_entry(registry: Registry, h: ModelHandle, key: str) -> tuple[int, int, str] | None:
    """The live idempotency key's ``(position, n, payload_hash)``, or None."""
    try:
        return await registry.store.key_entry(h.name, key)
    except StoreUnavailable as e:
        registry.health.failed("append", e)
        raise store_unavailable("the store is unreachable; the update was not accepted") from e


def key_reused(h: ModelHandle) -> ServiceError:
    """The 409 for an idempotency key sent again with another body."""
    return ServiceError(
        Kind.CONFLICT,
        "idempotency_key_reused",
        f"this Idempotency-Key was already used for model {h.name!r} with a "
        "different body; send a new key for a new batch",
        "Idempotency-Key",
    )


@contextlib.contextmanager
def _key_reused(h: ModelHandle) -> Iterator[None]:
    try:
        yield
    except IdempotencyKeyReused:
        raise key_reused(h) from None


async def submit_update_once(
    registry: Registry, h: ModelHandle, payload: bytes, key: str, payload_hash: str, n: int
) -> tuple[int, int, bool]:
    """``submit_update`` at most once per (model, idempotency ``key``).

    Returns ``(position, n, replayed)``: a key seen before (within
    ``idempotency_ttl_seconds``) appends nothing and gives the first request's
    position and ``n``, once this worker has applied that position, exactly as a
    new entry is waited for. A key seen with another ``payload_hash`` is a 409."""
    with _appending(registry, h), _key_reused(h):
        position, n, replayed = await registry.store.append_once(
            h.name, payload, key, payload_hash, n, registry.settings.idempotency_ttl_seconds
        )
    _store_ok(registry)
    if replayed:
        await replay(registry, h, key, position)
    else:
        await apply_own(registry, h, position, payload)
    return position, n, replayed


async def replay(registry: Registry, h: ModelHandle, key: str, position: int) -> None:
    """A keyed request sent again: its entry (at ``position``) applied here from the log
    (it may be applied already), and the error it failed with, if it failed, raised
    again as the first answer was (``Idempotent-Replayed`` on it)."""
    try:
        await apply_own(registry, h, position, None)
    except ServiceError as e:
        if e.kind is Kind.INVALID:  # the entry failed here, as the first time
            e.replayed = True
        raise
    # Applied fine as far as this worker knows; but it may have forgotten the failure
    # (restarted, restored from a later checkpoint, thousands of later failures): the
    # store keeps the first answer with the key.
    try:
        failure = await update_outcomes.recorded_failure(registry, h, key)
    except StoreUnavailable as e:
        raise stored_not_applied(registry, e) from e
    if failure is not None:
        raise failure


async def apply_own(
    registry: Registry,
    h: ModelHandle,
    position: int,
    payload: bytes | None,
    head: str | None = None,
    digest: str | None = None,
) -> None:
    """Apply the log up to ``position`` (our entry, ``payload`` if we hold it, with
    the chain ``head`` the store gave it and its ``payload_digest`` if known); raise
    the error the entry failed with, if it could not be applied."""
    if position <= h.version:
        # Already applied by the apply-loop, or our copy is of a model deleted and
        # created again elsewhere (its log restarted at 1): then load the new one.
        try:
            if await registry.store.get_generation(h.name) != h.generation:
                h = await catalog.reload(registry, h.name)
        except StoreUnavailable as e:
            raise stored_not_applied(registry, e) from e
    if head and position <= h.version and dict(h.recent_heads).get(position) != head:
        # Applied here already (by the apply-loop), unless the store handed out a
        # position we had applied for another entry: it lost the log's tail. Then
        # rebuild from the store and apply as usual.
        async with h.lock:
            try:
                lost = position <= h.version and (
                    dict(h.recent_heads).get(position, head) != head
                    or await log_application.store_lost_tail(registry, h)
                )
                if lost:
                    await log_application.lost_tail(registry, h, position)
            except StoreUnavailable as e:
                raise stored_not_applied(registry, e) from e
    if payload is not None and position > h.version:
        h.local[position] = (payload, head, digest)
    try:
        async with h.lock:
            if h.version < position:
                try:
                    await log_application.catch_up_locked(registry, h, position)
                except StoreUnavailable as e:
                    raise stored_not_applied(registry, e) from e
            h.local.pop(position, None)
            error = h.failed.get(position)
    except BaseException:
        if h.version < position:
            # Stored, and not applied here (the store failed on a read, or we were
            # cancelled): our apply-loop is not woken by our own appends, so catch up
            # in the background, as a wake would have made it do.
            registry.spawn(_apply_later(registry, h, position))
        raise
    if error is not None:
        # Recorded before answering: a retry of it (if it had a key) answers alike.
        await update_outcomes.record_failures(registry, h)
        raise update_outcomes.failure_error(error)
    update_outcomes.record_failures_soon(registry, h)
    checkpoints.maybe_checkpoint(registry, h)


async def _apply_later(registry: Registry, h: ModelHandle, position: int) -> None:
    """Apply the log up to ``position`` once the store answers again (the same handle
    only: a model dropped or reloaded meanwhile catches up by itself). A log that does
    not reach ``position`` after a minute of tries is left to the apply-loop's
    reconciliation (it may have been trimmed behind a newer checkpoint)."""
    delay, waited = 0.1, 0.0
    while h.version < position and registry.models.get(h.name) is h and waited < 60.0:
        before = h.version
        try:
            await log_application.catch_up(registry, h, position)
        except StoreUnavailable:
            pass
        except Exception:  # the apply-loop reports a log it cannot apply
            return
        if h.version < position and h.version == before:  # no progress: wait, retry
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 2.0)


async def wait_for_version(
    registry: Registry, h: ModelHandle, version: int, timeout: float
) -> bool:
    """Until this process has applied ``version`` of the model (or ``timeout``)."""
    if h.version >= version:
        return True
    deadline = time.monotonic() + timeout
    try:
        # One cheap read: a version the log has not reached yet is refused at
        # once, so it can never hold the model's lock or poll the store.
        if h.adapter.online:
            # a follower's versions are its leader's log positions (it has no log)
            log = followers.leader_of(h.config) or h.name
            last = await registry.store.last_position(log)
            what = f"log (last position {last})"
        else:
            last = await registry.store.get_active_version(h.name) or 0
            what = f"active artifact version ({last})"
        if version > last:
            raise invalid(f"min_version: {version} is ahead of the model's {what}", "min_version")
        if h.adapter.online and not h.lock.locked():
            # The entries exist: apply them now (one read) unless someone holding
            # the lock is at it already; then we wait for them below.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(log_application.catch_up(registry, h, version), timeout)
    except StoreUnavailable as e:
        registry.health.failed("read_log", e)
        return h.version >= version
    if h.version >= version or not h.adapter.online:
        # A batch model's new version comes as a new handle (catalog sync): the
        # client retries on the 503 instead of waiting on this one.
        return h.version >= version
    # Someone else holds the work (e.g. a reload): wait until the version moves.
    return await h.wait_applied(version, max(0.0, deadline - time.monotonic()))
