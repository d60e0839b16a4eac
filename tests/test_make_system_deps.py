"""Issue 31 item 12: ``make test`` runs ``make system-deps``, which installs packages
system-wide with ``apt-get``: it must say so before, and skip with a clear message when it
is not root or not on Debian. The real Makefile runs under ``make`` with a PATH holding
neither redis-server nor docker-compose (so both are "missing"), Prometheus's tools
already in place, as an unprivileged user (``nobody``) and, without apt-get, as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NEEDED = ("sh", "make", "id", "cat", "cksum", "cut", "mkdir", "ln", "rm")


def sandbox(tmp_path: Path, with_apt: bool) -> tuple[Path, dict[str, str]]:
    """A copy of the Makefile, its tools folder done, and a PATH of only what it needs."""
    work = tmp_path / "work"
    (work / ".tools" / "bin").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, work / name)
    for tool in ("promtool", "prometheus"):
        (work / ".tools" / "bin" / tool).touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in NEEDED + (("apt-get",) if with_apt else ()):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_dir / tool).symlink_to(found)
    for p in (work, work / ".tools", work / ".tools" / "bin", bin_dir):
        p.chmod(0o777)
    return work, {"PATH": str(bin_dir), "HOME": str(tmp_path), "LANG": "C"}


def make(work: Path, env: dict[str, str], user: list[str]) -> str:
    r = subprocess.run([*user, "make", "-s", "-C", str(work), "system-deps"], env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_not_root_installs_nothing_and_says_so() -> None:
    # (not under pytest's tmp_path: its root is private to this user, and make runs as
    # nobody)
    with tempfile.TemporaryDirectory(prefix="learnserve-make-") as tmp:
        not_root(Path(tmp))


def not_root(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    work, env = sandbox(tmp_path, with_apt=True)
    user: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv is not installed (to run make as nobody)")
        user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    out = make(work, env, user)
    for pkg in ("redis-server", "docker-compose"):
        assert f"system-deps: not root: {pkg} is not installed" in out, out
    assert "installing" not in out and "could not install" not in out, out


def test_without_apt_get_it_says_it_is_not_debian(tmp_path: Path) -> None:
    work, env = sandbox(tmp_path, with_apt=False)
    if os.geteuid() != 0:
        pytest.skip("the root case: run as root (CI does)")
    out = make(work, env, [])
    for pkg in ("redis-server", "docker-compose"):
        assert f"no apt-get (not Debian/Ubuntu): {pkg} is not installed" in out, out


def test_as_root_each_package_is_announced_before_apt_get_runs() -> None:
    text = (REPO / "Makefile").read_text()
    recipe = text[text.index("APT_INSTALL = ") : text.index("system-deps: $(TOOLS)")]
    assert recipe.index("installing the Debian package") < recipe.index("apt-get update"), recipe
    assert "sudo" not in recipe
