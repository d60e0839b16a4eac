"""One hosted model (:class:`ModelHandle`): its adapter, version, lock, progressive
metrics (:mod:`service.models.progressive_metrics`) and checkpoint bookkeeping; plus the
checkpoint blob format and the store-health gauges. The
:class:`service.engine.registry.Registry` holds the handles.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import random
import struct
import time
from typing import Any

import numpy as np
import orjson

from learners.base import UpdateResult
from learners.linear.calibration import PROBABILITY
from service.engine.recent_counts import RecentCounts
from service.models.base import ModelAdapter, state_nbytes
from service.models.drift_monitor import drift_monitor
from service.models.payload import CONTROL_MAGIC, GROUP_MAGIC, decode_control, split_group
from service.models.progressive_metrics import EvalWindow, window_size
from service.models.regression_metrics import RegressionWindow
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import chain_head

log = logging.getLogger("learnserve.registry")

# Checkpoint blob = b"LSCK" + u32 meta length + JSON meta (counters, eval window) + learner bytes.
_CK_MAGIC = b"LSCK"
_CK_HEAD = struct.Struct("<4sI")
_FAILED_KEEP = 4096  # outcomes of skipped entries kept to answer their own requests
_RECENT_HEADS = 64  # (position, chain head) of the last entries applied: to count lost ones
_GROUPS_KEEP = 64  # per-request outcomes of the last group entries applied (their answers)


# The most recent of those kept in checkpoints (messages cut to _FAILED_CHARS): a
# worker restored from a checkpoint still answers a replay of one of them when the
# store holds no record of its outcome (see service.engine.update_outcomes).
_FAILED_IN_CHECKPOINT = 256
_FAILED_CHARS = 1000


def _init_model_series(name: str, adapter: ModelAdapter) -> None:
    """The model's kind, its state size, and its counters at 0 from the start: a counter
    born at 1 is invisible to increase(), so the first deploy/rollback would not count."""
    M.MODEL_INFO.labels(name, adapter.kind).set(1)
    M.MODEL_MEMORY.labels(name).set(state_nbytes(adapter))
    if adapter.online:
        M.EXAMPLES_ACCEPTED.labels(name)
    else:
        M.DEPLOYS.labels(name)
        M.ROLLBACKS.labels(name)


class ModelHandle:
    def __init__(self, name: str, adapter: ModelAdapter, settings: Settings) -> None:
        self.name = name
        self.adapter = adapter
        self.config = adapter.config
        self.version = 0
        # The store's id for this incarnation of the model: a model deleted and created
        # again restarts its log at 1, so versions alone cannot tell the two apart.
        self.generation = ""
        self.lock = asyncio.Lock()
        size = window_size(self.config, settings.eval_window)
        regression = adapter.kind in ("regression", "decision")
        self.window: EvalWindow | RegressionWindow = (
            RegressionWindow(size) if regression else EvalWindow(size)
        )
        self.drift = drift_monitor(self.config)  # None: the model has no detector
        # Challengers (service.engine.followers): a follower learns its leader's log in
        # lockstep (``leader`` set, the leader's lock shared); a leader holds its
        # followers and which of them answers /predict under its name (``serving``).
        self.leader: ModelHandle | None = None
        self.followers: dict[str, ModelHandle] = {}
        self.serving: str | None = None
        self.examples_learned = 0  # over the model's whole life (kept in checkpoints)
        self.entries_skipped = 0
        self.failed: collections.OrderedDict[int, str] = collections.OrderedDict()
        # Examples predicted right, by position, of the last entries applied here (for
        # the /update answer's "correct"; classifiers only).
        self.correct_at = RecentCounts(_FAILED_KEEP)
        # This worker's own appended entries not applied yet, by position, with the
        # chain head the store gave them (None: not told) and the payload's digest
        # (hashed once, for the append): catching up through them needs no read from
        # the store and no second hash.
        self.local: dict[int, tuple[bytes, str | None, str | None]] = {}
        # Group commit (service.engine.group_commit): this worker's requests waiting for
        # the store together, the commit in flight, the requests' own entry objects by
        # position (their dry runs' work is kept by identity), and each request's
        # outcome in the last group entries applied here: (correct, error).
        self.group: Any = None
        self.reward_group: Any = None  # the same for rewards (service.engine.reward_groups)
        self.local_group: dict[int, list[bytes]] = {}
        self.group_results: collections.OrderedDict[int, list[tuple[int | None, str | None]]] = (
            collections.OrderedDict()
        )
        # The log's chain head at ``version`` (service.store.base.chain_head); None when
        # not known (state from an older learnserve's checkpoint or log entries): the
        # next head the store gives is then taken as it is.
        self.head: str | None = ""
        self.recent_heads: collections.deque[tuple[int, str]] = collections.deque(
            maxlen=_RECENT_HEADS
        )
        self.reset_at: int | None = None  # version last rebuilt from the store's checkpoint
        self.lease_retry_at = 0.0  # monotonic time to ask for the checkpoint lease again
        self.unrecorded: list[int] = []  # failed positions whose outcome is not in the store
        # Sharded ownership (service.fleet.placement): whether this worker owns the model
        # or holds a guest copy, and the entries applied here in each role.
        self.owned = True
        self.entries_applied = {"owner": 0, "guest": 0}
        self._digest: tuple[int, ModelAdapter, str] | None = None
        self.checkpoint_position = 0
        self.checkpoint_at: float | None = None
        self.checkpoint_done = -math.inf  # time.monotonic() of the last checkpoint written here
        self.checkpointing = False
        # What the last checkpoint call did (service.engine.checkpoints): written,
        # not_needed, follower, leased_elsewhere, store_unavailable, deleted, failed.
        self.checkpoint_outcome = ""
        # Failed checkpoints since the last one written: no new try before retry_at.
        self.checkpoint_failures = 0
        self.checkpoint_retry_at = -math.inf  # time.monotonic()
        self.checkpoint_error: str | None = None
        self._advanced: asyncio.Event | None = None  # set when the version moves on
        self.next_time_checkpoint = time.monotonic() + settings.checkpoint_every_seconds * (
            0.5 + random.random()  # jitter: replicas rarely checkpoint the same model together
        )
        self._m_version = M.raw(M.MODEL_VERSION.labels(name))
        self._m_learned = M.raw(M.EXAMPLES_LEARNED.labels(name))
        # The learning gauges exist only once the model reports them: a classifier has
        # no NDCG series and a ranker no accuracy (a 0 line would read as "learns badly").
        self._m_acc: Any = None
        self._m_loss: Any = None
        self._m_ndcg: Any = None
        self._m_reg: list[Any] | None = None
        self._m_logloss: Any = None
        self._m_drift: Any = None
        self._drift_shown = -1  # the detections the gauges show
        # The window changed since the AUC gauge was computed (an O(window log window)
        # sort, so it is refreshed by the once-a-second loop, not on every entry).
        self.auc_stale = False
        self.auc_shown = False  # the AUC gauge has a series (set it NaN when AUC goes)
        _init_model_series(name, adapter)
        self.show_drift()  # from 0: a detection must be a change the gauge shows
        self._m_applied = {
            r: M.raw(M.LOG_ENTRIES_APPLIED.labels(name, r)) for r in ("owner", "guest")
        }
        # Applied but not shown yet (see ``publish``): entries by role, examples learned
        # (None: no entry learned since, the learning gauges are current).
        self._unshown = {"owner": 0, "guest": 0}
        self._unshown_learned: int | None = None

    def apply_entry(
        self,
        position: int,
        payload: bytes,
        head: str | None = None,
        digest: str | None = None,
        publish: bool = True,
    ) -> None:
        """Apply one log entry (caller holds the lock and checked the order and the
        chain: ``head`` is the store's chain head after it, "" for an entry written
        before chains existed, None when not known; ``digest``: the payload's
        ``payload_digest`` if known). ``publish=False``: a run of entries applied
        back to back; the gauges, counters and waiters are left to the caller's
        ``publish()`` after the run (before it awaits anything), which shows the
        same figures as per entry: the gauges' last values and the counters' sums."""
        control = decode_control(payload) if payload[:4] == CONTROL_MAGIC else None
        try:
            if payload[:4] == GROUP_MAGIC:
                r = None
                self._apply_group(position, payload)
            else:
                r = self.adapter.apply(payload) if control is None else None
        except Exception as e:
            # Deterministic: every replica holds the same state, so every replica
            # fails on this entry too and skips it the same way.
            log.error(
                "model %r: log entry %d cannot be applied, skipped: %s", self.name, position, e
            )
            self.failed[position] = str(e)
            if len(self.failed) > _FAILED_KEEP:
                self.failed.popitem(last=False)
            self.unrecorded.append(position)
            if len(self.unrecorded) > _FAILED_KEEP:
                del self.unrecorded[0]
            self.entries_skipped += 1
        else:
            if r is not None:
                self._learned(position, r)
            elif self.leader is None and control is not None:  # a promotion
                self.serving = control.get("serving")
        if head is None and self.head is not None:
            head = chain_head(self.head, payload, digest)
        self.head = head or None
        if head:
            self.recent_heads.append((position, head))
        self.version = position
        role = "owner" if self.owned else "guest"
        self.entries_applied[role] += 1
        self._unshown[role] += 1
        for f in self.followers.values():  # lockstep: the same entry, each on its own state
            if f.version == position - 1:
                f.apply_entry(position, payload, head, digest, False)  # by our publish()
        if publish:
            self.publish()

    def _apply_group(self, position: int, payload: bytes) -> None:
        """A group entry: its requests' entries applied in order, each on its own (one
        that fails is skipped, the others learn; every replica does the same)."""
        entries = self.local_group.pop(position, None) or split_group(payload)
        results: list[tuple[int | None, str | None]] = []
        for i, entry in enumerate(entries):
            try:
                r = self.adapter.apply(entry)
            except Exception as e:
                log.error(
                    "model %r: request %d of log entry %d cannot be applied, skipped: %s",
                    self.name, i, position, e,
                )  # fmt: skip
                results.append((None, str(e)))
                continue
            self._learned(position, r, grouped=True)
            results.append((None if r.n_groups else r.correct, None))
        self.group_results[position] = results
        while len(self.group_results) > _GROUPS_KEEP:
            self.group_results.popitem(last=False)

    def publish(self) -> None:
        """What the entries applied since the last call change outside the model's
        state: the version and learning gauges, the counters, ``wait_applied``."""
        self._m_version.set(self.version)
        unshown = self._unshown
        for role, n in unshown.items():
            if n:
                self._m_applied[role].inc(n)
                unshown[role] = 0
        if self._unshown_learned is not None:
            self._m_learned.inc(self._unshown_learned)
            self._unshown_learned = None
            self._show_learning()
        self.notify_advanced()
        for f in self.followers.values():
            f.publish()

    def _learned(self, position: int, r: UpdateResult, grouped: bool = False) -> None:
        """The bookkeeping of an entry learned (or of one request of a group entry):
        counters, window, detector (the gauges by ``publish``)."""
        if not r.n_groups and not grouped:
            self.correct_at.put(position, r.correct)
        self.examples_learned += r.applied
        self.window.add_result(r)
        # A reaction (re-opening the confidence) follows the whole entry: every
        # replica, and a restart from checkpoint + log, does it at the same point.
        if self.drift is not None and self.drift.update(r.errors, position):
            self.drift.react(self.adapter.model)
        self._unshown_learned = (self._unshown_learned or 0) + r.applied

    def _show_learning(self) -> None:
        """The learning gauges (window figures, detector) as the state now is."""
        self.show_drift()
        acc_loss = self.window.accuracy_loss()
        if acc_loss is not None:
            if self._m_acc is None:
                self._m_acc = M.raw(M.ONLINE_ACCURACY.labels(self.name))
                self._m_loss = M.raw(M.ONLINE_LOSS.labels(self.name))
            self._m_acc.set(acc_loss[0])
            self._m_loss.set(acc_loss[1])
            log_loss = self.window.log_loss()
            if log_loss is not None or self._m_logloss is not None:
                # A model that became multiclass has no binary figures left in its
                # window: NaN (a gap on the dashboard), not its last binary value.
                if self._m_logloss is None:
                    self._m_logloss = M.raw(M.ONLINE_LOG_LOSS.labels(self.name))
                self._m_logloss.set(math.nan if log_loss is None else log_loss)
                self.auc_stale = True
        values = getattr(self.adapter, "policy_values", None)
        if values is not None:  # a decision model's off-policy estimates
            for (policy, estimator), v in values().items():
                M.DECISION_VALUE.labels(self.name, policy, estimator).set(v)
        if isinstance(self.window, RegressionWindow):
            figures = self.window.regression()
            if figures is not None:
                self._show_regression(figures)
            return
        ndcg = self.window.ndcg()
        if ndcg is not None:
            if self._m_ndcg is None:
                self._m_ndcg = M.raw(M.ONLINE_NDCG.labels(self.name))
            self._m_ndcg.set(ndcg)

    def _show_regression(self, figures: dict[str, Any]) -> None:
        """A regressor's learning gauges: MAE, RMSE, R² (NaN while undefined) and the
        interval's coverage (AROW) over the window."""
        if self._m_reg is None:
            self._m_reg = [M.raw(g.labels(self.name)) for g in M.REGRESSION_GAUGES.values()]
        for gauge, key in zip(self._m_reg, M.REGRESSION_GAUGES, strict=True):
            value = figures.get(key)
            gauge.set(math.nan if value is None else value)

    def chain_breaks(self, payload: bytes, head: str | None, digest: str | None = None) -> bool:
        """True when the store's ``head`` for the entry after ``version`` does not follow
        from ours: the log holds other entries than those we applied. (``digest``:
        ``payload_digest(payload)`` if known.)"""
        if not head or self.head is None:
            return False
        return chain_head(self.head, payload, digest) != head

    def notify_advanced(self) -> None:
        """Wake ``wait_applied`` callers (cheap when nobody waits)."""
        if self._advanced is not None:
            self._advanced.set()
            self._advanced = None

    async def wait_applied(self, version: int, timeout: float) -> bool:
        """Until ``version`` is applied here or ``timeout`` seconds passed; never
        touches the store or the lock (the apply-loop does the applying)."""
        deadline = time.monotonic() + timeout
        while self.version < version:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._advanced is None:
                self._advanced = asyncio.Event()
            try:
                await asyncio.wait_for(self._advanced.wait(), left)
            except TimeoutError:
                return self.version >= version
        return True

    def show_drift(self) -> None:
        """The drift gauges, from the detector's state (the same on every replica)."""
        d = self.drift
        if d is None:
            return
        if self._m_drift is None:
            self._drift_shown = -1
            self._m_drift = (
                M.raw(M.DRIFT_DETECTIONS.labels(self.name)),
                M.raw(M.DRIFT_ESTIMATE.labels(self.name)),
                M.raw(M.DRIFT_LAST_VERSION.labels(self.name)),
            )
        detections, estimate, last = self._m_drift
        value = float(d.detector.estimation)
        estimate.set(value if math.isfinite(value) else math.nan)
        if d.detections != self._drift_shown:  # (rare: two of the three gauges then)
            self._drift_shown = d.detections
            detections.set(d.detections)
            last.set(math.nan if d.last_detection_version is None else d.last_detection_version)

    def checkpoint_meta(self) -> dict[str, Any]:
        return {
            "examples_learned": self.examples_learned,
            "entries_skipped": self.entries_skipped,
            "window": self.window.to_json(),
            "cumulative": self.window.cumulative_json(),
            "drift": None if self.drift is None else self.drift.to_json(),
            "serving": self.serving,
            "head": self.head,
            "failed": [
                [p, m[:_FAILED_CHARS]]
                for p, m in list(self.failed.items())[-_FAILED_IN_CHECKPOINT:]
            ],
        }

    def load_meta(self, meta: dict[str, Any]) -> None:
        """The bookkeeping a checkpoint carries (``checkpoint_meta``; ``{}``: none): the
        counters, the metrics window, the detector, the failures and the promotion. The
        learning gauges show the restored window at once (the AUC with the next
        once-a-second turn), not only once the model learns again."""
        self.examples_learned = int(meta.get("examples_learned", 0))
        self.entries_skipped = int(meta.get("entries_skipped", 0))
        self.window = type(self.window)(self.window.size)
        self.window.restore(meta)
        self.load_drift(meta)
        self.failed.clear()
        self.load_failed(meta)
        self.serving = meta.get("serving")
        self._show_learning()

    def load_drift(self, meta: dict[str, Any]) -> None:
        """The detector as the checkpoint left it (new when it has none)."""
        self.drift = drift_monitor(self.config)
        if self.drift is not None:
            self.drift.restore(meta.get("drift"))
            self.show_drift()

    def load_failed(self, meta: dict[str, Any]) -> None:
        """The failures a checkpoint carries (``checkpoint_meta``), oldest first."""
        for p, m in meta.get("failed", []):
            self.failed[int(p)] = str(m)
            self.failed.move_to_end(int(p))
        while len(self.failed) > _FAILED_KEEP:
            self.failed.popitem(last=False)

    async def digest(self) -> str:
        """The state digest, cached per version. Hashing a big model (16 MB for 2**20
        dims) takes tens of ms: it runs in a thread, under the lock so no update
        lands halfway through."""
        if self.adapter.online is False:
            return self.adapter.state_digest()
        cached = self._digest
        if cached is not None and cached[0] == self.version and cached[1] is self.adapter:
            return cached[2]
        async with self.lock:
            version, adapter = self.version, self.adapter
            value = await asyncio.to_thread(adapter.state_digest)
        self._digest = (version, adapter, value)
        return value

    def online_metrics(self) -> dict[str, Any]:
        out = self.window.summary()
        if out.get("log_loss") is not None:  # binary: how its margins become probabilities
            out["probability"] = PROBABILITY.get(str(self.config.get("algorithm")))
        return out

    def checkpoint_backoff(self) -> dict[str, Any] | None:
        """While checkpoints of the model fail: how many did, and when the next try is."""
        if not self.checkpoint_failures:
            return None
        return {
            "failures": self.checkpoint_failures,
            "retry_in_seconds": max(0.0, self.checkpoint_retry_at - time.monotonic()),
            "last_error": self.checkpoint_error,
        }


def pack_checkpoint(meta: dict[str, Any], blob: bytes | memoryview) -> memoryview:
    """The checkpoint blob, in a fresh buffer (the stores take it without a copy).

    Runs in a worker thread while the event loop serves: the learner bytes (16 MB
    for a 2**20-dimension model) are copied with ``np.copyto``, which releases the
    GIL; a ``b"".join`` would hold it for the whole copy and stall the loop thread.
    """
    m = orjson.dumps(meta)
    head = _CK_HEAD.pack(_CK_MAGIC, len(m)) + m
    src = np.frombuffer(blob, dtype=np.uint8)
    out = np.empty(len(head) + src.size, dtype=np.uint8)
    out[: len(head)] = np.frombuffer(head, dtype=np.uint8)
    np.copyto(out[len(head) :], src)
    return memoryview(out)  # type: ignore[arg-type]


def unpack_checkpoint(data: bytes) -> tuple[dict[str, Any], bytes]:
    if data[:4] != _CK_MAGIC:  # a bare learner artifact (e.g. written by a tool)
        return {}, data
    _, n = _CK_HEAD.unpack_from(data, 0)
    off = _CK_HEAD.size
    return orjson.loads(data[off : off + n]), data[off + n :]


class StoreHealth:
    """``learnserve_store_up`` / ``learnserve_store_errors_total`` bookkeeping."""

    def __init__(self, store_name: str) -> None:
        self.up = True
        self._gauge = M.STORE_UP.labels(store_name)
        self._gauge.set(1)

    def ok(self) -> None:
        if not self.up:
            log.warning("store reachable again")
        self.up = True
        self._gauge.set(1)

    def failed(self, operation: str, error: BaseException) -> None:
        M.STORE_ERRORS.labels(operation).inc()
        if self.up:
            log.warning("store unreachable during %s: %s", operation, error)
        self.up = False
        self._gauge.set(0)
