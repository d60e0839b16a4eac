"""deploy/kubernetes: every Kustomize overlay rendered, validated offline and wired up.

Rendering is ``kubectl kustomize`` (no cluster); built-in kinds are checked against the
Kubernetes OpenAPI schemas shipped by the ``kubernetes-validate`` package (strict: an
unknown field is an error), the Prometheus Operator kinds against the CRD models of
``cloudcoil-models-prometheus-operator``. The wiring (selectors, ports, probes, settings)
is asserted on the rendered objects. The alert rules: test_kubernetes_alerts.py.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import REPO
from tests.deploy.kubernetes_manifests import (
    KUBERNETES,
    OVERLAYS,
    Obj,
    alert_rules,
    container,
    dockerfile_env,
    every,
    one,
    pod_labels,
    pod_spec,
    render,
    selects,
    settings_env,
)

# The oldest Kubernetes the manifests target (PodDisruptionBudget's
# unhealthyPodEvictionPolicy is on by default from 1.27) and the newest schemas shipped.
OLDEST_KUBERNETES = "1.29.0"
CRD_KINDS = ("ServiceMonitor", "PrometheusRule")
# Settings read by code being written in other branches (service/settings.py has
# extra="ignore", so today they are accepted and unused).
FUTURE_SETTINGS = {
    "LEARNSERVE_REDIS_CLUSTER",
    "LEARNSERVE_OWNERSHIP",
    "LEARNSERVE_REPLICAS_PER_MODEL",
    "LEARNSERVE_MEMBER_ID",
}


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def objs(overlay: str) -> list[Obj]:
    return render(overlay)


# ------------------------------------------------------------------ schemas


def kubernetes_versions() -> tuple[str, ...]:
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    return (OLDEST_KUBERNETES, kv.latest_version())


def validate_builtin(obj: Obj, version: str) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(obj, version, strict=True)


def validate_crd(obj: Obj) -> None:
    """Validate against the CRD model; the round trip finds fields the model dropped
    (pydantic ignores unknown keys, the API server's structural schema prunes them)."""
    models = pytest.importorskip(
        "cloudcoil.models.prometheus_operator.v1",
        reason="pip install cloudcoil-models-prometheus-operator",
    )
    model = getattr(models, obj["kind"]).model_validate(obj)
    back = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert back == obj, f"{obj['kind']}: fields unknown to the CRD: {diff(obj, back)}"


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}" for k in a.keys() - b.keys()]
        return out + [p for k in a.keys() & b.keys() for p in diff(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def test_every_object_is_valid_for_its_schema(objs: list[Obj]) -> None:
    kinds = {o["kind"] for o in objs}
    assert {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"} <= kinds
    assert {"HorizontalPodAutoscaler", *CRD_KINDS} <= kinds
    for obj in objs:
        if obj["kind"] in CRD_KINDS:
            validate_crd(obj)
            continue
        for version in kubernetes_versions():
            validate_builtin(obj, version)


def test_the_validators_reject_a_broken_object() -> None:
    """Guards the test above against passing vacuously."""
    versions = kubernetes_versions()
    import kubernetes_validate

    objs = render("redis")
    workload = copy.deepcopy(one(objs, "StatefulSet", "learnserve"))
    container(workload)["livenesProbe"] = container(workload).pop("livenessProbe")  # typo
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        validate_builtin(workload, versions[-1])
    monitor = copy.deepcopy(one(objs, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["prot"] = monitor["spec"]["endpoints"][0].pop("port")
    with pytest.raises(AssertionError, match=r"endpoints\[0\]\.prot"):
        validate_crd(monitor)


def test_no_secret_is_rendered_and_api_keys_come_from_one(objs: list[Obj]) -> None:
    assert every(objs, "Secret") == []
    env = {e["name"]: e for e in container(one(objs, "StatefulSet")).get("env", [])}
    ref = env["LEARNSERVE_API_KEYS"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "learnserve-api-keys", "key": "api-keys"}
    # a ConfigMap is readable by anyone with `get configmaps`: no keys or passwords there
    for cm in every(objs, "ConfigMap"):
        assert not {"LEARNSERVE_API_KEYS", "LEARNSERVE_REDIS_URL"} & cm["data"].keys()


# ------------------------------------------------------------------ wiring


def test_services_select_the_pods_and_name_their_port(objs: list[Obj]) -> None:
    workload = one(objs, "StatefulSet", "learnserve")
    labels = pod_labels(workload)
    assert selects(workload["spec"]["selector"]["matchLabels"], labels)
    ports = {p["name"]: p["containerPort"] for p in container(workload)["ports"]}
    for svc in every(objs, "Service"):
        assert svc["spec"]["selector"] and selects(svc["spec"]["selector"], labels), svc
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in ports, f"{svc['metadata']['name']}: {port}"
    client = one(objs, "Service", "learnserve")
    assert client["spec"].get("type", "ClusterIP") == "ClusterIP"
    peers = one(objs, "Service", workload["spec"]["serviceName"])
    assert peers["spec"]["clusterIP"] == "None"


def test_service_monitor_scrapes_each_pod_once_by_port_name(objs: list[Obj]) -> None:
    monitor = one(objs, "ServiceMonitor", "learnserve")
    chosen = [
        s
        for s in every(objs, "Service")
        if selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
    ]
    # two Services over the same pods would scrape (and count) every pod twice
    assert [s["metadata"]["name"] for s in chosen] == ["learnserve-peers"]
    # pods that are not ready (e.g. restoring while Redis is down) are scraped too
    assert chosen[0]["spec"]["publishNotReadyAddresses"] is True
    names = {p["name"] for p in chosen[0]["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in names
        assert endpoint["path"] == "/metrics"
    # the job label the alert rules select on (up{job="learnserve"})
    job = chosen[0]["metadata"]["labels"][monitor["spec"]["jobLabel"]]
    assert job == "learnserve"
    assert any('up{job="learnserve"}' in r["expr"] for r in alert_rules(objs))


def test_probes_hit_the_health_routes_on_the_served_port(objs: list[Obj]) -> None:
    c = container(one(objs, "StatefulSet", "learnserve"))
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    paths = {
        probe: (c[probe]["httpGet"]["path"], c[probe]["httpGet"]["port"])
        for probe in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert paths["startupProbe"][0] == "/healthz"
    assert paths["livenessProbe"][0] == "/healthz"
    assert paths["readinessProbe"][0] == "/readyz"
    env = settings_env(objs)
    for _, port in paths.values():
        assert ports[port] == int(env["LEARNSERVE_PORT"])
    assert env["LEARNSERVE_HOST"] == "0.0.0.0"  # reachable by the kubelet and the Services
    # the first start may compile kernels: minutes of grace before liveness counts
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 180


def test_disruption_budget_and_autoscaler_target_the_workload(objs: list[Obj]) -> None:
    workload = one(objs, "StatefulSet", "learnserve")
    pdb = one(objs, "PodDisruptionBudget")
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels(workload))
    hpa = one(objs, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        workload["apiVersion"],
        workload["kind"],
        workload["metadata"]["name"],
    )
    assert "replicas" not in workload["spec"], "the autoscaler owns the replica count"
    # a drain may take maxUnavailable pods: at least one keeps serving at minReplicas
    assert hpa["spec"]["minReplicas"] > pdb["spec"]["maxUnavailable"]
    cpu = [m for m in hpa["spec"]["metrics"] if m["resource"]["name"] == "cpu"]
    assert cpu and "cpu" in container(workload)["resources"]["requests"]


def test_pods_are_locked_down_and_write_only_to_their_volumes(objs: list[Obj]) -> None:
    workload = one(objs, "StatefulSet", "learnserve")
    spec = pod_spec(workload)
    assert spec["securityContext"]["runAsNonRoot"] is True
    # the image's user (docker/Dockerfile's useradd --uid)
    assert spec["securityContext"]["runAsUser"] == 10001
    assert spec["automountServiceAccountToken"] is False
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
    empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    mounts = {m["mountPath"]: m["name"] for m in container(workload)["volumeMounts"]}
    numba_cache = dockerfile_env("NUMBA_CACHE_DIR")
    assert mounts.get(numba_cache) in empty_dirs and mounts.get("/tmp") in empty_dirs
    # the kernels compiled into the image are copied onto that volume before start
    (init,) = spec["initContainers"]
    assert init["image"] == container(workload)["image"]
    assert init["command"][:2] == ["cp", "-a"] and init["command"][2].startswith(numba_cache)
    init_mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert init["command"][3].rstrip("/") == init_mounts[mounts[numba_cache]]


def test_memory_is_requested_as_much_as_its_limit(objs: list[Obj]) -> None:
    resources = container(one(objs, "StatefulSet", "learnserve"))["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    env = settings_env(objs)
    limit_gib = int(resources["limits"]["memory"].removesuffix("Gi"))
    assert int(env["LEARNSERVE_MAX_MODEL_BYTES"]) < limit_gib << 30


def test_pods_spread_over_nodes_and_zones(objs: list[Obj]) -> None:
    workload = one(objs, "StatefulSet", "learnserve")
    constraints = pod_spec(workload)["topologySpreadConstraints"]
    keys = {c["topologyKey"] for c in constraints}
    assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for c in constraints:
        assert selects(c["labelSelector"]["matchLabels"], pod_labels(workload))


# ------------------------------------------------------------------ settings per overlay


EXPECTED: dict[str, dict[str, Any]] = {
    "redis": {"host": "redis-master:6379/", "password_secret": "redis", "extra": {}},
    "redis-cluster": {
        "host": "redis-cluster:6379/",
        "password_secret": "redis-cluster",
        "extra": {"LEARNSERVE_REDIS_CLUSTER": "true"},
    },
    "sharded": {
        "host": "redis-master:6379/",
        "password_secret": "redis",
        "extra": {"LEARNSERVE_OWNERSHIP": "sharded", "LEARNSERVE_REPLICAS_PER_MODEL": "2"},
    },
}


def test_each_overlay_sets_its_store_and_mode(overlay: str, objs: list[Obj]) -> None:
    want = EXPECTED[overlay]
    env = settings_env(objs)
    url = env["LEARNSERVE_REDIS_URL"]
    # $(REDIS_PASSWORD) expanded: it is defined before the URL that uses it
    assert url == f"redis://:<secret {want['password_secret']}/redis-password>@{want['host']}0"
    for key, value in want["extra"].items():
        assert env[key] == value
    others = {k for o in EXPECTED.values() for k in o["extra"]} - want["extra"].keys()
    assert not others & env.keys(), "a setting of another overlay leaked in"
    assert env["LEARNSERVE_MEMBER_ID"] == "<field metadata.name>"
    assert env["LEARNSERVE_ENVIRONMENT"] == "production"


def test_sharded_keeps_a_copy_of_every_model_through_a_disruption() -> None:
    objs = render("sharded")
    copies = int(settings_env(objs)["LEARNSERVE_REPLICAS_PER_MODEL"])
    hpa = one(objs, "HorizontalPodAutoscaler")
    pdb = one(objs, "PodDisruptionBudget")
    assert hpa["spec"]["minReplicas"] - pdb["spec"]["maxUnavailable"] >= copies


def test_sharded_component_composes_with_the_cluster_overlay(tmp_path: Path) -> None:
    """components/sharded on overlays/redis-cluster, as README says: both sets of settings."""
    relative = {
        key: os.path.relpath(KUBERNETES / sub, tmp_path)
        for key, sub in (
            ("resources", "overlays/redis-cluster"),
            ("components", "components/sharded"),
        )
    }
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{relative['resources']}]\ncomponents: [{relative['components']}]\n"
    )
    objs = render(tmp_path)
    env = settings_env(objs)
    assert env["LEARNSERVE_REDIS_CLUSTER"] == "true"
    assert env["LEARNSERVE_OWNERSHIP"] == "sharded"
    assert "@redis-cluster:6379/" in env["LEARNSERVE_REDIS_URL"]
    assert one(objs, "HorizontalPodAutoscaler")["spec"]["minReplicas"] == 3
    for obj in objs:
        if obj["kind"] not in CRD_KINDS:
            validate_builtin(obj, kubernetes_versions()[-1])


def test_settings_are_accepted_by_the_service(
    objs: list[Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container's environment builds service.settings.Settings (types and ranges),
    and names only settings that exist (or the documented ones being added)."""
    from service.settings import Settings

    env = settings_env(objs)
    learnserve = {k: v for k, v in env.items() if k.startswith("LEARNSERVE_")}
    fields = {f"LEARNSERVE_{name.upper()}" for name in Settings.model_fields}
    assert learnserve.keys() - fields <= FUTURE_SETTINGS
    for key in [k for k in os.environ if k.startswith("LEARNSERVE_")]:
        monkeypatch.delenv(key)
    for key, value in learnserve.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LEARNSERVE_API_KEYS", "ops=predict+update+admin")
    settings = Settings()
    assert settings.redis_url == env["LEARNSERVE_REDIS_URL"]
    assert settings.port == int(env["LEARNSERVE_PORT"]) and settings.workers >= 1


def test_readme_lists_every_overlay_and_object() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Deploy on Kubernetes", 1)[1].split("\n## ", 1)[0]
    on_disk = {p.name for p in (KUBERNETES / "overlays").iterdir() if p.is_dir()}
    assert set(OVERLAYS) == on_disk
    assert set(re.findall(r"^\| `overlays/([a-z-]+)` \|", section, flags=re.M)) == on_disk
    assert "kubectl apply -k deploy/kubernetes/overlays/redis" in section
    kinds = {o["kind"] for o in render("redis")}
    described = set(re.findall(r"^\| ([A-Za-z]+)\b", section, flags=re.M))
    assert kinds <= described, f"objects the README does not describe: {kinds - described}"
