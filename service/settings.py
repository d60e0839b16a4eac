"""Service settings, from ``LEARNSERVE_*`` environment variables (pydantic-settings).

Every field can be set as ``LEARNSERVE_<FIELD>`` (upper-case), e.g.
``LEARNSERVE_REDIS_URL=redis://localhost:6379/0``. ``api_keys`` accepts JSON
(``{"key1": ["predict"], "key2": ["predict", "update", "admin"]}``) or the short
form ``key1=predict,key2=predict+update+admin``.

>>> s = Settings(api_keys="k1=predict,k2=predict+update")
>>> s.api_keys["k2"]
['predict', 'update']
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

SCOPES = ("predict", "update", "admin")


def parse_api_keys(value: Any) -> dict[str, list[str]]:
    """JSON object, short form ``key=scope+scope,key2=scope`` or a dict -> {key: [scopes]}."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            value = json.loads(text)
        else:
            value = {}
            for part in text.split(","):
                part = part.strip()
                if not part:
                    continue
                key, sep, names = part.partition("=")
                if not sep or not key.strip():
                    raise ValueError(f"api_keys entry {part!r} must look like key=scope+scope")
                value[key.strip()] = [s.strip() for s in names.split("+") if s.strip()]
    if not isinstance(value, dict):
        raise ValueError("api_keys must be an object of key: [scopes]")
    out: dict[str, list[str]] = {}
    for key, raw in value.items():
        scopes: list[str] = [raw] if isinstance(raw, str) else list(raw)
        if not isinstance(key, str) or not key:
            raise ValueError("api_keys: a key must be a non-empty string")
        bad = [s for s in scopes if s not in SCOPES]
        if bad or not scopes:
            raise ValueError(f"api_keys: scopes must be some of {list(SCOPES)}, got {scopes!r}")
        out[key] = list(scopes)
    return out


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LEARNSERVE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    # The HTTP server under the app (`learnserve serve --server`): uvicorn, or granian
    # (Rust, its ASGI interface) with the same answers, limits, deadlines and graceful
    # shutdown and less CPU per /predict (bench/servers.py).
    server: Literal["uvicorn", "granian"] = "uvicorn"
    # Redis is the production store; without it the embedded SQLite store under data_dir.
    redis_url: str | None = None
    data_dir: str = "./data"
    # redis_url names one node of a Redis Cluster (the others are discovered).
    redis_cluster: bool = False
    # Redis: seconds before an unanswered operation counts as "store unreachable"
    # (-> 503 for writes).
    store_timeout_seconds: float = Field(default=2.0, gt=0)
    # Durable acknowledgements (README "Durability on Redis"): before /update answers,
    # each master that appended waits for its AOF fsync (WAITAOF, Redis >= 7.2;
    # redis_waitaof is the older name) and/or for this many replicas (WAIT N, or
    # WAITAOF 1 N with redis_wait_aof), at most redis_wait_timeout_seconds (keep it
    # below store_timeout_seconds); not reached in time -> 503, the entry may be stored.
    redis_wait_aof: bool = False
    redis_waitaof: bool = False
    redis_wait_replicas: int = Field(default=0, ge=0)
    redis_wait_timeout_seconds: float = Field(default=1.0, gt=0)
    environment: Literal["development", "production"] = "development"
    api_keys: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    # Production refuses to start without keys unless this is set explicitly.
    allow_no_auth: bool = False
    # /metrics is open (Prometheus scrapes inside the network); set false to require "admin".
    metrics_public: bool = True
    otel: bool = False  # FastAPI's OpenTelemetry instrumentation (costs per request)

    max_body_bytes: int = Field(default=16 << 20, ge=1024)
    # A request body not fully received within this many seconds is 408 and the
    # connection closed: trickling clients cannot hold connections (and memory) forever.
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    # PUT /models/{name}/artifact; Redis cannot store a value over 512 MB.
    max_artifact_bytes: int = Field(default=256 << 20, ge=1024)
    # Artifact versions kept per batch model (the active one always among them); older
    # ones are deleted after each deploy. They live in the store (Redis: in memory, about
    # 28 MB per FastXML version on Bibtex). 0 keeps every version.
    artifact_retention: int = Field(default=10, ge=0)
    max_batch_examples: int = Field(default=10_000, ge=1)
    max_features_per_example: int = Field(default=100_000, ge=1)
    max_dim: int = Field(default=1 << 24, ge=1)  # hashed bits <= log2(max_dim)
    # Every label of a classifier holds a dim-sized weight row (and covariance): both
    # caps stop one /update from asking every replica for unbounded memory.
    max_labels: int = Field(default=1000, ge=2)
    max_model_bytes: int = Field(default=4 << 30, ge=1 << 20)
    # Names a hashed model records (hash -> names seen, for GET /models/{name}/weights);
    # 0 records none. Names travel in the log: every worker should use the same value.
    max_feature_names: int = Field(default=100_000, ge=0, le=1 << 20)
    # /update bodies larger than this are encoded in a worker thread (the loop keeps
    # serving meanwhile); 0 = always, a huge value = never.
    parse_in_thread_bytes: int = Field(default=256 * 1024, ge=0)

    checkpoint_every_updates: int = Field(default=1000, ge=1)  # log entries between checkpoints
    checkpoint_every_seconds: float = Field(default=60.0, gt=0)
    # At most one count-triggered checkpoint per this many seconds per model (0: none
    # held back). For big models under heavy traffic: a 2**20-dim one (16 MB) at 140k
    # examples/s is otherwise written every 0.7 s, and on Redis each such write holds up
    # the other commands for tens of ms.
    checkpoint_min_interval_seconds: float = Field(default=0.0, ge=0)
    # One checkpoint writer per model at a time: a worker writes only while it holds the
    # model's checkpoint lease in the store (taken or renewed at each write, expiring
    # after this long, so another worker takes over when the holder stops).
    checkpoint_lease_seconds: float = Field(default=30.0, gt=0)
    # After a failed checkpoint, the next try of the model's (count- or time-triggered)
    # waits this long, doubled after each further failure up to the maximum.
    checkpoint_retry_base_seconds: float = Field(default=5.0, gt=0)
    checkpoint_retry_max_seconds: float = Field(default=300.0, gt=0)
    # Entries kept in the log behind a checkpoint, so a lagging replica can catch up
    # from the log instead of reloading the checkpoint.
    log_retain_entries: int = Field(default=1000, ge=0)
    min_version_wait_seconds: float = Field(default=2.0, ge=0)
    # Group commit (service.engine.group_commit): plain /update requests to one model
    # that wait for the store at the same moment go into one log entry (at most this
    # many requests, and max_body_bytes of entries). Off: one entry per request (set it
    # off during a rolling upgrade from a version that cannot read group entries).
    group_commit: bool = True
    group_commit_max_requests: int = Field(default=256, ge=1)  # requests in one group entry
    # A model created (PUT) whose kind's numba kernels are not compiled on this machine
    # yet waits this long for them, then answers 503 + Retry-After (it is created; it is
    # loaded as soon as they are: a kernel family compiles once, in a process of its own).
    # Kernels already in numba's cache load in about a second, well within it.
    kernel_wait_seconds: float = Field(default=10.0, ge=0)
    # How long an Idempotency-Key on POST /update is remembered (per model): a retry
    # with the same key within this window answers the first result, not a new append.
    idempotency_ttl_seconds: float = Field(default=86400.0, gt=0)
    # How long a prediction served with an "id" can be labelled by that id (delayed labels)
    feedback_ttl_seconds: float = Field(default=7 * 86400.0, gt=0)
    eval_window: int = Field(default=1000, ge=1)  # examples in the progressive-evaluation window
    catalog_poll_seconds: float = Field(default=0.5, gt=0)
    # The apply-loop follows wakes (only models that changed); every this many seconds
    # it also reads every model's log position (batched) to catch a lost wake and a
    # log that lost its tail, and to refresh the log-lag gauges (ten times as seldom
    # where wakes are never lost silently: one Redis, SQLite).
    reconcile_seconds: float = Field(default=30.0, gt=0)
    # The event-loop lag monitor sleeps this long and records the oversleep in
    # learnserve_event_loop_lag_seconds (how long the loop could not run anything).
    loop_lag_interval_seconds: float = Field(default=0.025, gt=0)

    # Who holds which model (service.fleet.placement): "replicate" = every worker holds and
    # applies every model; "sharded" = REPLICAS_PER_MODEL members own each model (by
    # rendezvous hashing over the live members) and others load it on demand into a
    # bounded LRU of LRU_BYTES. MEMBER_ID names this worker in the fleet (default
    # hostname-pid; the pid is appended when --workers > 1).
    ownership: Literal["replicate", "sharded"] = "replicate"
    replicas_per_model: int = Field(default=2, ge=1, le=64)
    member_id: str | None = None
    member_lease_seconds: float = Field(default=3.0, gt=0)
    lru_bytes: int = Field(default=256 << 20, ge=0)
    # A model a member stops owning stays loaded at least this long (the new owners
    # load it meanwhile), then becomes an ordinary guest in the LRU.
    handover_seconds: float = Field(default=10.0, ge=0)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys(cls, v: Any) -> dict[str, list[str]]:
        return parse_api_keys(v)

    @model_validator(mode="after")
    def _production_needs_keys(self) -> Settings:
        if self.environment == "production" and not self.api_keys and not self.allow_no_auth:
            raise ValueError(
                "environment=production needs LEARNSERVE_API_KEYS "
                "(or LEARNSERVE_ALLOW_NO_AUTH=true to run without authentication)"
            )
        return self

    @model_validator(mode="after")
    def _cluster_needs_url(self) -> Settings:
        if self.redis_cluster and not self.redis_url:
            raise ValueError("redis_cluster=true needs redis_url (any node of the cluster)")
        return self

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys)

    def is_loopback(self) -> bool:
        return self.host in ("127.0.0.1", "localhost", "::1") or self.host.startswith("127.")
