"""Prometheus metrics the service exports. Dashboards read only these names.

With several worker processes, set ``PROMETHEUS_MULTIPROC_DIR`` (the CLI does
this for ``--workers > 1``) so ``/metrics`` aggregates every worker; gauges say
how they combine across processes.

Per-model series live as long as the model (``forget_model`` when it is deleted):

* one process: the series are removed, so a deleted model costs nothing;
* several workers: prometheus-client cannot remove a series from its per-process
  files, so each worker sets its own series of the model to 0 (and those of dead
  workers' files) and keeps them: a re-created model starts from 0, and each
  file holds at most one entry per (metric, labels) ever used, i.e. it grows
  with the number of distinct model *names*, never with create/delete cycles.
* either way ``exposition`` shows only series of models in the catalog, so
  series that come back after a deletion (a request that finished just after
  it, another worker that has not seen it yet) never reach a scrape.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0
)  # fmt: skip

REQUESTS = Counter(
    "learnserve_requests_total",
    "HTTP requests by route, model and status code.",
    ["route", "model", "status"],
)
REQUEST_LATENCY = Histogram(
    "learnserve_request_duration_seconds",
    "HTTP request latency by route and model.",
    ["route", "model"],
    buckets=_LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge(
    "learnserve_requests_in_flight",
    "Requests being served now, by route.",
    ["route"],
    multiprocess_mode="livesum",
)
EXAMPLES_LEARNED = Counter(
    "learnserve_examples_learned_total",
    "Examples applied to a model by this worker (each worker applies every update).",
    ["model"],
)
EXAMPLES_ACCEPTED = Counter(
    "learnserve_examples_accepted_total",
    "Examples accepted through POST /update on this worker (counted once cluster-wide).",
    ["model"],
)
IGNORED_FIELDS = Counter(
    "learnserve_ignored_fields_total",
    "Fields of raw records that the model's config does not read, left out of accepted "
    "POST /update examples (one per example and field; unknown_fields ignore).",
    ["model"],
)
DECISIONS = Counter(
    "learnserve_decisions_total",
    "Decisions made and kept by POST /models/{name}/rank on this worker (a retry of an "
    "event kept already is not counted).",
    ["model"],
)
REWARDS = Counter(
    "learnserve_rewards_accepted_total",
    "Rewards accepted through POST /models/{name}/reward on this worker (each learned once "
    "cluster-wide).",
    ["model"],
)
DEFAULT_REWARDS = Counter(
    "learnserve_default_rewards_total",
    "Events of a decision model that got no reward within reward_wait_seconds and were "
    "learned with the default reward, by the worker that appended them.",
    ["model"],
)
LATE_REWARDS = Counter(
    "learnserve_late_rewards_total",
    "Rewards refused because their event had learned the default reward already (409 "
    "default_reward_applied), on this worker.",
    ["model"],
)
DECISION_VALUE = Gauge(
    "learnserve_decision_policy_value",
    "Progressive off-policy estimate of a decision model's policies' value (mean reward) "
    "on its logged decisions, by policy (served, learned, first, uniform; a challenger's "
    "own: challenger; the auto reward model's candidates: candidate:<reward model>) and "
    "estimator (ips, snips, dr); model state, the same on every replica.",
    ["model", "policy", "estimator"],
    multiprocess_mode="livemax",
)
ONLINE_ACCURACY = Gauge(
    "learnserve_online_accuracy",
    "Progressive (predict-then-learn) accuracy over the recent window.",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_LOSS = Gauge(
    "learnserve_online_loss",
    "Progressive mean loss over the recent window.",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_NDCG = Gauge(
    "learnserve_online_ndcg_at_10",
    "Progressive NDCG@10 over the recent window (rankers).",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_LOG_LOSS = Gauge(
    "learnserve_online_log_loss",
    "Progressive log loss of the calibrated probability over the recent window "
    "(binary classifiers).",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_ROC_AUC = Gauge(
    "learnserve_online_roc_auc",
    "Progressive ROC AUC over the recent window (binary classifiers; refreshed about "
    "once a second while the model learns).",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_MAE = Gauge(
    "learnserve_online_mae",
    "Progressive (predict-then-learn) mean absolute error over the recent window "
    "(regressors), in the target's units.",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_RMSE = Gauge(
    "learnserve_online_rmse",
    "Progressive root mean squared error over the recent window (regressors).",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_R2 = Gauge(
    "learnserve_online_r2",
    "Progressive R² over the recent window (regressors): 1 - squared error / squared "
    "deviation from the window's mean target; below 0 is worse than that mean (NaN while "
    "undefined).",
    ["model"],
    multiprocess_mode="livemax",
)
ONLINE_INTERVAL_COVERAGE = Gauge(
    "learnserve_online_interval_coverage",
    "Share of the recent window's targets inside the 90 % interval served with their "
    "prediction (AROW regression; 0.9 when its variance is calibrated).",
    ["model"],
    multiprocess_mode="livemax",
)
# A regressor's gauges by the key of its window summary (service.models.regression_metrics)
REGRESSION_GAUGES = {
    "mae": ONLINE_MAE,
    "rmse": ONLINE_RMSE,
    "r2": ONLINE_R2,
    "interval_coverage": ONLINE_INTERVAL_COVERAGE,
}
DRIFT_DETECTIONS = Gauge(
    "learnserve_model_drift_detections",
    "Drift detections of the model's detector over its progressive losses since the "
    "model was created (model state: the same on every replica).",
    ["model"],
    multiprocess_mode="livemax",
)
DRIFT_ESTIMATE = Gauge(
    "learnserve_model_drift_estimate",
    "The drift detector's current estimate of the model's progressive loss (ADWIN: "
    "the mean error over its window; Page-Hinkley: its running mean).",
    ["model"],
    multiprocess_mode="livemax",
)
DRIFT_LAST_VERSION = Gauge(
    "learnserve_model_drift_last_detection_version",
    "The model version (log position) of the entry where the last drift was detected.",
    ["model"],
    multiprocess_mode="livemax",
)
MODEL_VERSION = Gauge(
    "learnserve_model_version",
    "Version of each model in this worker (log position or artifact version).",
    ["model"],
    multiprocess_mode="liveall",
)
CHECKPOINT_AGE = Gauge(
    "learnserve_checkpoint_age_seconds",
    "Seconds since the model's last checkpoint was written.",
    ["model"],
    multiprocess_mode="livemin",
)
CHECKPOINT_FAILURES = Counter(
    "learnserve_checkpoint_failures_total",
    "Checkpoints of the model that could not be written.",
    ["model"],
)
CHECKPOINT_BACKOFF = Gauge(
    "learnserve_checkpoint_backoff_seconds",
    "Delay before the next try after the model's last checkpoint failed (0: none failed).",
    ["model"],
    multiprocess_mode="livemax",
)
CHECKPOINT_DURATION = Histogram(
    "learnserve_checkpoint_duration_seconds",
    "Time to serialise and store one checkpoint.",
    ["model"],
    buckets=_LATENCY_BUCKETS,
)
EVENT_LOOP_LAG = Histogram(
    "learnserve_event_loop_lag_seconds",
    "How late the event loop woke a sleeping task: time it could not serve (GIL, blocking calls).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
LOG_LAG = Gauge(
    "learnserve_log_lag_entries",
    "Update-log entries not yet applied by this worker.",
    ["model"],
    multiprocess_mode="liveall",
)
STORE_ERRORS = Counter(
    "learnserve_store_errors_total",
    "Store operations that failed, by operation.",
    ["operation"],
)
STORE_UP = Gauge(
    "learnserve_store_up",
    "1 when the store answered its last operation, 0 while it is unreachable.",
    ["store"],
    multiprocess_mode="livemin",
)
DEPLOYS = Counter(
    "learnserve_deploys_total",
    "Batch-model artifact versions deployed.",
    ["model"],
)
ROLLBACKS = Counter(
    "learnserve_rollbacks_total",
    "Batch-model rollbacks to a previous version.",
    ["model"],
)
MODELS = Gauge(
    "learnserve_models",
    "Models hosted, by kind.",
    ["kind"],
    multiprocess_mode="livemax",
)
LOG_ENTRIES_LOST = Counter(
    "learnserve_log_entries_lost_total",
    "Log entries this worker had applied (and may have acknowledged) that the store no "
    "longer holds: its log lost its tail (a Redis failover without WAIT). The worker "
    "reloaded the model from the store.",
    ["model"],
)

# ------------------------------------------------------------ sharded ownership
# (service.fleet.placement; the member label is LEARNSERVE_MEMBER_ID, one per worker)
OWNED_MODELS = Gauge(
    "learnserve_owned_models",
    "Models this member owns (applies and checkpoints); every model when replicated.",
    ["member"],
    multiprocess_mode="liveall",
)
FLEET_MEMBERS = Gauge(
    "learnserve_fleet_members",
    "Live members of the fleet as this member sees them (heartbeat leases).",
    ["member"],
    multiprocess_mode="liveall",
)
LRU_BYTES = Gauge(
    "learnserve_lru_bytes",
    "Bytes of models held as guests (not owned, loaded for a request) in the LRU.",
    ["member"],
    multiprocess_mode="liveall",
)
LRU_MODELS = Gauge(
    "learnserve_lru_models",
    "Models held as guests in the LRU.",
    ["member"],
    multiprocess_mode="liveall",
)
LRU_HITS = Counter(
    "learnserve_lru_hits_total",
    "Requests for a model this member does not own that found it loaded.",
    ["member"],
)
LRU_MISSES = Counter(
    "learnserve_lru_misses_total",
    "Requests for a model this member does not own that had to load it (checkpoint + log).",
    ["member"],
)
LRU_EVICTIONS = Counter(
    "learnserve_lru_evictions_total",
    "Guest models dropped from the LRU to stay within LEARNSERVE_LRU_BYTES.",
    ["member"],
)
LOG_ENTRIES_APPLIED = Counter(
    "learnserve_log_entries_applied_total",
    "Log entries applied by this worker, as owner of the model or as a guest copy.",
    ["model", "role"],
)


# (route, model, status) -> the latency and request-count children. Label lookups
# cost more than the updates, so the request middleware reuses these; a model's
# entries go with the model (a removed child kept here would count into nothing).
_request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}


class _Checked:
    """``raw``'s fallback: the child's own (checked) inc and set."""

    __slots__ = ("child",)

    def __init__(self, child: Any) -> None:
        self.child = child

    def inc(self, amount: float) -> None:
        self.child.inc(amount)

    def set(self, value: float) -> None:
        self.child.set(value)


def raw(child: Any) -> Any:
    """The value behind a labelled counter or gauge child, for the hot path:
    ``raw(c).inc(n)`` and ``raw(c).set(x)`` store what ``c.inc(n)`` and ``c.set(x)``
    would (a child made by ``.labels()`` is observable, and no exemplars are used here)
    in one call instead of prometheus_client's four (``bench/request_calls.py`` counts
    them); a child without that value object is written the checked way."""
    value = getattr(child, "_value", None)
    if callable(getattr(value, "inc", None)) and callable(getattr(value, "set", None)):
        return value
    return _Checked(child)


def request_children(route: str, model: str, status: int) -> tuple[Any, Any]:
    key = (route, model, status)
    children = _request_children.get(key)
    if children is None:
        children = _request_children[key] = (
            REQUEST_LATENCY.labels(route, model),
            raw(REQUESTS.labels(route, model, str(status))),
        )
    return children


# model -> its learnserve_examples_accepted_total / learnserve_log_lag_entries child
# (dropped with the model, as above)
_accepted_children: dict[str, Any] = {}
_lag_children: dict[str, Any] = {}


def examples_accepted(model: str) -> Any:
    """The ``learnserve_examples_accepted_total`` child of ``model``, looked up once."""
    child = _accepted_children.get(model)
    if child is None:
        child = _accepted_children[model] = raw(EXAMPLES_ACCEPTED.labels(model))
    return child


def log_lag(model: str) -> Any:
    """The ``learnserve_log_lag_entries`` child of ``model``, looked up once."""
    child = _lag_children.get(model)
    if child is None:
        child = _lag_children[model] = LOG_LAG.labels(model)
    return child


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def forget_model(name: str) -> None:
    """Drop every per-model series of ``name`` (call on the event loop, when the
    model is deleted or replaced by a new model of the same name)."""
    for key in [k for k in _request_children if k[1] == name]:
        del _request_children[key]
    _accepted_children.pop(name, None)
    _lag_children.pop(name, None)
    mp_dir = multiprocess_dir()
    for metric in PER_MODEL:
        if mp_dir is None:
            metric.remove_by_labels({"model": name})
        else:
            _zero_children(metric, name)
    if mp_dir is not None:
        _zero_in_dead_files(mp_dir, name)


def _zero_children(metric: Any, name: str) -> None:
    # Multi-process mode: removing a child would leave its value in this
    # process's file (and come back with the next child of that name), so the
    # children stay, at 0. These are prometheus-client internals (0.2x): each
    # child value is an mmap-backed value with ``set``.
    at = metric._labelnames.index("model")
    with metric._lock:
        children = [c for lv, c in metric._metrics.items() if lv[at] == name]
    for child in children:
        values = [getattr(child, a) for a in ("_value", "_sum") if hasattr(child, a)]
        for value in [*values, *getattr(child, "_buckets", ())]:
            value.set(0.0)


# Only these outlive their process: a dead worker's live* gauge files are deleted
# (mark_process_dead), and opening one just then would create it anew.
_DB_FILE = re.compile(r"(?:counter|histogram|summary)_(\d+)\.db")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _zero_in_dead_files(mp_dir: str, name: str) -> None:
    """The counters and histograms of workers that died stay in their files (that
    is how their counts survive them): zero the model's entries there as well, so
    a model re-created under this name never shows them."""
    from prometheus_client.mmap_dict import MmapedDict

    try:
        files = os.listdir(mp_dir)
    except OSError:
        return
    for f in files:
        m = _DB_FILE.fullmatch(f)
        if m is None or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError, ValueError):
            d = MmapedDict(os.path.join(mp_dir, f))
            try:
                for key, _value, _ts, _pos in list(d.read_all_values()):
                    if json.loads(key)[2].get("model") == name:
                        d.write_value(key, 0.0, 0.0)
            finally:
                d.close()


def _only_live(metrics: Iterable[Metric], live: frozenset[str]) -> Iterator[Metric]:
    for m in metrics:
        samples = [s for s in m.samples if s.labels.get("model", "") in live]
        if len(samples) != len(m.samples):
            m.samples = samples
        yield m


class _LiveView:
    """A collector of ``source`` without the series of models not in ``live``
    (``""`` is in it: requests that named no model)."""

    def __init__(self, source: Any, live: frozenset[str]) -> None:
        self.source = source
        self.live = live | {""}

    def collect(self) -> Iterator[Metric]:
        return _only_live(self.source.collect(), self.live)


def exposition(live: Iterable[str]) -> bytes:
    """The ``/metrics`` text: every worker's series when there are several, only
    models in ``live``. Blocking (reads every worker's file): run it in a thread."""
    source: Any = REGISTRY
    mp_dir = multiprocess_dir()
    if mp_dir is not None:
        from prometheus_client import multiprocess

        source = CollectorRegistry()
        multiprocess.MultiProcessCollector(source, mp_dir)
    return generate_latest(_LiveView(source, frozenset(live)))


# ---------------------------------------------------------------- operator metrics
# Process memory and CPU per worker: prometheus-client's own process_* collector is off
# in multiprocess mode (--workers > 1), so each worker samples itself
# (service/process_stats.py); in multiprocess mode every series carries a `pid` label.
PROCESS_RESIDENT_MEMORY = Gauge(
    "learnserve_process_resident_memory_bytes",
    "Resident memory of this worker process (sum over pids: the pod/container's use).",
    multiprocess_mode="liveall",
)
PROCESS_CPU_SECONDS = Gauge(
    "learnserve_process_cpu_seconds",
    "CPU seconds (user + system) this worker process used since it started; rate() it.",
    multiprocess_mode="liveall",
)
MEMORY_LIMIT = Gauge(
    "learnserve_memory_limit_bytes",
    "The container's memory limit (cgroup memory.max); absent when there is none.",
    multiprocess_mode="livemax",
)
MODEL_INFO = Gauge(
    "learnserve_model_info",
    "1 per hosted model, with its kind (join on `model` to select models of one kind).",
    ["model", "kind"],
    multiprocess_mode="livemax",
)
MODEL_MEMORY = Gauge(
    "learnserve_model_memory_bytes",
    "Bytes of a model's learned state (its last checkpoint or artifact), by model.",
    ["model"],
    multiprocess_mode="livemax",
)
REQUEST_ERRORS = Counter(
    "learnserve_request_errors_total",
    "Error answers (4xx/5xx) by route, status and the body's error code "
    "(invalid_input, not_ready, store_unavailable, ...).",
    ["route", "status", "error"],
)

# Every metric with a ``model`` label: what a deleted model leaves behind (read by
# forget_model when it runs, so it can follow every definition above).
PER_MODEL = (
    REQUESTS,
    REQUEST_LATENCY,
    EXAMPLES_LEARNED,
    EXAMPLES_ACCEPTED,
    IGNORED_FIELDS,
    DECISIONS,
    REWARDS,
    DEFAULT_REWARDS,
    LATE_REWARDS,
    DECISION_VALUE,
    ONLINE_ACCURACY,
    ONLINE_LOSS,
    ONLINE_NDCG,
    ONLINE_LOG_LOSS,
    ONLINE_ROC_AUC,
    *REGRESSION_GAUGES.values(),
    DRIFT_DETECTIONS,
    DRIFT_ESTIMATE,
    DRIFT_LAST_VERSION,
    MODEL_VERSION,
    CHECKPOINT_AGE,
    CHECKPOINT_DURATION,
    LOG_LAG,
    DEPLOYS,
    ROLLBACKS,
    CHECKPOINT_FAILURES,
    CHECKPOINT_BACKOFF,
    LOG_ENTRIES_LOST,
    LOG_ENTRIES_APPLIED,
    MODEL_INFO,
    MODEL_MEMORY,
)
