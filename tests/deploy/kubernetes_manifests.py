"""Helpers for the Kubernetes tests: render the Kustomize overlays, pick objects, read PromQL.

Everything offline: ``kubectl kustomize`` renders without a cluster, and the metric names
the service exports are read from the source of service/observability/metrics.py.
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import REPO

KUBERNETES = REPO / "deploy" / "kubernetes"
OVERLAYS = ("redis", "redis-cluster", "sharded")
POD_LABELS_KEY = ("spec", "template", "metadata", "labels")

Obj = dict[str, Any]


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed (it renders the Kustomize overlays offline)")
    return found


@functools.cache
def _render(directory: str) -> tuple[Obj, ...]:
    run = subprocess.run(
        [kubectl(), "kustomize", directory], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"kubectl kustomize {directory} failed:\n{run.stderr}"
    return tuple(d for d in yaml.safe_load_all(run.stdout) if d)


def render(overlay: str | Path) -> list[Obj]:
    """The objects of one overlay (a name under overlays/, or a directory), as
    `kubectl apply -k` would send them (fresh copies)."""
    directory = overlay if isinstance(overlay, Path) else KUBERNETES / "overlays" / overlay
    objs = _render(str(directory))
    return [yaml.safe_load(yaml.safe_dump(o)) for o in objs]


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def every(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def pod_spec(workload: Obj) -> Obj:
    spec: Obj = workload["spec"]["template"]["spec"]
    return spec


def pod_labels(workload: Obj) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def container(workload: Obj, name: str = "learnserve") -> Obj:
    found = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    assert len(found) == 1, f"no container {name!r}"
    return found[0]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def settings_env(objs: list[Obj]) -> dict[str, str]:
    """What the learnserve container sees: the ConfigMap it loads, then its own `env`,
    with `$(VAR)` references expanded the way the kubelet does, Secrets and the
    downward API replaced by placeholders."""
    workload = one(objs, "StatefulSet", "learnserve")
    c = container(workload)
    env: dict[str, str] = {}
    for source in c.get("envFrom", []):
        cm = one(objs, "ConfigMap", source["configMapRef"]["name"])
        env.update(cm["data"])
    for item in c.get("env", []):
        if "value" in item:
            env[item["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), item["value"]
            )
        elif "secretKeyRef" in item["valueFrom"]:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = f"<secret {ref['name']}/{ref['key']}>"
        elif "fieldRef" in item["valueFrom"]:
            env[item["name"]] = f"<field {item['valueFrom']['fieldRef']['fieldPath']}>"
    return env


# ------------------------------------------------------------------ metric names


@functools.cache
def exported_metrics() -> dict[str, frozenset[str]]:
    """Series name -> label names, for every metric service/observability/metrics.py defines.

    Read from the source (the first argument and label list of each Counter, Gauge and
    Histogram call), with the suffixes prometheus_client exposes for each type."""
    tree = ast.parse((REPO / "service" / "observability" / "metrics.py").read_text())
    out: dict[str, frozenset[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        kind = node.func.id
        if kind not in ("Counter", "Gauge", "Histogram") or not node.args:
            continue
        name = ast.literal_eval(node.args[0])
        labels = frozenset(ast.literal_eval(node.args[2])) if len(node.args) > 2 else frozenset()
        if kind == "Counter":
            base = name.removesuffix("_total")
            series = [f"{base}_total", f"{base}_created"]
        elif kind == "Histogram":
            out[f"{name}_bucket"] = labels | {"le"}
            series = [f"{name}_{s}" for s in ("sum", "count", "created")]
        else:
            series = [name]
        for s in series:
            out[s] = labels
    return out


_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "inf", "nan"}
)


def promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects: identifiers that are neither functions,
    aggregations, keywords, label names nor durations."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # range and subquery durations
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", s):
        if s[m.end() :].lstrip().startswith("(") or m.group().lower() in _KEYWORDS:
            continue
        names.add(m.group())
    return names


def promql_label_matchers(expr: str) -> dict[str, set[str]]:
    """Metric name -> label names its `{...}` selector matches on."""
    out: dict[str, set[str]] = {}
    for m in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}", expr):
        labels = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2))
        out.setdefault(m.group(1), set()).update(labels)
    return out


def alert_rules(objs: list[Obj]) -> list[Obj]:
    rule = one(objs, "PrometheusRule", "learnserve")
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def dockerfile_env(name: str) -> str:
    """A variable the image's final stage sets (docker/Dockerfile), e.g. NUMBA_CACHE_DIR."""
    text = (REPO / "docker" / "Dockerfile").read_text()
    found = re.findall(rf"\b{name}=(\S+)", text)
    assert found, f"docker/Dockerfile sets no {name}"
    return str(found[-1])


def repo_file(*parts: str) -> Path:
    return KUBERNETES.joinpath(*parts)
