"""The store interface: configs, an append-only update log, checkpoints, artifacts.

Two implementations pass one contract suite (``tests/service/test_store_contract.py``):
``RedisStore`` (production) and ``SQLiteStore`` (the embedded default).

Log positions are integers starting at 1, contiguous per model; the position of
the last applied entry is the model's version. ``append`` returns only after the
entry is durable (as durable as the store is configured to be).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


class StoreUnavailable(RuntimeError):
    """The store cannot be reached; the caller answers 503 and retries later."""


class ConfigConflict(RuntimeError):
    """A model of that name already exists with a different configuration."""


class ValueTooLarge(ValueError):
    """A value (artifact, checkpoint) is larger than the store can hold; the caller
    answers 413. Redis refuses strings over 512 MB (``proto-max-bulk-len``), SQLite
    blobs over ``SQLITE_MAX_LENGTH`` (1e9 bytes by default)."""


class IdempotencyKeyReused(ValueError):
    """``append_once`` found the key recorded for the model with a different payload
    hash: the client reused an idempotency key for another body (the API answers 409)."""


@dataclass(frozen=True)
class KeyGuard:
    """An idempotency key guarding ``append_labelled`` as ``append_once``'s key guards
    an append: recorded in the same atomic step, ``(position, payload_hash, n)``."""

    key: str
    payload_hash: str
    n: int
    ttl_seconds: float

    def __post_init__(self) -> None:
        check_ttl(self.ttl_seconds)
        if not self.key or not self.payload_hash or " " in self.payload_hash:
            raise ValueError("the key and payload_hash must be non-empty, the hash without spaces")


class KeyReplayed(Exception):
    """``append_labelled`` found its ``KeyGuard``'s key recorded with the same payload
    hash: nothing was appended or marked; ``position`` and ``n`` are the first append's."""

    def __init__(self, position: int, n: int) -> None:
        super().__init__(f"idempotency key recorded at position {position}")
        self.position, self.n = position, n


class FeedbackConflict(RuntimeError):
    """``append_labelled`` refused the append: the ``index``-th id of its ``labels`` is
    ``"missing"`` (unknown, or expired), already ``"labelled"``, or its record
    ``"changed"`` (predicted again since it was read). Nothing was appended or marked."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"labels[{index}]: {reason}")
        self.index, self.reason = index, reason


class LogDiverged(RuntimeError):
    """A checkpoint's state does not match the log at its position: the writer applied
    entries that the store has since lost (a failover lost the log's tail). The caller
    reloads the model from the store instead of keeping (or saving) that state."""


class ActiveVersionChanged(RuntimeError):
    """``set_active_version(..., expected=v)`` found another active version than ``v``
    (a concurrent rollback or deploy won): nothing was changed (the API answers 409)."""

    def __init__(self, name: str, expected: int, active: int | None) -> None:
        super().__init__(
            f"model {name!r}: the active version is {active}, not the expected {expected}"
        )
        self.expected, self.active = expected, active


class ArtifactActive(RuntimeError):
    """``delete_artifact`` of the version the model serves: refused, nothing deleted
    (the API answers 409; activate another version first)."""

    def __init__(self, name: str, version: int) -> None:
        super().__init__(f"model {name!r}: version {version} is the active one")
        self.version = version


class ModelInUse(RuntimeError):
    """``delete_model`` refused, nothing deleted: the model is a leader that ``followers``
    follow (``reason`` "has_followers"), or a follower its leader's promotion makes
    answer ``/predict`` (``reason`` "promoted"; ``followers`` names the leader)."""

    def __init__(self, name: str, reason: str, others: list[str]) -> None:
        super().__init__(f"model {name!r}: {reason} {others}")
        self.reason, self.others = reason, others


class LeaderGone(RuntimeError):
    """``create_follower`` refused, nothing stored: the leader is gone (deleted, or
    deleted and created again: another generation), or its log no longer holds the
    entries after the follower's ``from_version`` (trimmed meanwhile: read it again)."""

    def __init__(self, leader: str, trimmed: bool = False) -> None:
        super().__init__(f"leader {leader!r} {'trimmed' if trimmed else 'gone'}")
        self.leader, self.trimmed = leader, trimmed


class NotAFollower(RuntimeError):
    """``append_serving`` refused, nothing appended: the model named is not (or no
    longer: deleted) a follower of the model whose log it was to be appended to."""


class ModelNotFound(KeyError):
    """The model does not exist (never created, or deleted). Raised by writes that
    need the model (``append``, ``add_artifact``, ``set_active_version``); reads of a
    missing model return empty results instead."""


def validate_name(name: str) -> str:
    """Return ``name`` if a store can hold it, else raise ValueError saying why.

    Curly braces are refused because RedisStore puts the name in a ``{hash tag}``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("model name must be a non-empty string")
    if len(name) > 200:
        raise ValueError(f"model name is {len(name)} characters long; the limit is 200")
    if any(c in "{}" or ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"model name {name!r} must not contain braces or control characters")
    if name in (".", ".."):  # HTTP clients normalise /models/.. away: unreachable by URL
        raise ValueError(f"model name {name!r} is reserved (a path segment)")
    return name


def canonical_config(config: dict[str, Any]) -> str:
    """The JSON text that configs are stored and compared as (sorted keys, compact)."""
    import json

    if not isinstance(config, dict):
        raise ValueError("config must be a JSON object")
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)


def payload_digest(payload: bytes | memoryview) -> str:
    """SHA-1 (hex) of one log entry's payload: what the chain of heads is built from."""
    return hashlib.sha1(payload).hexdigest()


def chain_head(prev_head: str, payload: bytes | memoryview, digest: str | None = None) -> str:
    """The log's head after appending ``payload`` to a log whose head was ``prev_head``:
    ``sha1hex(prev_head ‖ sha1hex(payload))`` ("" before the first entry).

    Every store computes it inside the append's atomic step (Redis in its Lua script,
    which has ``redis.sha1hex``; SQLite in the append transaction) and keeps it beside
    the entry and the model's ``seq``. A worker recomputes it from the entries it
    applies: a position that comes back holding another entry (the log lost its tail
    in a failover and was appended to again) gives another head, so the worker
    reloads instead of answering a version it did not apply. Integrity against
    accidents, not an adversary: SHA-1 is what Redis's Lua offers.

    ``digest``: ``payload_digest(payload)`` when the caller has it already (the
    appending worker hashes its entry once, for the store and for its own check)."""
    if digest is None:
        digest = payload_digest(payload)
    return hashlib.sha1((prev_head + digest).encode()).hexdigest()


@dataclass(frozen=True)
class LogEntry:
    position: int
    payload: bytes
    # The log's chain head after this entry ("" for an entry written before chains
    # existed: nothing to check it against).
    head: str = ""
    # payload_digest(payload) as its appender computed it, when the store kept it (Redis):
    # a worker applying the entry checks the chain without hashing the payload again.
    digest: str | None = None


@dataclass(frozen=True)
class Feedback:
    """What the store holds for one (model, id) given to a prediction (delayed labels):
    the service's ``record`` (the features as learned, the prediction served) until the
    id is labelled; then the label's ``mark`` (opaque text) and the ``position`` of the
    log entry that learned it, and no record."""

    record: bytes | None
    mark: str | None = None
    position: int = 0


def record_digest(record: bytes) -> str:
    """SHA-1 (hex) of a feedback record: ``append_labelled`` checks that the record it
    marks is the one the caller read (Redis's Lua has ``redis.sha1hex``)."""
    return hashlib.sha1(record).hexdigest()


def check_feedback_records(records: list[tuple[str, bytes]]) -> None:
    """``put_feedback``'s ``records``: distinct non-empty ids, non-empty byte records."""
    if len({i for i, _ in records}) != len(records):
        raise ValueError("ids must be distinct")
    for i, rec in records:
        if not isinstance(i, str) or not i:
            raise ValueError("an id must be a non-empty string")
        if not isinstance(rec, bytes | bytearray) or not rec:
            raise ValueError("a record must be non-empty bytes")


def check_payload(payload: object) -> None:
    """An entry's payload for the log: bytes, bytearray or memoryview."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise TypeError(f"payload must be bytes, got {type(payload).__name__}")


def check_ttl(ttl_seconds: float) -> None:
    """How long a store keeps an idempotency key or a feedback record: > 0 seconds."""
    if ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be > 0")


def check_feedback_labels(labels: list[tuple[str, str, str]]) -> None:
    """``append_labelled``'s ``labels``: distinct non-empty ids, non-empty marks."""
    if len({i for i, _, _ in labels}) != len(labels):
        raise ValueError("ids must be distinct")
    if any(not i or not m for i, _, m in labels):
        raise ValueError("ids and marks must be non-empty")


@dataclass(frozen=True)
class Checkpoint:
    position: int  # the last log position the state includes
    blob: bytes  # learner artifact bytes
    created_at: float


@dataclass(frozen=True)
class ArtifactVersion:
    version: int
    size: int
    checksum: str
    created_at: float
    kind: str


class Store(ABC):
    name: str = "store"
    # True when ``wait_for_changes`` reports every change unless it returns None (no
    # lost wakes): the apply-loop then reconciles every model's position only rarely.
    wakes_complete: bool = False

    # -------------------------------------------------------------- lifecycle
    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def ping(self) -> bool:
        """True when the store answers now."""

    # -------------------------------------------------------------- configs
    @abstractmethod
    async def create_model(self, name: str, config: dict[str, Any]) -> bool:
        """Create atomically. True if created, False if an equal config exists;
        raises ConfigConflict if a different one exists. Configs are compared as
        ``canonical_config`` text. Raises ValueError for a bad name (``validate_name``)."""

    @abstractmethod
    async def create_model_from_checkpoint(
        self, name: str, config: dict[str, Any], blob: bytes | memoryview
    ) -> bool:
        """``create_model`` of a model that starts from a state (an imported one): the
        model and ``blob`` as its checkpoint at position 0 appear in one atomic step, so
        no worker ever sees the model without its starting state. True if created;
        False if a model with an equal config exists (``blob`` is then not stored);
        ConfigConflict as ``create_model``. ValueTooLarge as ``put_checkpoint``."""

    @abstractmethod
    async def get_config(self, name: str) -> dict[str, Any] | None: ...

    @abstractmethod
    async def list_models(self) -> dict[str, dict[str, Any]]:
        """Every model's config, by name."""

    @abstractmethod
    async def delete_model(self, name: str) -> bool:
        """Remove the model and everything stored for it. False if it did not exist.
        ``ModelInUse`` (nothing deleted) for a leader with followers, or a follower that
        answers for its leader (see ``create_follower``)."""

    # -------------------------------------------------------------- followers
    # A follower (a config with ``"follows": {"model": leader, "from_version": p}``) and
    # its leader are kept consistent by the store, each step atomic against the others:
    # a follower is created only while its leader (that generation) exists and its log
    # holds the entries after ``p``; a leader with followers is not deleted (delete its
    # followers first); a follower that answers for its leader (promoted) is not
    # deleted, and a follower is promoted only while it exists; the leader's log is
    # never trimmed past what a follower still needs. ``delete_model`` and ``trim_log``
    # hold these rules for every model.
    async def create_follower(
        self, name: str, config: dict[str, Any], leader_generation: str
    ) -> bool:
        """``create_model`` of a follower (``config["follows"]`` as above), in one atomic
        step with the check of its leader: ``LeaderGone`` when the leader does not exist
        with ``leader_generation`` or its log lost the entries after ``from_version``;
        nothing is stored then."""
        raise NotImplementedError

    async def append_serving(
        self, name: str, payload: bytes, serving: str | None
    ) -> tuple[int, str]:
        """``append_entry`` of a promotion (``payload``: the control entry) that also
        records ``serving`` (a follower of ``name``, or None: the model itself) as the
        follower that answers for ``name``, in the same atomic step. ``NotAFollower``
        when ``serving`` is not a follower of ``name`` (nothing appended);
        ``ModelNotFound`` like ``append``."""
        raise NotImplementedError

    @abstractmethod
    async def get_generation(self, name: str) -> str | None:
        """The id the store gave the model when it was created (a new one every time
        a model of that name is created again after a delete), "" for a model stored
        before generations existed, None if there is no such model. Replicas compare
        it to tell a re-created model from the one they hold (log positions restart
        at 1 after a delete). Not part of the config: ``create_model`` ignores it."""

    @abstractmethod
    async def list_generations(self) -> dict[str, str]:
        """Every model's generation (see ``get_generation``), by name."""

    @abstractmethod
    async def catalog_epoch(self) -> int:
        """A counter bumped by every create/delete of a model and every artifact
        add/activate, so other workers notice catalog changes cheaply."""

    # -------------------------------------------------------------- update log
    async def append(self, name: str, payload: bytes) -> int:
        """Append one entry; returns its position (1, 2, ...) once durable.
        Raises ModelNotFound if the model does not exist (so a concurrent delete can
        never leave stray entries that a re-created model would inherit)."""
        return (await self.append_entry(name, payload))[0]

    @abstractmethod
    async def append_entry(
        self, name: str, payload: bytes, digest: str | None = None
    ) -> tuple[int, str]:
        """``append``, also returning the log's chain head after the entry
        (``chain_head`` of the previous head and ``payload``, computed in the same
        atomic step). ``digest``: ``payload_digest(payload)``, if the caller has it."""

    @abstractmethod
    async def append_once(
        self, name: str, payload: bytes, key: str, payload_hash: str, n: int, ttl_seconds: float
    ) -> tuple[int, int, bool]:
        """``append`` at most once per (model, ``key``) within ``ttl_seconds``.

        One atomic step (one Lua script / one transaction): if ``key`` is recorded for
        the model, nothing is appended and the recorded ``(position, n, True)`` comes
        back, or ``IdempotencyKeyReused`` is raised when its ``payload_hash`` differs;
        otherwise the entry is appended exactly as ``append`` does, and ``(position,
        payload_hash, n)`` is recorded under ``key`` in the same step; returns
        ``(position, n, False)``. ``n`` is opaque to the store (the service passes the
        number of examples, so a replay answers what the first request answered).

        Records expire ``ttl_seconds`` after they were written (then the key is new
        again). Deleting the model removes its records, and a model created again
        under the same name never sees the old model's records. Raises ModelNotFound
        like ``append``. Appends without a key (``append``) never pay for any of this.
        """

    @abstractmethod
    async def record_outcome(
        self, name: str, position: int, outcome: str, generation: str | None = None
    ) -> bool:
        """Record ``outcome`` (opaque text: the service stores the answer of an entry
        that could not be applied) with the idempotency key whose entry is at
        ``position``, so a replay of that key answers it (``get_outcome``) whichever
        worker serves it. One atomic step; True if this call recorded it. The first
        outcome recorded stays (every worker applying the entry records the same one).
        Does nothing and returns False when no live key points at ``position`` (an
        entry appended without a key, an expired key), when the model is gone, or,
        given a ``generation``, when the model's is another (the writer holds a
        deleted model's state). The record goes when the key does (expiry, delete)."""

    @abstractmethod
    async def key_recorded(self, name: str, key: str) -> bool:
        """Whether the idempotency ``key`` is recorded (live) for the model: a request
        with it is a retry, to be answered as the first one was (never refused anew)."""

    @abstractmethod
    async def key_entry(self, name: str, key: str) -> tuple[int, int, str] | None:
        """The live idempotency ``key``'s record for the model: ``(position, n,
        payload_hash)`` of the append it guarded, or None."""

    @abstractmethod
    async def get_outcome(self, name: str, key: str) -> str | None:
        """The outcome recorded for the live idempotency ``key`` (``record_outcome``),
        or None: no such key, or its entry has no recorded outcome (yet)."""

    # -------------------------------------------------------------- delayed labels
    @abstractmethod
    async def put_feedback(
        self,
        name: str,
        records: list[tuple[str, bytes]],
        ttl_seconds: float,
        replace: bool = True,
    ) -> int | None:
        """Keep each ``(id, record)`` (distinct ids) for ``ttl_seconds`` under the model.

        One atomic step: if an id is already labelled (and not expired), nothing is
        stored and its index in ``records`` comes back; else every record is stored
        (replacing an unlabelled one of the same id, whose expiry starts again) and
        None comes back. With ``replace=False`` an id that holds an unexpired record is
        taken as a labelled one is (its index back, nothing stored): a decision kept
        once is never replaced by a retry racing it. Expired records are swept as it
        goes. Deleting the model removes its records; a model created again never sees
        the old ones. Raises ModelNotFound."""

    async def fence(self, name: str) -> None:
        """Return once everything stored for the model so far is as durable as an
        acknowledged write is (Redis with ``wait_replicas`` / WAITAOF: a write on the
        model's slot, then the acknowledgement's WAIT, which covers every write before
        it); raise StoreUnavailable when that is not had in time. For answering a retry
        from what an earlier attempt stored but did not get acknowledged. A store whose
        writes are durable once stored needs nothing."""
        return None

    @abstractmethod
    async def get_feedback(self, name: str, ids: list[str]) -> list[Feedback | None]:
        """What is stored for each id (None: unknown, expired, or of a deleted model)."""

    @abstractmethod
    async def append_labelled(
        self,
        name: str,
        payload: bytes,
        labels: list[tuple[str, str, str]],
        once: KeyGuard | None = None,
        keep_seconds: float = 0.0,
    ) -> tuple[int, str]:
        """``append_entry`` that also marks ids labelled, in the same atomic step.

        ``labels``: ``(id, record_digest(record read), mark)`` with distinct ids. Each id
        must be stored, unexpired, unlabelled and still hold that record, else
        ``FeedbackConflict`` names the first that does not and nothing is appended or
        marked. Otherwise the entry is appended, and each id gets ``mark`` and the
        entry's position; its record is dropped. The mark (label and position) stays
        ``keep_seconds`` from now, or until the prediction's expiry if that is later:
        the service keeps it as long as idempotency records at least, so a label sent
        again after the prediction's time-to-live is still answered as the first time,
        and the id still cannot be predicted with again.
        So an id is learned at most once, whichever worker labels it, and an append
        that fails leaves no id marked. Raises ModelNotFound like ``append``.

        With ``once``, its key is looked up first, in the same step: recorded with the
        same payload hash, ``KeyReplayed`` is raised and nothing is appended or marked
        (the ids are labelled by the first append then); with another hash,
        ``IdempotencyKeyReused``; else the key is recorded with the append, as
        ``append_once`` records it (and its outcome recorded alike)."""

    async def due_feedback(self, name: str, within_seconds: float, limit: int) -> list[str]:
        """Ids whose record is stored and unlabelled and whose expiry is within
        ``within_seconds`` from now (the soonest first, at most ``limit``): a decision
        model's events due for their default reward (``service.engine.decision_defaults``
        keeps their records ``reward_wait_seconds`` + that much). [] for an unknown model."""
        raise NotImplementedError(f"{type(self).__name__} does not list due feedback")

    async def sweep_feedback(self) -> int:
        """Drop expired feedback records now (stores that keep them past expiry until
        swept); how many went. The service calls it now and then."""
        return 0

    @abstractmethod
    async def read_log(self, name: str, after: int, limit: int = 1000) -> list[LogEntry]:
        """Entries with position > ``after``, in order (at most ``limit``)."""

    @abstractmethod
    async def last_position(self, name: str) -> int:
        """Position of the newest entry ever appended (0 if none); survives trimming."""

    @abstractmethod
    async def trim_log(self, name: str, upto: int) -> None:
        """Drop entries with position <= ``upto`` (they are covered by a checkpoint), but
        none that a follower of the model needs: past its checkpoint's position, or its
        ``from_version`` when it has none (read atomically with the trim)."""

    async def wait_for_changes(
        self, after: dict[str, int], timeout: float
    ) -> dict[str, int] | None:
        """Wait until some model in ``after`` may have entries past its position (or
        ``timeout`` seconds), and say which: ``{name: last position}`` of the models
        that changed (possibly {} after a timeout), or None when the store cannot tell
        (the caller then checks every model). The apply-loop uses it, so that a pass
        costs O(models changed), not O(models held). The default cannot tell."""
        await self.wait_for_entries(after, timeout)
        return None

    async def last_positions(self, names: list[str]) -> dict[str, int]:
        """``last_position`` of many models at once (the stores batch the reads)."""
        return {n: await self.last_position(n) for n in names}

    async def wait_for_entries(self, after: dict[str, int], timeout: float) -> None:
        """Return when any model in ``after`` may have entries past its position, or
        after ``timeout`` seconds. The default polls; RedisStore blocks on XREAD."""
        import asyncio

        await asyncio.sleep(min(timeout, 0.05))

    # -------------------------------------------------------------- leases
    @abstractmethod
    async def try_lease(self, name: str, purpose: str, holder: str, ttl_seconds: float) -> bool:
        """Take or renew the model's ``purpose`` lease (e.g. "checkpoint") for ``holder``
        for ``ttl_seconds``: True if ``holder`` holds it now, False while another
        holder's lease runs. One atomic step in the model's own keys (one Redis
        Cluster slot); deleted with the model. So N workers do not all write N
        checkpoints of one model: whoever holds the lease writes, the others skip."""

    # -------------------------------------------------------------- checkpoints
    @abstractmethod
    async def put_checkpoint(
        self,
        name: str,
        position: int,
        blob: bytes | memoryview,
        generation: str | None = None,
        head: str | None = None,
    ) -> None:
        """Write state + position atomically; an older position never replaces a newer one
        (an equal one does). Silently ignored if the model no longer exists, or, given a
        ``generation``, if the model's is another (the state is of a model deleted and
        created again since; it must not become the new model's checkpoint). ``blob`` may
        be any contiguous byte buffer (the service passes a memoryview: no copy on the
        event loop); it is not modified, nor kept after the call. Given the chain
        ``head`` the state was built up to, a store whose log can lose its tail (Redis
        after a failover) raises ``LogDiverged`` instead of writing when its log does not
        hold that head at ``position``; SQLite's log never loses a committed tail and
        does not check."""

    @abstractmethod
    async def get_checkpoint(self, name: str) -> Checkpoint | None: ...

    # -------------------------------------------------------------- batch-model artifacts
    @abstractmethod
    async def add_artifact(self, name: str, blob: bytes, kind: str, checksum: str) -> int:
        """Store a new artifact version (1, 2, ...) and make it active; returns the version.
        Raises ModelNotFound if the model does not exist."""

    @abstractmethod
    async def put_artifact(
        self, name: str, blob: bytes, kind: str, checksum: str
    ) -> tuple[int, bool]:
        """Deploy an artifact: if a stored version of the model has this ``checksum`` (the
        same bytes), make that one active and return ``(version, False)``, storing
        nothing; else ``add_artifact`` and return ``(new version, True)``. One atomic
        step, so two identical deploys racing from two workers store one version.
        Raises ModelNotFound if the model does not exist."""

    @abstractmethod
    async def delete_artifact(self, name: str, version: int) -> bool:
        """Delete a stored version; False if there is no such version. Atomic with the
        active version: the active one is refused (:class:`ArtifactActive`). Raises
        ModelNotFound if the model does not exist."""

    @abstractmethod
    async def list_artifacts(self, name: str) -> list[ArtifactVersion]: ...

    @abstractmethod
    async def get_artifact(self, name: str, version: int) -> bytes | None: ...

    @abstractmethod
    async def get_active_version(self, name: str) -> int | None: ...

    @abstractmethod
    async def set_active_version(
        self, name: str, version: int, *, expected: int | None = None
    ) -> None:
        """Raises ModelNotFound for a missing model, ValueError for an unknown version.

        With ``expected``, a compare-and-set: the switch happens only if the active
        version is still ``expected`` (atomically), else :class:`ActiveVersionChanged`."""
