"""docker-compose.yml, the Dockerfile and the configs they mount, checked without a Docker engine.

``docker-compose config`` (Debian's docker-compose, or the ``docker compose`` v2 plugin)
validates and resolves the compose file offline; the Dockerfile is parsed here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import REPO

COMPOSE = REPO / "docker-compose.yml"


def compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return [docker, "compose"]
    return None


def compose_config(*extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = compose_command()
    if cmd is None:
        pytest.skip(
            "neither docker-compose nor `docker compose` is installed "
            "(make system-deps installs Debian's docker-compose, which needs no engine)"
        )
    # Only the variables under test: the developer's own .env/environment must not leak in.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LEARNSERVE_", "APP_"))}
    run = subprocess.run(
        [*cmd, "-f", str(COMPOSE), "--project-directory", str(REPO), *extra, "config"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
        cwd=REPO,
    )
    assert run.returncode == 0, f"compose config failed:\n{run.stderr}"
    config: dict[str, Any] = yaml.safe_load(run.stdout)
    return config


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # An empty env file: every ${VAR:-default} falls back to its default.
    empty = tmp_path_factory.mktemp("env") / "empty.env"
    empty.write_text("")
    return compose_config("--env-file", str(empty))


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):  # KEY=VALUE form
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def published(service: dict[str, Any]) -> dict[int, str]:
    """container port -> published host port(s), whatever syntax compose printed."""
    out: dict[int, str] = {}
    for p in service.get("ports", []):
        if isinstance(p, dict):
            out[int(p["target"])] = str(p.get("published", ""))
        else:
            host, _, target = str(p).rpartition(":")
            out[int(target)] = host
    return out


def test_compose_file_is_valid_and_has_the_services(resolved: dict[str, Any]) -> None:
    assert {"redis", "app", "prometheus", "grafana"} <= set(resolved["services"])


def test_readme_names_only_services_that_exist(resolved: dict[str, Any]) -> None:
    readme = (REPO / "README.md").read_text()
    assert "## Deploy with docker compose" in readme, "README lacks the deployment section"
    section = readme.split("## Deploy with docker compose", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_-]+)` \|(.*)$", section, flags=re.M)
    named = {name for name, _ in rows}
    assert named == set(resolved["services"]), "README's service table and compose differ"
    for name, rest in rows:  # every address the README gives is the one compose publishes
        for port in re.findall(r"http://localhost:(\d+)", rest):
            assert port in published(resolved["services"][name]).values(), (name, port)
    assert "docker compose up -d" in section


def test_redis_is_durable_and_health_checked(resolved: dict[str, Any]) -> None:
    redis = resolved["services"]["redis"]
    assert redis["image"].startswith("redis:7")
    command = redis["command"]
    command = shlex.split(command) if isinstance(command, str) else command
    joined = " ".join(command)
    assert "--appendonly yes" in joined and "--appendfsync everysec" in joined
    mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in redis["volumes"]]
    assert any(m.startswith("redis-data:") and m.split(":")[1] == "/data" for m in mounts)
    assert "redis-data" in resolved["volumes"]
    assert "redis-cli" in " ".join(redis["healthcheck"]["test"])
    assert "ping" in " ".join(redis["healthcheck"]["test"])


def test_app_uses_redis_and_env_defaults(resolved: dict[str, Any]) -> None:
    app = resolved["services"]["app"]
    assert Path(app["build"]["context"]).resolve() == REPO
    assert app["build"]["dockerfile"] == "docker/Dockerfile"
    env = environment(app)
    assert env["LEARNSERVE_REDIS_URL"] == "redis://redis:6379/0"
    assert env["LEARNSERVE_WORKERS"] == "2"
    assert env["LEARNSERVE_API_KEYS"] == ""
    assert env["LEARNSERVE_HOST"] == "0.0.0.0"
    assert app["depends_on"]["redis"]["condition"] == "service_healthy"
    assert published(app)[8000] == "8000"


def test_env_file_sets_workers_and_keys(tmp_path: Path) -> None:
    # .env.example is the documented starting point; it must resolve as is...
    example = compose_config("--env-file", str(REPO / ".env.example"))
    assert environment(example["services"]["app"])["LEARNSERVE_WORKERS"] == "2"
    # ...and what a user writes into .env reaches the container.
    env_file = tmp_path / "prod.env"
    env_file.write_text("LEARNSERVE_WORKERS=4\nLEARNSERVE_API_KEYS=k1=predict,k2=admin\n")
    custom = compose_config("--env-file", str(env_file))
    env = environment(custom["services"]["app"])
    assert env["LEARNSERVE_WORKERS"] == "4"
    assert env["LEARNSERVE_API_KEYS"] == "k1=predict,k2=admin"
    from service.settings import parse_api_keys  # the service accepts what compose passes

    assert parse_api_keys(env["LEARNSERVE_API_KEYS"]) == {"k1": ["predict"], "k2": ["admin"]}


def test_every_bind_mount_exists_in_the_repository(resolved: dict[str, Any]) -> None:
    seen = 0
    for name, service in resolved["services"].items():
        for v in service.get("volumes", []):
            source = v["source"] if isinstance(v, dict) else v.split(":")[0]
            if source.startswith(("/", ".")):
                assert Path(source).exists(), f"{name} mounts missing {source}"
                seen += 1
    assert seen >= 4  # prometheus.yml, grafana provisioning + dashboards, nginx.conf


def test_prometheus_scrapes_app_metrics_every_5s() -> None:
    config = yaml.safe_load((REPO / "docker/prometheus/prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "learnserve")
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert job.get("scrape_interval", config["global"]["scrape_interval"]) == "5s"
    sd = job["dns_sd_configs"]  # every replica of the `app` service, on port 8000
    assert sd == [{"names": ["app"], "type": "A", "port": 8000, "refresh_interval": "5s"}]
    promtool = shutil.which("promtool")
    if promtool:  # comes with Debian's prometheus package
        check = subprocess.run(
            [promtool, "check", "config", str(REPO / "docker/prometheus/prometheus.yml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, check.stdout + check.stderr


def test_grafana_is_provisioned_and_anonymous_read_only(resolved: dict[str, Any]) -> None:
    grafana = resolved["services"]["grafana"]
    env = environment(grafana)
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert published(grafana)[3000] == "3000"
    assert published(resolved["services"]["prometheus"])[9090] == "9090"
    mounts = {
        v["target"]: Path(v["source"]) for v in grafana["volumes"] if isinstance(v, dict)
    } or {v.split(":")[1]: Path(v.split(":")[0]) for v in grafana["volumes"]}
    prov = REPO / "docker/grafana/provisioning"
    assert mounts["/etc/grafana/provisioning"].resolve() == prov
    ds = yaml.safe_load((prov / "datasources/prometheus.yml").read_text())["datasources"][0]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((prov / "dashboards/learnserve.yml").read_text())["providers"][0]
    dash_dir = provider["options"]["path"]
    assert mounts[dash_dir].resolve() == REPO / "docker/grafana/dashboards"
    for path in (REPO / "docker/grafana/dashboards").glob("*.json"):  # they use this datasource
        assert ds["uid"] in json.dumps(json.loads(path.read_text())["panels"])


def test_load_balancer_profile_targets_app(resolved: dict[str, Any]) -> None:
    lb = resolved["services"]["lb"]
    assert lb["profiles"] == ["scale"]
    conf = (REPO / "docker/nginx/nginx.conf").read_text()
    assert "listen 8080;" in conf and "server app:8000 resolve;" in conf
    assert "hash $route_key consistent;" in conf and "proxy_pass http://app;" in conf
    assert published(lb)[8080] == "8080"


# ------------------------------------------------------------------ Dockerfile


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical, buf = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1].rstrip() + " "
            continue
        logical.append(buf + stripped)
        buf = ""
    out = []
    for entry in logical:
        word, _, rest = entry.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions((REPO / "docker/Dockerfile").read_text())


def test_dockerfile_parser_joins_continuations() -> None:
    parsed = dockerfile_instructions("# c\nFROM a AS b\nRUN x \\\n    && y\n\nUSER u\n")
    assert parsed == [("FROM", "a AS b"), ("RUN", "x && y"), ("USER", "u")]


def test_dockerfile_is_multi_stage_slim_311(dockerfile: list[tuple[str, str]]) -> None:
    args = dict(a.split("=", 1) for i, a in dockerfile if i == "ARG" and "=" in a)
    image = args.get("PYTHON_IMAGE", "")
    froms = [a.replace("${PYTHON_IMAGE}", image) for i, a in dockerfile if i == "FROM"]
    assert len(froms) >= 2
    assert all(f.split()[0] == "python:3.11-slim" for f in froms)
    build_stage = froms[0].split()[-1]
    assert any(i == "COPY" and f"--from={build_stage}" in a for i, a in dockerfile)


def final_stage(dockerfile: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(n for n, (i, _) in enumerate(dockerfile) if i == "FROM")
    return dockerfile[last_from:]


def test_dockerfile_installs_project_without_test_extra(dockerfile: list[tuple[str, str]]) -> None:
    runs = " ".join(a for i, a in dockerfile if i == "RUN")
    assert re.search(r"pip install \.(\s|$)", runs), runs
    assert "[test]" not in runs and "-e " not in runs
    copied = " ".join(a for i, a in dockerfile if i == "COPY")
    for needed in ("pyproject.toml", "README.md", "learners", "service"):
        assert needed in copied


def test_dockerfile_runs_as_non_root(dockerfile: list[tuple[str, str]]) -> None:
    users = [a for i, a in final_stage(dockerfile) if i == "USER"]
    assert users, "no USER in the final stage"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_dockerfile_numba_cache_is_writable(dockerfile: list[tuple[str, str]]) -> None:
    stage = final_stage(dockerfile)
    env = " ".join(a for i, a in stage if i == "ENV")
    found = re.search(r"NUMBA_CACHE_DIR=(\S+)", env)
    assert found, "NUMBA_CACHE_DIR not set in the final stage"
    cache = found.group(1)
    user = [a for i, a in stage if i == "USER"][-1].split(":")[0]
    runs = " ".join(a for i, a in stage if i == "RUN")
    # created and handed to the service user (a parent chown -R counts)
    assert "mkdir -p" in runs and cache in runs
    chown = re.search(rf"chown -R {user}(:\S+)? ([^&]+)", runs)
    assert chown and any(cache.startswith(p) for p in chown.group(2).split()), runs


def test_dockerfile_compiles_kernels_into_the_cache_as_the_service_user(
    dockerfile: list[tuple[str, str]],
) -> None:
    """The numba warm-up runs at build time, after USER (so the cache files belong to the
    user who reads them) and with NUMBA_CACHE_DIR set (so they land in the volume path)."""
    stage = final_stage(dockerfile)
    kinds = [i for i, _ in stage]
    warm = [n for n, (i, a) in enumerate(stage) if i == "RUN" and "learnserve warmup" in a]
    assert warm, "no build-time warm-up of the numba kernels"
    assert kinds.index("USER") < warm[0]
    assert any(i == "ENV" and "NUMBA_CACHE_DIR=" in a for i, a in stage[: warm[0]])
    # the command exists and compiles the online kinds
    import typer.main

    from service.cli.main import app
    from service.models.warmup import families

    assert "warmup" in typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert {f.name for f in families()} >= {"json", "json-maps", "payload", "linear", "ranksvm"}


def test_dockerfile_healthcheck_and_command(dockerfile: list[tuple[str, str]]) -> None:
    stage = final_stage(dockerfile)
    health = [a for i, a in stage if i == "HEALTHCHECK"]
    assert len(health) == 1 and "/healthz" in health[0]
    assert "curl" not in health[0] and "urllib" in health[0]
    cmd = [a for i, a in stage if i in ("CMD", "ENTRYPOINT")][-1]
    assert json.loads(cmd)[:4] == ["learnserve", "serve", "--host", "0.0.0.0"]
    assert ("EXPOSE", "8000") in stage


def test_healthcheck_probe_runs_against_the_service(tmp_path: Path) -> None:
    """The HEALTHCHECK's python -c, run for real against a live service (non-zero when down)."""
    import sys

    from tests.deploy.conftest import running_service
    from tests.service.procs import free_port

    dockerfile = dockerfile_instructions((REPO / "docker/Dockerfile").read_text())
    health = next(a for i, a in dockerfile if i == "HEALTHCHECK")
    probe = json.loads(health[health.index("CMD") + 3 :].strip())
    assert probe[:2] == ["python", "-c"]
    down = subprocess.run(
        [sys.executable, "-c", probe[2]], env={"LEARNSERVE_PORT": str(free_port())}, timeout=30
    )
    assert down.returncode != 0
    logs: list[Path] = []
    with running_service(tmp_path / "data", logs=logs) as url:
        port = url.rsplit(":", 1)[1]
        up = subprocess.run(
            [sys.executable, "-c", probe[2]], env={"LEARNSERVE_PORT": port}, timeout=30
        )
    assert up.returncode == 0, logs[0].read_text(errors="replace")[-4000:]


def test_dockerignore_keeps_context_small() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", "tests", "data", ".env"} <= ignored
    assert not ignored & {"learners", "service", "pyproject.toml", "README.md"}


def test_image_build_context_installs_every_module(tmp_path: Path) -> None:
    """What the build stage does, natively: `pip install .` from only the files it COPYs
    must package every module of learners/ and service/ and the `learnserve` command."""
    import sys
    import zipfile

    build = dockerfile_instructions((REPO / "docker/Dockerfile").read_text())
    froms = [n for n, (i, _) in enumerate(build) if i == "FROM"]
    build = build[froms[0] : froms[1]]  # the build stage only
    context = tmp_path / "context"
    context.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for instr, arg in build:
        if instr != "COPY":
            continue
        *sources, _dest = arg.split()
        for src in sources:
            path = REPO / src
            if path.is_dir():
                shutil.copytree(path, context / src, ignore=ignore)
            else:
                shutil.copy(path, context / src)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "out"), "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (wheel,) = (tmp_path / "out").glob("learnserve-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("learners", "service"):
        for module in (REPO / package).rglob("*.py"):
            rel = module.relative_to(REPO).as_posix()
            assert rel in names, f"{rel} is not in the image's install"
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry).decode()
    assert "learnserve = service.cli.main:main" in text


def test_cluster_profile_is_3_masters_3_replicas_and_the_app_can_use_it(
    resolved: dict[str, Any],
) -> None:
    services = resolved["services"]
    nodes = [f"redis-cluster-{i}" for i in range(6)]
    for name in nodes:
        node = services[name]
        assert node["profiles"] == ["cluster"] and node["image"].startswith("redis:")
        cmd = node["command"]
        for flag, value in (("--cluster-enabled", "yes"), ("--appendonly", "yes"),
                            ("--cluster-announce-hostname", name)):  # fmt: skip
            assert cmd[cmd.index(flag) + 1] == value
        mounts = [
            v["target"] if isinstance(v, dict) else str(v).split(":")[1] for v in node["volumes"]
        ]
        assert mounts == ["/data"]  # AOF + nodes.conf on the node's own volume
    init = services["redis-cluster-init"]
    script = " ".join(init["command"])
    assert "--cluster create" in script and "--cluster-replicas 1" in script
    assert "for i in 0 1 2 3 4 5" in script  # every node joins
    assert set(init["depends_on"]) == set(nodes)
    # The script is valid sh (compose's $$ is a literal $).
    if shutil.which("sh"):
        check = subprocess.run(["sh", "-n", "-c", script.replace("$$", "$")], capture_output=True)
        assert check.returncode == 0, check.stderr
    # The single Redis stays the default.
    assert environment(services["app"])["LEARNSERVE_REDIS_CLUSTER"] == "false"
    assert environment(services["app"])["LEARNSERVE_REDIS_URL"] == "redis://redis:6379/0"


def test_app_switches_to_the_cluster_with_the_env_file(tmp_path: Path) -> None:
    env = tmp_path / "cluster.env"
    env.write_text(
        "LEARNSERVE_REDIS_URL=redis://redis-cluster-0:6379\n"
        "LEARNSERVE_REDIS_CLUSTER=true\nLEARNSERVE_REDIS_WAIT_REPLICAS=1\n"
    )
    app = compose_config("--env-file", str(env), "--profile", "cluster")["services"]["app"]
    got = environment(app)
    assert got["LEARNSERVE_REDIS_CLUSTER"] == "true"
    assert got["LEARNSERVE_REDIS_URL"] == "redis://redis-cluster-0:6379"
    assert got["LEARNSERVE_REDIS_WAIT_REPLICAS"] == "1"
