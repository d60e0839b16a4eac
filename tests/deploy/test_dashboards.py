"""Grafana dashboards: well-formed, exported metrics only, every query answered by Prometheus.

The live test runs what docker compose runs, natively: redis-server, ``learnserve
serve --workers 2`` on it, and Debian's ``prometheus`` with the repository's own
scrape config (target rewritten to the test's port, interval shortened). It drives
mixed traffic, a batch-model deploy and rollback and a short Redis outage, then
evaluates every PromQL expression of every panel through ``/api/v1/query``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from service.observability import metrics as service_metrics
from service.observability.process_stats import memory_limit_bytes
from tests.deploy.conftest import DASHBOARDS, REPO, running_service
from tests.service.procs import RedisServer, free_port, stop_process, wait_http_ok

PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "inf", "nan",
}  # fmt: skip
# Standard prometheus-client process/platform collectors, and Prometheus' own series.
STANDARD_PREFIXES = ("process_", "python_gc_", "python_info")
STANDARD_NAMES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def exported_names() -> set[str]:
    """Every sample name ``service/observability/metrics.py`` exports (counters' _total,
    histograms' parts)."""
    names: set[str] = set()
    for obj in vars(service_metrics).values():
        if not isinstance(obj, MetricWrapperBase):
            continue
        kind, name = obj._type, obj._name
        if kind == "counter":
            names.add(f"{name}_total")
        elif kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        else:
            names.add(name)
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (strings, matchers, ranges, groupings removed)."""
    s = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    out = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][\w:]*", s):
        if s[m.end() :].lstrip().startswith("("):  # a function or an aggregation
            continue
        if m.group().lower() not in PROMQL_KEYWORDS:
            out.add(m.group())
    return out


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in dashboard["panels"]:
        if p.get("type") == "row":
            yield from p.get("panels", [])
        else:
            yield p


def all_targets() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expr) for every query of every panel and annotation."""
    out = []
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        for p in panels(d):
            out += [(path.name, p["title"], t["expr"]) for t in p["targets"]]
        for a in d.get("annotations", {}).get("list", []):
            if "expr" in a:
                out.append((path.name, f"annotation {a['name']}", a["expr"]))
    return out


# Series only some models have: a learning gauge belongs to one kind of model.
METRIC_KIND = {
    "learnserve_online_accuracy": "linear",
    "learnserve_online_loss": "linear",
    "learnserve_online_log_loss": "linear",  # clf-a and clf-b are binary
    "learnserve_online_roc_auc": "linear",
    "learnserve_online_ndcg_at_10": "ranksvm",
    "learnserve_online_mae": "regression",
    "learnserve_online_rmse": "regression",
    "learnserve_online_r2": "regression",
    "learnserve_online_interval_coverage": "regression",  # reg is an AROW regressor
}
# Series that exist only where the host sets them: no cgroup memory limit, no series.
LIMIT_METRIC = "learnserve_memory_limit_bytes"


# --------------------------------------------------------------------- static


def test_metric_name_extraction() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (route, le) (rate(learnserve_request_duration_seconds"
        '_bucket{model=~"$model",route!="x y"}[$__rate_interval]))) / on(route) group_left '
        "sum without (pid) (up) or vector(0) and learnserve_models offset 5m"
    )
    want = {"learnserve_request_duration_seconds_bucket", "up", "learnserve_models"}
    assert metric_names(expr) == want


def test_the_three_dashboards_exist() -> None:
    assert [p.name for p in DASHBOARDS] == ["learning.json", "service.json", "store.json"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_is_well_formed(path: Path) -> None:
    d = json.loads(path.read_text())
    assert d["uid"] and d["title"].startswith("learnserve")
    ids = [p["id"] for p in panels(d)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    for p in panels(d):
        assert p["targets"], f"panel {p['title']!r} has no query"
        assert p["datasource"]["uid"] == "prometheus"
        for t in p["targets"]:
            assert t["expr"].strip() and t["refId"]
            assert t["datasource"]["uid"] == "prometheus"
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0


def test_dashboard_uids_are_unique() -> None:
    uids = [json.loads(p.read_text())["uid"] for p in DASHBOARDS]
    assert len(uids) == len(set(uids))


def test_panels_use_only_exported_metrics() -> None:
    allowed = exported_names()
    for name, title, expr in all_targets():
        for metric in metric_names(expr):
            standard = metric in STANDARD_NAMES or metric.startswith(STANDARD_PREFIXES)
            ok = metric in allowed or standard
            where = "service/observability/metrics.py"
            assert ok, f"{name} / {title!r}: {metric!r} is not exported by {where}"


def test_every_exported_metric_is_on_a_dashboard() -> None:
    used = set().union(*(metric_names(e) for _, _, e in all_targets()))
    exported = exported_names()

    # A histogram counts as shown when any of its _bucket/_sum/_count is.
    def base(n: str) -> str:
        return re.sub(r"_(bucket|sum|count)$", "", n)

    bases = {base(n) for n in used}
    missing = {n for n in exported if n not in used and base(n) not in bases}
    assert not missing, f"exported but on no dashboard: {sorted(missing)}"


def test_service_dashboard_has_latency_quantiles_per_route() -> None:
    exprs = [e for n, _, e in all_targets() if n == "service.json"]
    for q in ("0.5", "0.95", "0.99"):
        assert any(
            f"histogram_quantile({q}, sum by (route, le)" in e
            and "learnserve_request_duration_seconds_bucket" in e
            for e in exprs
        ), q


# ----------------------------------------------------------------------- live

WINDOW = "60s"  # stands in for $__rate_interval and $__range


def grafana_to_promql(expr: str) -> str:
    """Replace Grafana's variables the way Grafana would for 'All' and a short time range."""
    for var in ("$__rate_interval", "$__range", "$__interval"):
        expr = expr.replace(var, WINDOW)
    return expr.replace("$model", ".*")


@contextlib.contextmanager
def running_prometheus(target: str, workdir: Path) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (make system-deps: Debian's prometheus package)")
    config = yaml.safe_load((REPO / "docker/prometheus/prometheus.yml").read_text())
    port = free_port()
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    # the real rules, as compose loads them (rule_files are relative to the config)
    config["rule_files"] = [str(REPO / "docker/prometheus" / f) for f in config["rule_files"]]
    for job in config["scrape_configs"]:
        job.pop("scrape_interval", None)
        if job["job_name"] == "learnserve":  # compose's DNS discovery -> the test's port
            job.pop("dns_sd_configs")
            job["static_configs"] = [{"targets": [target]}]
        else:
            job["static_configs"] = [{"targets": [f"127.0.0.1:{port}"]}]
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    log = open(workdir / "prometheus.log", "wb")
    args = [
        binary,
        f"--config.file={path}",
        f"--storage.tsdb.path={workdir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/-/ready", 60, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)
        log.close()


def tiny_lambdamart(seed: int) -> bytes:
    import numpy as np

    from learners.ranking.lambdamart import LambdaMART

    rng = np.random.default_rng(seed)
    X = rng.random((60, 4))
    y = (X[:, 0] * 3).astype(int)
    return LambdaMART(n_estimators=3, min_data_in_leaf=5).fit(X, y, [20, 20, 20]).to_bytes()


MODELS_OF_KIND = {
    "linear": {"clf-a", "clf-b", "recs"},
    "ranksvm": {"rank"},
    "lambdamart": {"ltr"},
    "regression": {"reg"},
}


def drive_traffic(c: httpx.Client, rounds: int = 6) -> None:
    import random

    rng = random.Random(7)
    late: list[str] = []
    hashed = {"kind": "hashed", "bits": 16}
    for name in ("clf-a", "clf-b"):
        r = c.put(f"/models/{name}", json={"algorithm": "arow", "params": {}, "features": hashed})
        assert r.status_code in (200, 201), r.text
    r = c.put("/models/rank", json={"algorithm": "ranksvm", "params": {}, "features": hashed})
    assert r.status_code in (200, 201), r.text
    r = c.put("/models/reg", json={"algorithm": "arow_regression", "features": hashed})
    assert r.status_code in (200, 201), r.text
    records = {"kind": "records", "bits": 12, "fields": {"n": {"type": "numeric"}}}
    r = c.put("/models/recs", json={"algorithm": "arow", "features": records})
    assert r.status_code in (200, 201), r.text
    # a decision model whose unrewarded events learn the default reward after 1 s
    decision = {"algorithm": "decision", "features": hashed, "default_reward": 0.0,
                "reward_wait_seconds": 1}  # fmt: skip
    r = c.put("/models/dec", json=decision)
    assert r.status_code in (200, 201), r.text

    def x() -> dict[str, float]:
        return {f"f{rng.randrange(50)}": rng.gauss(0, 1) for _ in range(8)}

    for _ in range(rounds):
        for name in ("clf-a", "clf-b"):
            ex = []
            for _ in range(16):
                xi = x()
                ex.append({"x": xi, "y": "+1" if sum(xi.values()) > 0 else "-1"})
            assert c.post("/update", json={"model": name, "examples": ex}).status_code == 200
            body = {"model": name, "instances": [{"x": x()} for _ in range(4)]}
            assert c.post("/predict", json=body).status_code == 200
        items = [{"x": x(), "relevance": rng.randrange(3)} for _ in range(6)]
        q = {"model": "rank", "queries": [{"qid": "q", "items": items}]}
        assert c.post("/update", json=q).status_code == 200, c.post("/update", json=q).text
        for item in items:
            item.pop("relevance")
        assert c.post("/predict", json=q).status_code == 200
        rows = [x() for _ in range(8)]
        ex = [{"x": xi, "y": 3.0 * sum(xi.values()) + 10.0} for xi in rows]
        assert c.post("/update", json={"model": "reg", "examples": ex}).status_code == 200
        body = {"model": "reg", "instances": [{"x": x()} for _ in range(2)]}
        assert c.post("/predict", json=body).status_code == 200
        # raw records with a field the model does not read (listed, counted, not learned)
        ex = [{"x": {"n": rng.gauss(0, 1), "typo": 1}, "y": rng.choice(["+1", "-1"])}]
        r = c.post("/update", json={"model": "recs", "examples": ex})
        assert r.status_code == 200 and r.json()["ignored_fields"] == ["typo"], r.text
        actions = [{"id": a, "features": {"t": a}} for a in ("a", "b", "c")]
        for k in range(2):  # one rewarded, one left to the default reward
            ev = f"ev{rng.random()}"
            r = c.post("/models/dec/rank", json={"context": x(), "actions": actions,
                                                 "event_id": ev})  # fmt: skip
            assert r.status_code == 200, r.text
            if k == 0:
                r = c.post("/models/dec/reward", json={"event_id": ev, "reward": 1.0})
                assert r.status_code == 200, r.text
            else:
                late.append(ev)
    # the rewards that come after the default (409 default_reward_applied): counted
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the defaults are learned (about 1 s)
        text = c.get("/metrics").text
        done = re.search(r'^learnserve_default_rewards_total\{model="dec"\} (\S+)$', text, re.M)
        if done and float(done.group(1)) >= len(late):
            break
        time.sleep(0.5)
    for ev in late:
        r = c.post("/models/dec/reward", json={"event_id": ev, "reward": 1.0})
        assert r.status_code == 409, r.text
        assert r.json()["detail"]["error"] == "default_reward_applied", r.text
    # Client errors for the error panels: a bad label and an unknown model.
    bad = {"model": "clf-a", "examples": [{"x": {"a": 1.0}, "y": 1.5}]}
    assert c.post("/update", json=bad).status_code == 422
    assert c.post("/predict", json={"model": "nope", "instances": []}).status_code == 404


def drift_clf_b(c: httpx.Client, prom: str) -> None:
    """clf-b learns its rule well, then gets random labels: its error rate jumps from
    ~0.1 to ~0.5 and its detector fires (the drift annotation). Prometheus sees the
    detections gauge at 0 first (a gauge first scraped at 1 shows no change)."""
    import random

    rng = random.Random(11)
    wait_scraped(prom, 'max(learnserve_model_drift_detections{model="clf-b"}) == 0')
    for k in range(60):
        ex = []
        for _ in range(16):
            xi = {f"f{rng.randrange(50)}": rng.gauss(0, 1) for _ in range(8)}
            y = "+1" if (sum(xi.values()) > 0 if k < 30 else rng.random() < 0.5) else "-1"
            ex.append({"x": xi, "y": y})
        assert c.post("/update", json={"model": "clf-b", "examples": ex}).status_code == 200
    assert c.get("/models/clf-b").json()["drift"]["detections"] >= 1
    wait_scraped(prom, 'max(learnserve_model_drift_detections{model="clf-b"}) >= 1')


def wait_scraped(prom: str, promql: str) -> None:
    """Until Prometheus has scraped a sample that ``promql`` selects (at most 30 s): an
    operator's deploys are seconds apart, the test's would fall between two scrapes."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        q = httpx.get(f"{prom}/api/v1/query", params={"query": promql}, timeout=10)
        if q.json()["data"]["result"]:
            return
        time.sleep(0.3)
    pytest.fail(f"Prometheus never saw {promql}")


def deploy_and_roll_back(c: httpx.Client, prom: str) -> None:
    """Two LambdaMART versions deployed, then a rollback to the first; Prometheus scrapes
    in between (so the annotations and increase() have something to see)."""
    headers = {"Content-Type": "application/octet-stream"}
    for seed in (1, 2):
        r = c.put("/models/ltr/artifact", content=tiny_lambdamart(seed), headers=headers)
        assert r.status_code in (200, 201), r.text
        wait_scraped(prom, f'sum(learnserve_deploys_total{{model="ltr"}}) == {seed}')
    # the rollback counter exists (at 0) from the model's first deploy
    wait_scraped(prom, 'sum(learnserve_rollbacks_total{model="ltr"}) == 0')
    versions = c.get("/models/ltr/artifacts")
    assert versions.status_code == 200, versions.text
    assert [v["version"] for v in versions.json()["versions"]] == [1, 2]
    r = c.put("/models/ltr/active", json={"version": 1})
    assert r.status_code == 200, r.text
    body = {"model": "ltr", "instances": [{"x": [0.1, 0.2, 0.3, 0.4]}]}
    r = c.post("/predict", json=body)
    assert r.status_code == 200 and r.json()["version"] == 1, r.text


def redis_outage(c: httpx.Client, redis: RedisServer, prom: str, logs: list[Path]) -> None:
    """Stop Redis: /update fails with 503 (store_up -> 0, store errors counted); restart."""
    redis.stop()
    try:
        ex = {"model": "clf-a", "examples": [{"x": {"a": 1.0}, "y": "+1"}]}
        r = c.post("/update", json=ex)
        assert r.status_code == 503, r.text
        # Keep the store down until Prometheus has scraped it down (a fixed sleep was
        # not always enough on a loaded machine), at most 15 s.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            q = httpx.get(f"{prom}/api/v1/query", params={"query": "min(learnserve_store_up)"})
            res = q.json()["data"]["result"]
            if res and res[0]["value"][1] == "0":
                break
            time.sleep(0.5)
    finally:
        redis.start()
    # The service reconnects by itself, each worker on its own: ``c`` keeps one keep-alive
    # connection (one worker), so recovery is judged on fresh connections, which the
    # workers share, until ten in a row succeed (one success was one worker: the next
    # PUT reached the other, still reconnecting, and got 503).
    deadline = time.monotonic() + 30
    in_a_row = 0
    update_url = f"{str(c.base_url).rstrip('/')}/update"
    while time.monotonic() < deadline and in_a_row < 10:
        ok = httpx.post(update_url, json=ex, timeout=10).status_code == 200
        in_a_row = in_a_row + 1 if ok else 0
        time.sleep(0.1 if ok else 0.5)
    # Fresh connections may all have reached one worker (the kernel hands accepts to
    # whichever worker waits): ``c``'s own worker must recover too, for a write to the
    # store that is not an append (the catalog) as well as for an append.
    put = {"algorithm": "arow", "params": {}, "features": {"kind": "hashed", "bits": 16}}
    last = None
    while time.monotonic() < deadline:
        last = c.put("/models/clf-a", json=put)
        if last.status_code in (200, 201):
            last = c.post("/update", json=ex)
            if last.status_code == 200 and in_a_row >= 10:
                return
        time.sleep(0.5)
    tail = "".join(p.read_text(errors="replace")[-6000:] for p in logs)
    pytest.fail(
        f"the service did not recover after Redis came back ({in_a_row} fresh updates in a "
        f"row; keep-alive worker: {last and (last.status_code, last.text)})\n{tail}"
    )


def query_until_nonempty(prom: str, promql: str, deadline: float) -> dict[str, Any]:
    while True:
        r = httpx.get(f"{prom}/api/v1/query", params={"query": promql}, timeout=10)
        body: dict[str, Any] = r.json()
        assert r.status_code == 200 and body["status"] == "success", (promql, body)
        result = body["data"]["result"]
        nonempty = len(result) > 0 if body["data"]["resultType"] in ("vector", "matrix") else True
        if nonempty or time.monotonic() > deadline:
            return body
        time.sleep(0.5)


def test_every_panel_query_returns_series(deploy_redis: RedisServer) -> None:
    logs: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="learnserve-dash-") as tmp:
        work = Path(tmp)
        env = {
            "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "1",
            "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "5",
        }
        with (
            running_service(
                work / "data", workers=2, redis_url=deploy_redis.url, env=env, logs=logs
            ) as url,
            running_prometheus(url.removeprefix("http://"), work) as prom,
            httpx.Client(base_url=url, timeout=30) as c,
        ):
            drive_traffic(c)
            drift_clf_b(c, prom)
            deploy_and_roll_back(c, prom)
            redis_outage(c, deploy_redis, prom, logs)
            drive_traffic(c, rounds=2)
            time.sleep(3)  # checkpoints (every 1 s) and two more scrapes (every 1 s)
            up = query_until_nonempty(prom, 'up{job="learnserve"}', time.monotonic() + 10)
            assert [s["value"][1] for s in up["data"]["result"]] == ["1"]
            deadline = time.monotonic() + 20
            empty = []
            no_limit = memory_limit_bytes() is None  # the service runs on this host
            wrong_kind = []
            for name, title, expr in all_targets():
                promql = grafana_to_promql(expr)
                if title.startswith("annotation "):  # Grafana draws every step of the range
                    promql = f"max_over_time(({promql})[10m:1s])"
                body = query_until_nonempty(prom, promql, deadline)
                data = body["data"]
                if data["resultType"] in ("vector", "matrix") and not data["result"]:
                    if not (no_limit and metric_names(expr) == {LIMIT_METRIC}):
                        empty.append(f"{name} / {title}: {expr}")
                kinds = {METRIC_KIND[m] for m in metric_names(expr) if m in METRIC_KIND}
                for kind in kinds:  # a learning panel draws only models of its kind
                    shown = {r["metric"].get("model") for r in data["result"]}
                    if not shown <= MODELS_OF_KIND[kind]:
                        wrong_kind.append(f"{name} / {title}: {shown - MODELS_OF_KIND[kind]}")
            if empty:  # what the counters behind the annotations looked like
                raw = query_until_nonempty(
                    prom, "{__name__=~'learnserve_(deploys|rollbacks)_total'}[10m]", deadline
                )
                empty.append(json.dumps(raw["data"]["result"])[:3000])
            assert not empty, "queries with no series:\n" + "\n".join(empty)
            assert not wrong_kind, "series of the wrong kind:\n" + "\n".join(wrong_kind)
            # The service itself exports each learning gauge for its kind only (and a
            # decision model's reward regressor its regression figures, on rewards; the
            # regression panels keep to kind="regression").
            exported_by = {**MODELS_OF_KIND, "regression": {"reg", "dec"}}
            for metric, kind in METRIC_KIND.items():
                res = query_until_nonempty(prom, metric, deadline)["data"]["result"]
                assert {r["metric"]["model"] for r in res} == exported_by[kind], metric
            # Counters exist at 0 from a model's creation: increase() sees the rollback.
            rb = query_until_nonempty(
                prom, f"sum(increase(learnserve_rollbacks_total[{WINDOW}]))", deadline
            )
            assert float(rb["data"]["result"][0]["value"][1]) > 0.5, rb
            # Errors are counted by their body's code.
            codes = query_until_nonempty(
                prom, "sum by (error) (learnserve_request_errors_total)", deadline
            )["data"]["result"]
            assert {"invalid_input", "model_not_found", "store_unavailable"} <= {
                r["metric"]["error"] for r in codes
            }, codes
            # The outage is visible: the store was down for at least one scrape.
            low = query_until_nonempty(
                prom, f"min_over_time(min(learnserve_store_up)[{WINDOW}:1s])", deadline
            )
            assert low["data"]["result"][0]["value"][1] == "0"
