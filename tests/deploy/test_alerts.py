"""One set of alert rules for both deployments: docker/prometheus/alerts.yml is what the
compose Prometheus loads, and the Kubernetes PrometheusRule carries the same groups.
The rules also fire on compose-style series (one `instance` per replica, no namespace or
pod), checked with ``promtool test rules``."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.settings import Settings
from tests.deploy.test_kubernetes_alerts import promtool
from tests.service.serving import ServerThread

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "docker/prometheus/alerts.yml"


def test_the_prometheusrule_carries_exactly_the_compose_rules() -> None:
    compose = yaml.safe_load(ALERTS.read_text())["groups"]
    rule = yaml.safe_load((REPO / "deploy/kubernetes/base/prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == compose, (
        "deploy/kubernetes/base/prometheusrule.yaml differs from docker/prometheus/alerts.yml: "
        "copy the groups over"
    )


def test_the_compose_prometheus_loads_the_rules() -> None:
    config = yaml.safe_load((REPO / "docker/prometheus/prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]  # relative to the config file
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = compose["services"]["prometheus"]["volumes"]
    targets = {m.split(":")[0]: m.split(":")[1] for m in mounts if m.startswith("./")}
    config_dir = Path(targets["./docker/prometheus/prometheus.yml"]).parent
    assert Path(targets["./docker/prometheus/alerts.yml"]) == config_dir / "alerts.yml"
    run = subprocess.run(
        [promtool(), "check", "config", str(REPO / "docker/prometheus/prometheus.yml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 12 rules found" in run.stdout, run.stdout


INSTANCE = 'job="learnserve",instance="app-2:8000"'


def _unit(tmp_path: Path, series: list[tuple[str, str]], at: str, alert: str,
          expect: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:  # fmt: skip
    rules = yaml.safe_load(ALERTS.read_text())
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        rule.pop("annotations", None)  # the unit tests compare labels
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    unit: dict[str, Any] = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": alert,
                        "exp_alerts": [{"exp_labels": e} for e in expect],
                    }
                ],
            }
        ],
    }
    (tmp_path / "unit.yaml").write_text(yaml.safe_dump(unit, sort_keys=False))
    return subprocess.run(
        [promtool(), "test", "rules", "unit.yaml"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("series", "at", "alert", "expect"),
    [
        (  # a compose replica's two workers near the container's limit
            [
                (f'learnserve_process_resident_memory_bytes{{{INSTANCE},pid="10"}}', "6e8x20"),
                (f'learnserve_process_resident_memory_bytes{{{INSTANCE},pid="11"}}', "4e8x20"),
                (f"learnserve_memory_limit_bytes{{{INSTANCE}}}", "1073741824x20"),
            ],
            "10m",
            "LearnserveMemoryNearLimit",
            [{"severity": "warning", "instance": "app-2:8000"}],
        ),
        (  # the replica lost Redis
            [(f'learnserve_store_up{{{INSTANCE},store="redis"}}', "1 0x10")],
            "5m",
            "LearnserveStoreDown",
            [
                {
                    "severity": "critical",
                    "instance": "app-2:8000",
                    "job": "learnserve",
                    "store": "redis",
                }
            ],
        ),
        (  # a stalled event loop in one replica
            [
                (f'learnserve_event_loop_lag_seconds_bucket{{{INSTANCE},le="{le}"}}', v)
                for le, v in (("0.1", "0+0x30"), ("1.0", "0+5x30"), ("+Inf", "0+5x30"))
            ],
            "25m",
            "LearnserveEventLoopLag",
            [{"severity": "warning", "instance": "app-2:8000"}],
        ),
    ],
    ids=["memory", "store_down", "loop_lag"],
)
def test_compose_series_fire_the_alerts(
    tmp_path: Path,
    series: list[tuple[str, str]],
    at: str,
    alert: str,
    expect: list[dict[str, str]],
) -> None:
    run = _unit(tmp_path, series, at, alert, expect)
    assert run.returncode == 0, run.stdout + run.stderr


# ------------------------------------------------------------------ the latency alert's routes

LEARNING_PATHS = (
    ("POST", "/predict"),
    ("POST", "/update"),
    ("POST", "/models/m/predict"),
    ("POST", "/models/m/update"),
    ("POST", "/v2/models/m/infer"),
    ("POST", "/v2/models/m/versions/1/infer"),
)
ADMIN_PATHS = (
    ("PUT", "/models/m"),
    ("PUT", "/models/m/artifact"),
    ("POST", "/models/m/checkpoint"),
    ("GET", "/models/m/state"),
)


def _route_counts(scraped: str) -> dict[str, float]:
    """Requests counted per route label (summed over the other labels)."""
    count = r'^learnserve_request_duration_seconds_count\{[^}]*route="([^"]*)"[^}]*\} (\S+)'
    out: dict[str, float] = {}
    for route, n in re.findall(count, scraped, re.M):
        out[route] = out.get(route, 0.0) + float(n)
    return out


def _scraped(c: Any, before: dict[str, float], expected: int) -> tuple[set[str], dict[str, float]]:
    """The routes whose count grew since ``before`` (the metrics are process-wide: other
    in-process servers may have counted the same routes already). A request's series are
    recorded once its answer is sent: the scrape right after may come first, so read until
    ``expected`` routes have grown (or 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        now = _route_counts(c.get("/metrics").text)
        grown = {r for r, n in now.items() if n > before.get(r, 0.0)} - {"/metrics"}
        if len(grown) >= expected or time.monotonic() > deadline:
            return grown, now
        time.sleep(0.05)


def test_the_latency_alert_covers_every_learning_route_the_service_labels(tmp_path: Path) -> None:
    """The route labels come from the service's metrics middleware (the route templates):
    every learning and inference route, KServe v2 infer included, matches the alert's
    route regex (PromQL regexes are anchored: fullmatch), and admin routes do not."""
    rule = next(r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]
                if r["alert"] == "LearnserveHighP99Latency")  # fmt: skip
    regex = re.search(r'route=~"([^"]+)"', rule["expr"])
    assert regex is not None
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        before = _route_counts(c.get("/metrics").text)
        for method, path in LEARNING_PATHS:
            c.request(method, path, json={})
        learning, after = _scraped(c, before, len(LEARNING_PATHS))
        for method, path in ADMIN_PATHS:
            c.request(method, path, json={})
        admin, _ = _scraped(c, after, len(ADMIN_PATHS))
    assert {"/v2/models/{name}/infer", "/v2/models/{name}/versions/{version}/infer"} <= learning
    assert len(learning) == len(LEARNING_PATHS) and len(admin) == len(ADMIN_PATHS)
    assert [r for r in sorted(learning) if not re.fullmatch(regex[1], r)] == []
    assert [r for r in sorted(admin) if re.fullmatch(regex[1], r)] == []
