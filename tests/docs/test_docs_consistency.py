"""The docs against the code and against themselves: links resolve, every metric, route,
CLI command and alert is documented, the README's deploy tables match the operations
pages, and no page assumes where the checkout lives."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from tests.docs.markdown import DOCS, REPO, anchors, links, pages, section


def test_relative_links_resolve() -> None:
    broken: list[str] = []
    for page in pages():
        for target in links(page):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(REPO)} -> {target}"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where}: no heading with that anchor")
    assert not broken, "\n".join(broken)


def test_every_page_under_docs_is_reachable_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [REPO / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for target in links(page):
            path_part = target.partition("#")[0]
            if path_part.endswith(".md") and not re.match(r"^[a-z]+:", target):
                dest = (page.parent / path_part).resolve()
                if dest.exists():
                    todo.append(dest)
    orphans = [str(p.relative_to(REPO)) for p in DOCS.rglob("*.md") if p not in seen]
    assert not orphans, f"pages no link leads to: {orphans}"


def test_no_page_assumes_where_the_checkout_lives() -> None:
    bad = []
    for page in pages():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if re.search(r"(^|[\s`(\"'])/(work|home|root|Users|tmp/lsplay)/", line):
                bad.append(f"{page.relative_to(REPO)}:{n}: {line.strip()[:80]}")
    assert not bad, "absolute paths of a particular machine:\n" + "\n".join(bad)


def test_readme_stays_a_front_page() -> None:
    n = len((REPO / "README.md").read_text().splitlines())
    assert n <= 220, f"README.md has {n} lines: move details to docs/"


# ------------------------------------------------------------------ against the code


def test_every_metric_is_documented() -> None:
    defined: set[str] = set()
    definition = re.compile(r"\b(?:Counter|Gauge|Histogram|Summary)\(\s*\"(learnserve_\w+)\"")
    for src in (REPO / "service").rglob("*.py"):
        defined |= set(definition.findall(src.read_text()))
    assert len(defined) > 20, "found too few metric definitions: has the code moved?"
    page = (DOCS / "reference" / "metrics.md").read_text()
    missing = sorted(m for m in defined if f"`{m}`" not in page)
    assert not missing, f"docs/reference/metrics.md lacks: {missing}"


def test_every_route_is_documented(tmp_path: Path) -> None:
    from service.app import create_app
    from service.settings import Settings

    app = create_app(Settings(data_dir=str(tmp_path)))
    page = (DOCS / "reference" / "http-api.md").read_text()
    missing = []
    for route in app.routes:
        methods = sorted(set(getattr(route, "methods", None) or []) - {"HEAD"})
        path = getattr(route, "path", "")
        if path == "/docs/oauth2-redirect":
            continue
        for method in methods:
            if f"`{method} {path}`" not in page:
                missing.append(f"{method} {path}")
    assert not missing, f"docs/reference/http-api.md lacks: {missing}"


def _cli_app() -> Any:
    for name in ("service.cli.main", "service.cli"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "app"):
            return module.app
    pytest.fail("no Typer `app` in service.cli.main or service.cli")


def test_every_cli_command_and_option_is_documented() -> None:
    import typer

    page = (DOCS / "reference" / "cli.md").read_text()
    missing: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
            return
        heading = f"### `{' '.join(path)}`"
        if heading not in page:
            missing.append(" ".join(path))
            return
        text = section(page, heading)
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and opt != "--help" and f"`{opt}`" not in text:
                    missing.append(f"{' '.join(path)} {opt}")

    walk(typer.main.get_command(_cli_app()), ["learnserve"])
    assert not missing, f"docs/reference/cli.md lacks: {missing}"


def test_every_alert_has_a_runbook_section() -> None:
    rules = (REPO / "docker" / "prometheus" / "alerts.yml").read_text()
    alerts = re.findall(r"^\s*-\s*alert:\s*(\w+)", rules, flags=re.M)
    assert len(alerts) >= 5
    page = (DOCS / "operations" / "dashboards-and-alerts.md").read_text()
    missing = [a for a in alerts if f"\n### {a}\n" not in page]
    assert not missing, f"no runbook section in dashboards-and-alerts.md for: {missing}"


def test_settings_named_in_the_docs_exist() -> None:
    from service.settings import Settings

    known = {f"LEARNSERVE_{n.upper()}" for n in Settings.model_fields} | {
        "LEARNSERVE_LOG_LEVEL",
        "LEARNSERVE_URL",
        "LEARNSERVE_TOKEN",
        "LEARNSERVE_API_KEY",
        "LEARNSERVE_SHARED_DATA",
        "LEARNSERVE_REDIS_SERVER",
    }
    bad = []
    for page in pages():
        # LEARNSERVE_CHECKPOINT_RETRY_* names a family: its prefix must start a setting
        for name, family in set(re.findall(r"(LEARNSERVE_[A-Z_]*[A-Z])(_\*)?", page.read_text())):
            ok = any(k.startswith(name + "_") for k in known) if family else name in known
            if not ok:
                bad.append(f"{page.relative_to(REPO)}: {name}{family}")
    assert not bad, "settings the code does not have:\n" + "\n".join(sorted(bad))


# ------------------------------------------------------------------ README vs docs


def _first_column(text: str, pattern: str) -> set[str]:
    return set(re.findall(pattern, text, flags=re.M))


def test_readme_deploy_tables_match_the_operations_pages() -> None:
    readme = (REPO / "README.md").read_text()
    compose = section(readme, "## Deploy with docker compose")
    ops = (DOCS / "operations" / "compose.md").read_text()
    row = r"^\| `([a-z0-9_-]+)` \|"
    assert _first_column(compose, row) == _first_column(ops, row)
    k8s = section(readme, "## Deploy on Kubernetes")
    ops = (DOCS / "operations" / "kubernetes.md").read_text()
    overlay = r"^\| `overlays/([a-z-]+)` \|"
    assert _first_column(k8s, overlay) == _first_column(ops, overlay)
    kind = r"^\| ([A-Z][A-Za-z]+)\b"
    assert _first_column(k8s, kind) == _first_column(ops, kind)
