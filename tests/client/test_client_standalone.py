"""``service.client`` runs where only httpx and orjson are installed: no FastAPI,
Starlette, pydantic, uvicorn, numba, numpy, redis, nor any part of the server
(``service.*`` outside ``service.client``, ``learners``).

The check runs in a fresh interpreter (``python -I -S``: no site-packages, no
PYTHONPATH) whose ``sys.path`` holds only the standard library, a copy of
``service/__init__.py`` and ``service/client/``, and a directory of links to the
installed httpx and orjson and their own dependencies (found from their metadata:
httpcore, h11, anyio, idna, certifi, ...). It imports the client, builds a ``Client``
and an ``AsyncClient``, and sends requests through httpx's ``MockTransport``. An
``import numpy`` (or of anything else not installed there) in the client fails it;
a test below proves that with a copy of the client that imports numpy. A static
check adds the imports inside functions, which the run may not reach.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "service" / "client"

# What the client may need, with its dependencies found from the installed metadata.
ROOTS = ("httpx", "orjson")
# Never in the client's closure nor loaded by it: the server's stack, and the
# first-party packages of the server side.
FORBIDDEN = (
    "fastapi", "starlette", "pydantic", "pydantic_settings", "uvicorn", "numba", "numpy",
    "redis", "prometheus_client", "typer", "rich", "learners", "scipy", "sklearn",
)  # fmt: skip

CHECK = r"""
import asyncio, json, sys

src, site, forbidden = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
sys.path[:0] = [src, site]
import importlib.util

# The sandbox itself: none of the server's packages can be found here.
reachable = [m for m in forbidden if importlib.util.find_spec(m) is not None]

import httpx

import service.client as sc
from service.client import AsyncClient, Client, NotFound
from service.client.files import ExampleFile, Target  # the readers of `learnserve update`


def handler(request):
    path = request.url.path
    if path == "/models":
        return httpx.Response(200, json={"models": [{"name": "m", "kind": "linear",
                                                     "version": 3}]})
    if path == "/models/m/predict":
        return httpx.Response(200, json={"model": "m", "version": 3,
                                         "predictions": [{"label": "a", "score": 0.5}]})
    if path == "/models/m/state":
        return httpx.Response(200, content=b"LSRNART", headers={"X-Model-Version": "3",
                                                                 "X-State-Digest": "d"})
    return httpx.Response(404, json={"detail": {"error": "model_not_found",
                                                "message": "no model", "field": "model"}})


with Client("http://service.test", transport=httpx.MockTransport(handler)) as c:
    assert [m.name for m in c.list_models()] == ["m"]
    assert c.predict("m", [{"0": 1.0}]).predictions[0].label == "a"
    assert c.export_state("m").version == 3
    try:
        c.describe("nope")
        raise AssertionError("no NotFound")
    except NotFound as e:
        assert e.field == "model"


async def run_async():
    async with AsyncClient("http://service.test",
                           transport=httpx.MockTransport(handler)) as a:
        return [m.name for m in await a.list_models()]


assert asyncio.run(run_async()) == ["m"]
Client("http://127.0.0.1:9").close()  # the default transport (TLS context, certifi)

loaded = sorted(m for m in sys.modules if m == "service" or m.startswith("service."))
print(json.dumps({
    "reachable": reachable,
    "outside_client": [m for m in loaded if m != "service" and not m.startswith("service.client")],
    "forbidden_loaded": sorted(m for m in sys.modules if m.split(".")[0] in forbidden),
    "client_modules": loaded,
    "version": sc.__name__,
}))
"""


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def closure(roots: tuple[str, ...]) -> dict[str, md.Distribution]:
    """The installed distributions ``roots`` need (no extras), by normalised name."""
    found: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name = _name(todo.pop())
        if name in found:
            continue
        dist = md.distribution(name)
        found[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def link_site(dists: dict[str, md.Distribution], site: Path) -> None:
    """A site directory holding links to these distributions' files only."""
    site.mkdir()
    for name, dist in dists.items():
        files = dist.files
        assert files, f"{name}: no RECORD; cannot tell its files"
        for top in sorted({f.parts[0] for f in files}):
            if top.startswith("..") or top.endswith(".pth") or top.startswith("__editable__"):
                continue
            target = Path(str(dist.locate_file(top)))
            if target.exists() and not (site / top).exists():
                (site / top).symlink_to(target, target_is_directory=target.is_dir())


def client_tree(dest: Path, client: Path = CLIENT) -> Path:
    """``service/__init__.py`` and ``service/client/``: nothing else of the repository."""
    (dest / "service").mkdir(parents=True)
    shutil.copy2(REPO / "service" / "__init__.py", dest / "service" / "__init__.py")
    shutil.copytree(
        client, dest / "service" / "client", ignore=shutil.ignore_patterns("__pycache__")
    )
    return dest


def run_check(tmp: Path, src: Path) -> subprocess.CompletedProcess[str]:
    site = tmp / "site"
    if not site.exists():
        link_site(closure(ROOTS), site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", CHECK, str(src), str(site), ",".join(FORBIDDEN)],
        capture_output=True, text=True, timeout=120, cwd=tmp, env=env,
    )  # fmt: skip


def test_the_dependency_closure_is_httpx_and_orjson_only() -> None:
    names = set(closure(ROOTS))
    assert {"httpx", "httpcore", "h11", "anyio", "idna", "certifi", "orjson"} <= names
    assert not names & {_name(f) for f in FORBIDDEN}, names


def test_the_client_imports_and_works_with_only_httpx_and_orjson(tmp_path: Path) -> None:
    run = run_check(tmp_path, client_tree(tmp_path / "src"))
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["reachable"] == [], f"the sandbox can import {got['reachable']}"
    assert got["outside_client"] == [] and got["forbidden_loaded"] == [], got
    assert "service.client.sync" in got["client_modules"], got


@pytest.mark.parametrize(
    "line",
    ["import numpy", "from service import settings", "import learners"],
)
def test_the_check_fails_when_the_client_imports_more(tmp_path: Path, line: str) -> None:
    """The harness catches it: a copy of the client with one more import fails."""
    src = client_tree(tmp_path / "src")
    core = src / "service" / "client" / "_core.py"
    core.write_text(core.read_text() + f"\n{line}\n")
    run = run_check(tmp_path, src)
    assert run.returncode != 0
    assert re.search(r"^(ModuleNotFound|Import)Error: ", run.stderr, re.M), run.stderr


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """Every module ``path`` imports (at any depth: inside functions too), resolved."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package upwards
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                if node.module:
                    found.append((node.lineno, ".".join([*base, node.module])))
                else:  # from .. import api: each name is a module
                    found += [(node.lineno, ".".join([*base, a.name])) for a in node.names]
            else:
                found.append((node.lineno, node.module or ""))
    return found


def test_no_module_of_the_client_imports_the_server_even_lazily() -> None:
    allowed_third_party = {"httpx", "orjson"}
    bad = []
    for path in sorted(CLIENT.rglob("*.py")):
        for line, module in _imports(path, "service.client"):
            top = module.split(".")[0]
            if module == "service.client" or module.startswith("service.client."):
                continue
            if top == "__future__" or top in sys.stdlib_module_names:
                continue
            if top in allowed_third_party:
                continue
            bad.append(f"{path.relative_to(REPO)}:{line}: {module}")
    only = "service.client may import the standard library, httpx and orjson only:\n"
    assert not bad, only + "\n".join(bad)


def test_service_init_imports_nothing() -> None:
    """``import service.client`` runs ``service/__init__.py`` first."""
    tree = ast.parse((REPO / "service" / "__init__.py").read_text())
    imports = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    ]  # fmt: skip
    assert not imports, [ast.unparse(n) for n in imports]
