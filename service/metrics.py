"""Prometheus metrics the service exports. Dashboards read only these names.

With several worker processes, set ``PROMETHEUS_MULTIPROC_DIR`` (the CLI does
this for ``--workers > 1``) so ``/metrics`` aggregates every worker; gauges say
how they combine across processes.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
