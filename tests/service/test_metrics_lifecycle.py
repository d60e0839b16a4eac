"""A deleted model leaves no Prometheus series behind, and ``/metrics`` does not grow
with create/delete cycles: in one process (series removed) and with ``--workers 2``
(prometheus-client's multi-process files, where series cannot be removed)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict

from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, dense_model, start_learnserve

EXAMPLES = [{"x": [1.0, 0.5, -0.2, 0.1], "y": "+1"}, {"x": [-1.0, -0.3, 0.2, 0.0], "y": "-1"}]
NAMES = ["m0", "m1", "m2"]


def traffic(c: httpx.Client, name: str, updates: int = 3) -> int:
    """Touch every kind of per-model series: requests, examples, online metrics,
    version, a checkpoint (duration + age), a refused request."""
    assert c.put(f"/models/{name}", json=dense_model(4)).status_code in (200, 201)
    for _ in range(updates):
        r = c.post("/update", json={"model": name, "examples": EXAMPLES})
        assert r.status_code == 200, r.text
    # min_version: with two workers, the one answering may not have applied it yet.
    body = {
        "model": name,
        "instances": [{"x": EXAMPLES[0]["x"]}],
        "min_version": r.json()["version"],
    }
    r = c.post("/predict", json=body)
    assert r.status_code == 200, r.text
    assert c.get(f"/models/{name}").status_code == 200
    assert c.post(f"/models/{name}/checkpoint").status_code == 200
    assert c.post("/update", json={"model": name, "examples": [{"x": [1.0]}]}).status_code == 422
    return int(body["min_version"])


def cycle(c: httpx.Client, names: list[str]) -> None:
    for name in names:
        traffic(c, name)
    for name in names:
        assert c.delete(f"/models/{name}").status_code == 204


def series_of(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if f'model="{name}"' in line]


def value(text: str, series: str) -> float:
    m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert m is not None, f"{series} not in /metrics"
    return float(m.group(1))


# Every per-model metric the traffic above touches (deploys/rollbacks are for batch
# models, the log lag is set by the once-a-second task).
TOUCHED = (
    "learnserve_requests_total",
    "learnserve_request_duration_seconds_bucket",
    "learnserve_examples_learned_total",
    "learnserve_examples_accepted_total",
    "learnserve_online_accuracy",
    "learnserve_online_loss",  # (a classifier has no NDCG series: rankers only)
    "learnserve_online_log_loss",
    "learnserve_model_version",
    "learnserve_model_info",
    "learnserve_model_memory_bytes",
    "learnserve_checkpoint_age_seconds",
    "learnserve_checkpoint_duration_seconds_bucket",
)


def check_per_model_series_exist(text: str, name: str) -> None:
    """The deletion checks below are about every kind of per-model series."""
    names = {line.split("{")[0] for line in series_of(text, name)}
    assert set(TOUCHED) <= names, set(TOUCHED) - names


# ---------------------------------------------------------------------- one process


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("metrics-life")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def test_a_deleted_model_leaves_no_series_and_comes_back_from_zero(client: httpx.Client) -> None:
    traffic(client, "keep")
    traffic(client, "gone")
    check_per_model_series_exist(client.get("/metrics").text, "gone")
    assert client.delete("/models/gone").status_code == 204
    text = client.get("/metrics").text
    assert series_of(text, "gone") == []
    assert series_of(text, "keep") != []

    # Created again: its counters start at 0, not where the deleted one stopped.
    assert client.put("/models/gone", json=dense_model(4)).status_code == 201
    assert client.post("/update", json={"model": "gone", "examples": EXAMPLES}).status_code == 200
    text = client.get("/metrics").text
    assert value(text, 'learnserve_examples_accepted_total{model="gone"}') == 2.0
    assert value(text, 'learnserve_examples_learned_total{model="gone"}') == 2.0
    ok = 'learnserve_requests_total{model="gone",route="/update",status="200"}'
    assert value(text, ok) == 1.0
    assert 'model="gone",route="/update",status="422"' not in text
    assert client.delete("/models/gone").status_code == 204


def test_metrics_size_does_not_grow_with_create_delete_cycles(client: httpx.Client) -> None:
    cycle(client, [f"a{j}" for j in range(3)])
    first = len(client.get("/metrics").content)
    for i in range(15):  # new names every time: the worst case
        cycle(client, [f"c{i}-{j}" for j in range(3)])
    text = client.get("/metrics").text
    left = [line for line in text.splitlines() if re.search(r'model="(a|c)\d', line)]
    assert not left, left[:10]
    # Counts of the routes without a model grow a digit here and there, no more.
    assert len(text.encode()) <= first + 2_000


# ---------------------------------------------------------------------- two workers


def fresh(url: str) -> httpx.Client:
    # A new connection per request: the kernel spreads them over both workers.
    return httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))


def on_each_worker(c: httpx.Client, method: str, path: str, **kw: object) -> dict[str, str]:
    """``path`` answered by both workers (GET /models also syncs a worker's catalog)."""
    seen: dict[str, str] = {}
    for _ in range(400):
        r = c.request(method, path, **kw)  # type: ignore[arg-type]
        assert r.status_code == 200, r.text
        seen.setdefault(r.headers["x-worker"], r.text)
        if len(seen) == 2:
            return seen
    raise AssertionError(f"{path} never reached both workers")


def file_keys(prom_dir: Path) -> dict[str, set[str]]:
    """The entries of each worker's files: {"counter_123.db": {key, ...}}."""
    return {
        f.name: {k for k, *_ in MmapedDict.read_all_values_from_file(str(f))}
        for f in prom_dir.glob("*.db")
    }


def distinct(keys: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(kind of file, key) over all workers."""
    return {(name.rsplit("_", 1)[0], k) for name, ks in keys.items() for k in ks}


def test_two_workers_deleted_models_leave_no_series(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        "LEARNSERVE_REDIS_URL": redis_url,
        "LEARNSERVE_DATA_DIR": str(tmp_path / "data"),
        "TMPDIR": str(tmp),  # where the CLI makes PROMETHEUS_MULTIPROC_DIR
    }
    proc = start_learnserve(port, env, workers=2)
    try:
        (prom_dir,) = tmp.glob("learnserve-prom-*")
        with fresh(url) as c:
            cycle(c, NAMES)
            on_each_worker(c, "GET", "/models")
            scrapes = on_each_worker(c, "GET", "/metrics")
            first = max(len(t.encode()) for t in scrapes.values())
            first_keys = distinct(file_keys(prom_dir))

            for _ in range(5):  # the same names again: the files do not grow
                cycle(c, NAMES)
            # One entry per (metric, labels) a worker ever used: the same names again
            # add none (a worker may see a request kind for the first time, which is
            # one of the entries the first cycle made on the other worker).
            # (The once-a-second gauges may have had their first turn later.)
            extra = distinct(file_keys(prom_dir)) - first_keys
            periodic = (  # the gauges the once-a-second loop sets
                '["learnserve_log_lag_entries"',
                '["learnserve_checkpoint_age_seconds"',
                '["learnserve_online_roc_auc"',
                # and a checkpoint's series: one worker writes it (the lease holder), so
                # which cycle first records a name's checkpoint series on either worker
                # depends on who held the lease then (seen once in 10 runs)
                '["learnserve_checkpoint_duration_seconds"',
                '["learnserve_checkpoint_backoff_seconds"',
            )
            assert all(k.startswith(periodic) for _, k in extra), extra
            for i in range(5):  # new names (these do add file entries): /metrics stays
                cycle(c, [f"u{i}"])
            on_each_worker(c, "GET", "/models")
            for text in on_each_worker(c, "GET", "/metrics").values():
                assert not re.search(r'model="(m|u)\d', text)
                assert len(text.encode()) <= first + 2_000

            # Created again: every worker's counters for it start from 0.
            version = traffic(c, "m0", updates=4)
            body = {"model": "m0", "instances": [{"x": EXAMPLES[0]["x"]}], "min_version": version}
            on_each_worker(c, "POST", "/predict", json=body)
            for text in on_each_worker(c, "GET", "/metrics").values():
                check_per_model_series_exist(text, "m0")
                assert value(text, 'learnserve_examples_accepted_total{model="m0"}') == 8.0
                # Both workers applied all 4 updates (every worker applies the log).
                assert value(text, 'learnserve_examples_learned_total{model="m0"}') == 16.0
                routes = series_of(text, "m0")
                count = [s for s in routes if s.startswith("learnserve_requests_total")]
                assert sum(float(s.split()[-1]) for s in count) >= 7.0
                update = 'learnserve_requests_total{model="m0",route="/update",status="200"}'
                assert value(text, update) == 4.0
    finally:
        stop_process(proc)
