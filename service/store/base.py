"""The store interface: configs, an append-only update log, checkpoints, artifacts.

Two implementations pass one contract suite (``tests/service/test_store_contract.py``):
``RedisStore`` (production) and ``SQLiteStore`` (the embedded default).

Log positions are integers starting at 1, contiguous per model; the position of
the last applied entry is the model's version. ``append`` returns only after the
entry is durable (as durable as the store is configured to be).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from service.store.errors import (  # noqa: F401  (re-exported: the store's contract)
    ActiveVersionChanged,
    ArtifactActive,
    ConfigConflict,
    FeedbackConflict,
    IdempotencyKeyReused,
    KeyReplayed,
    LeaderGone,
    LogDiverged,
    ModelInUse,
    ModelNotFound,
    NotAFollower,
    StoreUnavailable,
    ValueTooLarge,
)
from service.store.values import (  # noqa: F401
    ArtifactVersion,
    Checkpoint,
    Feedback,
    KeyGuard,
    LogEntry,
    canonical_config,
    chain_head,
    check_feedback_labels,
    check_feedback_records,
    check_payload,
    check_ttl,
    payload_digest,
    record_digest,
    validate_name,
)


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
