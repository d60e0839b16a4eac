"""The install a user gets: `make serve` installs the runtime only (no test tools, no
reference learners), `make test` adds the test extra, the bench extra stays apart, and
the metadata uses the SPDX license string (a license table is deprecated by setuptools)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _make_dry_run(target: str) -> str:
    """The commands `make TARGET` would run in a fresh checkout (no venv yet)."""
    run = subprocess.run(
        ["make", "-n", "-B", target, "VENV=/nonexistent/venv"],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_make_serve_installs_the_runtime_only_and_compiles_nothing_before_serving() -> None:
    """A first start answers in seconds: kernels compile when a model first needs them
    (in the service, off its event loop), not before it listens."""
    commands = _make_dry_run("serve")
    installs = re.findall(r"pip install -q (.+)", commands)
    assert installs == ["--upgrade pip", "-e ."], installs
    assert "learnserve serve" in commands
    assert "learnserve warmup" not in commands, commands
    # make test still compiles every family ahead: its servers must not wait for any
    test = _make_dry_run("test")
    assert test.index("learnserve warmup") < test.index("pytest"), test


def test_make_test_installs_the_test_extra_and_bench_stays_apart() -> None:
    test = _make_dry_run("test")
    assert "pip install -q -e '.[test]'" in test
    assert "[bench]" not in test
    assert "pip install -q -e '.[bench]'" in _make_dry_run("bench")


def test_the_runtime_dependencies_hold_no_test_or_reference_tools() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {re.split(r"[\[<>=]", d)[0].lower() for d in project["dependencies"]}
    for tool in ("pytest", "mypy", "ruff", "scikit-learn", "lightgbm", "river", "locust"):
        assert tool not in runtime
    assert isinstance(project["license"], str) and project["license"] == "Apache-2.0"
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    # SPDX `license` strings need setuptools >= 77 (PEP 639)
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77 for r in build)


def test_no_kernel_needs_scipy_which_the_runtime_install_lacks() -> None:
    """numba compiles np.dot / np.linalg through SciPy's BLAS: a kernel using them fails
    to compile under `make serve` and in the Docker image (no SciPy there)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    if any(d.lower().startswith("scipy") for d in project["dependencies"]):
        return
    for path in (REPO / "learners").rglob("*.py"):
        text = path.read_text()
        if "@njit" in text or "@numba." in text:  # a file of kernels
            found = re.findall(r"np\.(?:dot|linalg\.\w+|vdot|inner|outer)\(", text)
            assert not found, f"{path.relative_to(REPO)} uses {found} in numba code"
