"""The layering of the code, held: import-linter's contracts (pyproject.toml) and no
import cycle between any two modules of ``service/`` (type-only imports included)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    nxt = graph.find_modules_directly_imported_by(w) & modules
                    work.append((w, iter(sorted(nxt))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_no_import_cycle_in_service() -> None:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("service", cache_dir=None)
    modules = set(graph.modules)
    assert len(modules) > 100  # the whole package was read
    assert _cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    """The check above could fail: a two-module circle is found."""
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circ import b\n")
    (pkg / "b.py").write_text("from circ import a\n")
    (pkg / "c.py").write_text("from circ import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("circ", cache_dir=None)
        assert _cycles(graph, set(graph.modules)) == [["circ.a", "circ.b"]]
    finally:
        sys.path.remove(str(tmp_path))


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("lint-imports is not installed (the test extra has import-linter)")
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout
