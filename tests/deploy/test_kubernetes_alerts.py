"""deploy/kubernetes/base/prometheusrule.yaml: the alert rules parse, fire when they should,
and read only metrics that exist.

``promtool`` (Debian's prometheus package) checks and unit-tests the extracted rule
groups offline; the metric names are checked against service/observability/metrics.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.conftest import running_service
from tests.deploy.kubernetes_manifests import (
    Obj,
    alert_rules,
    exported_metrics,
    one,
    promql_label_matchers,
    promql_metric_names,
    render,
    repo_file,
    settings_env,
)
from tests.service.procs import RedisServer

# Scraped by a default kube-prometheus-stack, not by the service: name -> who exports it.
EXTERNAL = {
    "up": "Prometheus, per scrape target",
    "container_memory_working_set_bytes": "kubelet/cAdvisor",
    "kube_pod_container_resource_limits": "kube-state-metrics",
}
# Not exported by service/observability/metrics.py yet; the rule file says so next to
# each (none now).
FUTURE: set[str] = set()
# Labels Prometheus (Operator) attaches to every scraped series.
TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "endpoint", "container"}


@pytest.fixture(scope="module")
def rules() -> list[Obj]:
    return alert_rules(render("redis"))


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def write_groups(path: Path, *, annotations: bool = True) -> Path:
    groups = one(render("redis"), "PrometheusRule", "learnserve")["spec"]["groups"]
    if not annotations:  # unit tests compare labels; the templates are checked separately
        for rule in (r for g in groups for r in g["rules"]):
            rule.pop("annotations", None)
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def test_every_overlay_carries_the_same_rules() -> None:
    base = alert_rules(render("redis"))
    for overlay in ("redis-cluster", "sharded"):
        assert alert_rules(render(overlay)) == base


def test_rules_pass_promtool_check(tmp_path: Path) -> None:
    tool = promtool()
    run = subprocess.run(
        [tool, "check", "rules", str(write_groups(tmp_path / "rules.yaml"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(alert_rules(render('redis')))} rules found" in run.stdout


def test_rules_read_only_exported_or_documented_metrics(rules: list[Obj]) -> None:
    exported = exported_metrics()
    text = repo_file("base", "prometheusrule.yaml").read_text()
    used: set[str] = set()
    for rule in rules:
        names = promql_metric_names(rule["expr"])
        assert names, f"{rule['alert']}: no metric found in {rule['expr']!r}"
        unknown = names - exported.keys() - EXTERNAL.keys() - FUTURE
        assert not unknown, f"{rule['alert']} reads metrics nobody exports: {unknown}"
        used |= names
    for name in FUTURE & used:
        # documented in the header and beside the rule
        assert text.count(name) >= 3 and "NOT EXPORTED YET" in text
    for name in EXTERNAL.keys() & used:
        assert name in text.split("apiVersion:")[0], f"{name} not listed in the header"


def test_rules_match_on_labels_the_metrics_have(rules: list[Obj]) -> None:
    exported = exported_metrics()
    for rule in rules:
        for metric, labels in promql_label_matchers(rule["expr"]).items():
            if metric in exported:
                extra = labels - exported[metric] - TARGET_LABELS
                assert not extra, f"{rule['alert']}: {metric} has no label {extra}"


def test_the_parser_finds_metrics_and_not_functions_or_labels() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (namespace, le) (rate(a_bucket{route=~"x|y"}[5m])))'
        " > 0.25 and on (model) max without (pod) (b_total) / c offset 5m"
    )
    assert promql_metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert promql_label_matchers(expr) == {"a_bucket": {"route"}}


def test_the_alerts_cover_what_operators_need(rules: list[Obj]) -> None:
    used = set().union(*(promql_metric_names(r["expr"]) for r in rules))
    needed = {
        "learnserve_store_up",  # store down
        "learnserve_requests_total",  # 5xx ratio
        "learnserve_request_duration_seconds_bucket",  # p99 latency
        "learnserve_log_lag_entries",  # a pod behind the update log
        "learnserve_checkpoint_age_seconds",  # checkpoints not written
        "learnserve_event_loop_lag_seconds_bucket",  # a stalled event loop
        "learnserve_process_resident_memory_bytes",  # memory near the limit
        "learnserve_memory_limit_bytes",
        "learnserve_log_entries_lost_total",  # lost log entries
        "learnserve_model_drift_detections",  # a model's error rate changed
        "learnserve_online_accuracy",  # a classifier got worse
        "learnserve_online_ndcg_at_10",  # a ranker got worse
    }
    assert needed <= used
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]


# ------------------------------------------------------------------ promtool test rules

NS = 'namespace="prod"'
POD = f'{NS},pod="learnserve-0"'


def requests(status: int) -> str:
    return f'learnserve_requests_total{{{POD},route="/update",model="m",status="{status}"}}'


def latency(route: str, slow: bool) -> list[tuple[str, str]]:
    """Ten requests a minute on ``route``, each 0.5-1 s (slow) or under 0.1 s."""
    les = ("0.1", "0.25", "0.5", "1.0", "+Inf")
    name = "learnserve_request_duration_seconds_bucket"
    return [
        (
            f'{name}{{{POD},route="{route}",model="m",le="{le}"}}',
            "0+0x30" if slow and le in ("0.1", "0.25", "0.5") else "0+10x30",
        )
        for le in les
    ]


INFER = "/v2/models/{name}/infer"


def gauge(name: str, values: str, pid: str = "7") -> tuple[str, str]:
    return (f'{name}{{{POD},model="m",pid="{pid}"}}', values)


CASES: dict[str, dict[str, Any]] = {
    # the detector finds a change at minute 20 (two workers report the same state)
    "drift": {
        "series": [
            gauge("learnserve_model_drift_detections", "0x20 1x20"),
            gauge("learnserve_model_drift_detections", "0x20 1x20", pid="8"),
        ],
        "at": "25m",
        "alert": "LearnserveModelDriftDetected",
        "expect": [{"severity": "warning", "namespace": "prod", "model": "m"}],
    },
    # an old detection (restored after a restart: the series comes back at its value)
    "drift_old": {
        "series": [gauge("learnserve_model_drift_detections", "2x20 _x3 2x20")],
        "at": "40m",
        "alert": "LearnserveModelDriftDetected",
        "expect": [],
    },
    # a model re-created under the same name starts again at 0: no alert
    "drift_model_recreated": {
        "series": [gauge("learnserve_model_drift_detections", "3x20 0x20")],
        "at": "25m",
        "alert": "LearnserveModelDriftDetected",
        "expect": [],
    },
    # accuracy 0.85 for 90 minutes, then 0.70 for 30: a drop of 15 points
    "accuracy_drop": {
        "series": [gauge("learnserve_online_accuracy", "0.85x90 0.70x30")],
        "at": "115m",
        "alert": "LearnserveModelAccuracyDrop",
        "expect": [{"severity": "warning", "namespace": "prod", "model": "m"}],
    },
    # a stable model that wobbles by 2 points: quiet
    "accuracy_stable": {
        "series": [gauge("learnserve_online_accuracy", "0.84 0.86 " * 60)],
        "at": "115m",
        "alert": "LearnserveModelAccuracyDrop",
        "expect": [],
    },
    # a slow slide from 0.85 to 0.79 over two hours (0.05/h): at most 0.05 below the
    # hour before: quiet; the alert is for a fall, not a drift of half a point a minute
    "accuracy_slow_slide": {
        "series": [gauge("learnserve_online_accuracy", "0.85-0.0005x120")],
        "at": "115m",
        "alert": "LearnserveModelAccuracyDrop",
        "expect": [],
    },
    "ndcg_drop": {
        "series": [gauge("learnserve_online_ndcg_at_10", "0.62x90 0.50x30")],
        "at": "115m",
        "alert": "LearnserveModelNdcgDrop",
        "expect": [{"severity": "warning", "namespace": "prod", "model": "m"}],
    },
    # the store answers, then stops answering: alert after the 1 m `for`
    "store_down": {
        "series": [(f'learnserve_store_up{{{POD},store="redis"}}', "1 1 0x10")],
        "at": "8m",
        "alert": "LearnserveStoreDown",
        "expect": [{"severity": "critical", "namespace": "prod", "pod": "learnserve-0"}],
        "extra_labels": {"store": "redis"},
    },
    # 2% of requests answer 503
    "errors": {
        "series": [
            (requests(200), "0+98x30"),
            (requests(503), "0+2x30"),
        ],
        "at": "20m",
        "alert": "LearnserveHighErrorRatio",
        "expect": [{"severity": "warning", "namespace": "prod"}],
    },
    # 0.5% answer 503: below the threshold
    "few_errors": {
        "series": [
            (requests(200), "0+199x30"),
            (requests(503), "0+1x30"),
        ],
        "at": "20m",
        "alert": "LearnserveHighErrorRatio",
        "expect": [],
    },
    # an idle model is not checkpointed: its age grows, and that is fine
    "idle_checkpoint": {
        "series": [
            (f'learnserve_checkpoint_age_seconds{{{POD},model="m"}}', "0+60x40"),
            (f'learnserve_examples_accepted_total{{{POD},model="m"}}', "5+0x40"),
        ],
        "at": "35m",
        "alert": "LearnserveCheckpointStale",
        "expect": [],
    },
    # a learning model without a checkpoint for over 15 minutes
    "stale_checkpoint": {
        "series": [
            (f'learnserve_checkpoint_age_seconds{{{POD},model="m"}}', "0+60x40"),
            (f'learnserve_examples_accepted_total{{{POD},model="m"}}', "0+100x40"),
        ],
        "at": "35m",
        "alert": "LearnserveCheckpointStale",
        "expect": [{"severity": "warning", "namespace": "prod", "model": "m"}],
    },
    # two workers at 1.0 + 0.95 GB of a 2 GiB limit (91%): the sum counts
    "memory": {
        "series": [
            (f'learnserve_process_resident_memory_bytes{{{POD},pid="7"}}', "1000000000x20"),
            (f'learnserve_process_resident_memory_bytes{{{POD},pid="8"}}', "950000000x20"),
            (f"learnserve_memory_limit_bytes{{{POD}}}", "2147483648x20"),
        ],
        "at": "15m",
        "alert": "LearnserveMemoryNearLimit",
        "expect": [{"severity": "warning", "namespace": "prod", "pod": "learnserve-0"}],
    },
    # one worker alone at 47%: below
    "memory_one_worker": {
        "series": [
            (f'learnserve_process_resident_memory_bytes{{{POD},pid="7"}}', "1000000000x20"),
            (f"learnserve_memory_limit_bytes{{{POD}}}", "2147483648x20"),
        ],
        "at": "15m",
        "alert": "LearnserveMemoryNearLimit",
        "expect": [],
    },
    # no memory limit: no limit series, no alert however large the process
    "memory_no_limit": {
        "series": [(f'learnserve_process_resident_memory_bytes{{{POD},pid="7"}}', "9e12x20")],
        "at": "15m",
        "alert": "LearnserveMemoryNearLimit",
        "expect": [],
    },
    # a worker lost acknowledged log entries (a failover without WAIT)
    "entries_lost": {
        "series": [(f'learnserve_log_entries_lost_total{{{POD},model="m"}}', "0 0 0 3 3 3 3")],
        "at": "5m",
        "alert": "LearnserveLogEntriesLost",
        "expect": [{"severity": "critical", "namespace": "prod", "model": "m"}],
    },
    # scrapes and probes failing are not traffic errors: 5xx on /metrics only
    "probe_errors_only": {
        "series": [
            (requests(200), "0+100x30"),
            (
                f'learnserve_requests_total{{{POD},route="/metrics",model="",status="500"}}',
                "0+50x30",
            ),
        ],
        "at": "20m",
        "alert": "LearnserveHighErrorRatio",
        "expect": [],
    },
    # a worker 20000 entries behind for longer than 5 minutes
    "log_lag": {
        "series": [(f'learnserve_log_lag_entries{{{POD},model="m",pid="7"}}', "20000x20")],
        "at": "10m",
        "alert": "LearnserveLogLag",
        "expect": [
            {"severity": "warning", "namespace": "prod", "pod": "learnserve-0", "model": "m"}
        ],
    },
    # every /predict takes 0.5-1 s: p99 above 250 ms for more than 10 minutes
    "slow_predict": {
        "series": latency("/predict", slow=True),
        "at": "25m",
        "alert": "LearnserveHighP99Latency",
        "expect": [{"severity": "warning", "namespace": "prod", "route": "/predict"}],
    },
    # KServe v2 inference, by its route label (the template), with or without a version
    "slow_infer": {
        "series": latency(INFER, slow=True),
        "at": "25m",
        "alert": "LearnserveHighP99Latency",
        "expect": [{"severity": "warning", "namespace": "prod", "route": INFER}],
    },
    "slow_versioned_infer": {
        "series": latency("/v2/models/{name}/versions/{version}/infer", slow=True),
        "at": "25m",
        "alert": "LearnserveHighP99Latency",
        "expect": [
            {
                "severity": "warning",
                "namespace": "prod",
                "route": "/v2/models/{name}/versions/{version}/infer",
            }
        ],
    },
    "fast_infer": {
        "series": latency(INFER, slow=False),
        "at": "25m",
        "alert": "LearnserveHighP99Latency",
        "expect": [],
    },
    # admin routes (artifact uploads) are slow by nature: no latency alert
    "slow_artifact_upload": {
        "series": latency("/models/{name}/artifact", slow=True),
        "at": "25m",
        "alert": "LearnserveHighP99Latency",
        "expect": [],
    },
    # the event loop stalls 0.25-1 s at every wake-up
    "loop_lag": {
        "series": [
            (
                f'learnserve_event_loop_lag_seconds_bucket{{{POD},le="{le}"}}',
                "0+0x30" if le in ("0.1", "0.25") else "0+10x30",
            )
            for le in ("0.1", "0.25", "1.0", "+Inf")
        ],
        "at": "25m",
        "alert": "LearnserveEventLoopLag",
        "expect": [{"severity": "warning", "namespace": "prod", "pod": "learnserve-0"}],
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_alert_fires_only_when_it_should(case: str, tmp_path: Path) -> None:
    tool = promtool()
    spec = CASES[case]
    write_groups(tmp_path / "rules.yaml", annotations=False)
    expected = [{"exp_labels": {**e, **spec.get("extra_labels", {})}} for e in spec["expect"]]
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in spec["series"]],
                "alert_rule_test": [
                    {"eval_time": spec["at"], "alertname": spec["alert"], "exp_alerts": expected}
                ],
            }
        ],
    }
    (tmp_path / "unit.yaml").write_text(yaml.safe_dump(unit, sort_keys=False))
    run = subprocess.run(
        [tool, "test", "rules", "unit.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr


# ------------------------------------------------------------------ against the service


def test_the_pod_settings_serve_probes_and_metrics_without_a_key(
    deploy_redis: RedisServer, tmp_path: Path
) -> None:
    """The service, started with the rendered ConfigMap's settings (production, API keys
    on) and a real Redis, answers the probes and the keyless scrape, and exposes the
    learnserve metrics the rules read."""
    env = {k: v for k, v in settings_env(render("redis")).items() if k.startswith("LEARNSERVE_")}
    env = {k: v for k, v in env.items() if not v.startswith("<")}  # Secrets, downward API
    env.pop("LEARNSERVE_REDIS_URL")
    env["LEARNSERVE_API_KEYS"] = "ops=predict+update+admin"
    # a long timeout: the first start in a checkout compiles the numba kernels
    data = tmp_path / "data"
    with running_service(data, redis_url=deploy_redis.url, env=env, timeout=600) as url:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert httpx.get(url + path, timeout=10).status_code == 200, path
        assert httpx.post(url + "/update", json={}, timeout=10).status_code == 401
        served = httpx.get(url + "/metrics", timeout=10).text
    helped = set(re.findall(r"^# HELP (\w+) ", served, flags=re.M))
    used = set().union(*(promql_metric_names(r["expr"]) for r in alert_rules(render("redis"))))
    for name in {n for n in used if n.startswith("learnserve_")} - FUTURE:
        family = re.sub(r"_(bucket|sum|count)$", "", name)  # a histogram's HELP names it
        assert family in helped, f"{name} is not on the scraped /metrics"
