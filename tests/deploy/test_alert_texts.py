"""What an alert says: its summary names the pod (Kubernetes) or the instance (compose),
never the two glued together (``learnserve-010.244.1.7:8000``); every alert links its
runbook section (``runbook_url``) through one prefix that a deployment can replace, and
the way docs/operations/dashboards-and-alerts.md says to replace it on Kubernetes works.

The texts are rendered by ``promtool test rules`` from the real rule file, on series
shaped as each deployment scrapes them.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import REPO
from tests.deploy.kubernetes_manifests import KUBERNETES, alert_rules, every, render
from tests.deploy.test_kubernetes_alerts import promtool
from tests.docs.markdown import anchors, code_blocks, section

ALERTS = REPO / "docker/prometheus/alerts.yml"
PROMETHEUSRULE = KUBERNETES / "base/prometheusrule.yaml"
RUNBOOK = REPO / "docs/operations/dashboards-and-alerts.md"
RUNBOOK_BASE = (
    "https://github.com/learnserve/learnserve/blob/main/docs/operations/dashboards-and-alerts.md"
)


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [r for g in groups for r in g["rules"]]


# ------------------------------------------------------------------ runbook_url


def test_every_alert_links_its_own_runbook_section() -> None:
    text = RUNBOOK.read_text()
    sections = re.findall(r"^### (\S+)$", section(text, "## Runbook"), flags=re.M)
    names = [r["alert"] for r in rules()]
    assert sorted(sections) == sorted(names), "one runbook section per alert, no other"
    page_anchors = anchors(RUNBOOK)
    for rule in rules():
        url = rule["annotations"].get("runbook_url")
        assert url, f"{rule['alert']} has no runbook_url"
        base, _, anchor = url.partition("#")
        assert base == RUNBOOK_BASE, f"{rule['alert']}: runbook_url {url!r}"
        assert anchor == rule["alert"].lower() and anchor in page_anchors, url


@pytest.mark.parametrize("path", [ALERTS, PROMETHEUSRULE], ids=lambda p: p.name)
def test_the_runbook_prefix_is_one_string_used_only_by_runbook_urls(path: Path) -> None:
    """Replacing that one string (the page's ``sed``) moves every link and nothing else."""
    code = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    using = [line.strip() for line in code if RUNBOOK_BASE in line]
    assert len(using) == len(rules())
    for line in using:
        assert re.fullmatch(rf'runbook_url: "{re.escape(RUNBOOK_BASE)}#[a-z0-9]+"', line), line


def test_the_page_replaces_that_prefix_in_both_rule_files() -> None:
    seds = [b.text for b in code_blocks(RUNBOOK) if b.lang == "bash" and "sed -i" in b.text]
    assert len(seds) == 1
    assert f"s|{RUNBOOK_BASE}|$base|" in seds[0]
    for path in (ALERTS, PROMETHEUSRULE):
        assert str(path.relative_to(REPO)) in seds[0]


def test_the_documented_overlay_points_every_runbook_url_elsewhere(tmp_path: Path) -> None:
    blocks = [b.text for b in code_blocks(RUNBOOK) if b.lang == "yaml" and "runbook" in b.text]
    assert len(blocks) == 1, "one Kubernetes overlay example on the page"
    example = yaml.safe_load(blocks[0])
    new_base = example["configMapGenerator"][0]["literals"][0].split("=", 1)[1]
    assert new_base != RUNBOOK_BASE
    overlay = tmp_path / "my-overlay"
    overlay.mkdir()
    redis = os.path.relpath(KUBERNETES / "overlays" / "redis", overlay)
    assert "- ../redis " in blocks[0]
    (overlay / "kustomization.yaml").write_text(blocks[0].replace("- ../redis ", f"- {redis} "))
    objs = render(overlay)
    rewritten = alert_rules(objs)
    assert [r["annotations"]["runbook_url"] for r in rewritten] == [
        f"{new_base}#{r['alert'].lower()}" for r in rules()
    ]
    # the value's ConfigMap is local: it is not applied to the cluster
    assert "learnserve-runbook" not in {o["metadata"]["name"] for o in every(objs, "ConfigMap")}
    # and nothing else changed
    for rule in rewritten:
        rule["annotations"]["runbook_url"] = rule["annotations"]["runbook_url"].replace(
            new_base, RUNBOOK_BASE
        )
    assert rewritten == alert_rules(render("redis"))


# ------------------------------------------------------------------ summaries

K8S = {
    "job": "learnserve",
    "namespace": "prod",
    "pod": "learnserve-0",
    "instance": "10.244.1.7:8000",  # the pod's address, as the ServiceMonitor scrapes it
}
COMPOSE = {"job": "learnserve", "instance": "172.18.0.5:8000"}
SHAPES = {"kubernetes": K8S, "compose": COMPOSE}
WHO = {"kubernetes": "learnserve-0", "compose": "172.18.0.5:8000"}
# What the aggregations keep of the target's labels.
PER_REPLICA = ("namespace", "pod", "instance")


def series(name: str, labels: dict[str, str], **extra: str) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in {**labels, **extra}.items())
    return f"{name}{{{body}}}"


def kept(labels: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k in names}


def case(alert: str, shape: str) -> dict[str, Any]:
    """Series firing ``alert`` for one replica shaped as ``shape`` scrapes it, when to look,
    and the alert's labels and texts."""
    t, who = SHAPES[shape], WHO[shape]
    if alert == "LearnserveTargetDown":
        where = {"kubernetes": "prod/learnserve-0 (10.244.1.7:8000)", "compose": who}[shape]
        return {
            "series": [(series("up", t), "0x10")],
            "at": "6m",
            "labels": {**t, "severity": "critical"},
            "summary": f"learnserve {who} does not answer /metrics",
            "description": f"Prometheus could not scrape {where} for 5 minutes.",
        }
    if alert == "LearnserveStoreDown":
        return {
            "series": [(series("learnserve_store_up", t, store="redis"), "0x10")],
            "at": "5m",
            "labels": {**t, "store": "redis", "severity": "critical"},
            "summary": f"learnserve {who} cannot reach its redis store",
        }
    if alert == "LearnserveEventLoopLag":
        name = "learnserve_event_loop_lag_seconds_bucket"
        return {
            "series": [
                (series(name, t, le=le), "0+0x30" if le == "0.1" else "0+5x30")
                for le in ("0.1", "1.0", "+Inf")
            ],
            "at": "25m",
            "labels": {**kept(t, *PER_REPLICA), "severity": "warning"},
            "summary": f"learnserve {who}: event loop stalls over 100 ms (p99)",
        }
    if alert == "LearnserveLogLag":
        return {
            "series": [(series("learnserve_log_lag_entries", t, model="m", pid="7"), "20000x20")],
            "at": "10m",
            "labels": {**kept(t, *PER_REPLICA), "model": "m", "severity": "warning"},
            "summary": f"learnserve {who} is 20000 log entries behind on m",
        }
    assert alert == "LearnserveMemoryNearLimit"
    rss = "learnserve_process_resident_memory_bytes"
    return {  # two workers at 1.0 + 0.9 GB of a 2 GB limit: 95%
        "series": [
            (series(rss, t, pid="7"), "1000000000x20"),
            (series(rss, t, pid="8"), "900000000x20"),
            (series("learnserve_memory_limit_bytes", t), "2000000000x20"),
        ],
        "at": "15m",
        "labels": {**kept(t, *PER_REPLICA), "severity": "warning"},
        "summary": f"learnserve {who} uses 95% of its memory limit",
    }


NAMING_A_REPLICA = [
    "LearnserveTargetDown",
    "LearnserveStoreDown",
    "LearnserveEventLoopLag",
    "LearnserveLogLag",
    "LearnserveMemoryNearLimit",
]


def test_the_alerts_naming_a_replica_are_all_covered() -> None:
    naming = [r["alert"] for r in rules() if "$labels.pod" in r["annotations"]["summary"]]
    assert sorted(naming) == sorted(NAMING_A_REPLICA)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("alert", NAMING_A_REPLICA)
def test_the_summary_names_the_pod_or_else_the_instance(
    alert: str, shape: str, tmp_path: Path
) -> None:
    tool = promtool()
    spec = case(alert, shape)
    rule = next(r for r in rules() if r["alert"] == alert)
    annotations = {
        "summary": spec["summary"],
        "description": spec.get("description", rule["annotations"]["description"]),
        "runbook_url": f"{RUNBOOK_BASE}#{alert.lower()}",
    }
    (tmp_path / "rules.yaml").write_text(ALERTS.read_text())
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in spec["series"]],
                "alert_rule_test": [
                    {
                        "eval_time": spec["at"],
                        "alertname": alert,
                        "exp_alerts": [
                            {"exp_labels": spec["labels"], "exp_annotations": annotations}
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "unit.yaml").write_text(yaml.safe_dump(unit, sort_keys=False))
    run = subprocess.run(
        [tool, "test", "rules", "unit.yaml"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
