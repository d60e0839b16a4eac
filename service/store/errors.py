"""What the store raises: the errors every implementation shares (re-exported by
:mod:`service.store.base`)."""

from __future__ import annotations


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
