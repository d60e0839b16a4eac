"""Running learnserve from earlier commits next to this tree, in one benchmark run.

Shared by ``bench/http.py`` and ``bench/update_path.py`` (``--baseline REF``):

- :func:`export` puts the tree of a git ref in a temp dir (``git archive``: no worktree
  to register or clean up in the repository); its numba kernels compile cold there.
- :func:`baseline_codes` maps labels to code directories: ``"current"`` is this
  checkout, ``"baseline <short sha>"`` each exported ref; :func:`remove_exports`
  deletes the exports again.
- :func:`learnserve_args` is the uvicorn command line that runs ``service.app:factory``
  from a given code directory, and nothing else: ``-P`` keeps the current directory
  off ``sys.path`` and ``--app-dir`` replaces uvicorn's default (which puts the
  current directory first, so a baseline started from a checkout would run the
  checkout's code). Pass ``PYTHONPATH=<code>`` in the environment too
  (:func:`code_env`).
- :func:`cpu_seconds` reads a process's CPU time from ``/proc``; :func:`tree_cpu_seconds`
  that of a process and its children (uvicorn's worker processes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
CURRENT = "current"


def short_sha(ref: str) -> str:
    git = ["git", "-C", str(REPO), "rev-parse", "--short", ref]
    return subprocess.run(git, check=True, capture_output=True, text=True).stdout.strip()


def export(ref: str, prefix: str = "bench-baseline-") -> Path:
    """The tree of ``ref`` in a temp dir (``git archive``: no worktree to clean up)."""
    dest = Path(tempfile.mkdtemp(prefix=prefix)) / "src"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def baseline_codes(refs: Iterable[str], prefix: str = "bench-baseline-") -> dict[str, Path]:
    """``{"current": REPO, "baseline <sha>": exported tree, ...}`` in the order given."""
    codes = {CURRENT: REPO}
    try:
        for ref in refs:
            codes[f"baseline {short_sha(ref)}"] = export(ref, prefix)
    except BaseException:
        remove_exports(codes)
        raise
    return codes


def remove_exports(codes: dict[str, Path]) -> None:
    """Delete the temp dirs :func:`baseline_codes` made (never this checkout)."""
    for code in codes.values():
        if code.resolve() != REPO:
            shutil.rmtree(code.parent, ignore_errors=True)


def short_label(label: str) -> str:
    """``"baseline 1a2b3c4"`` -> ``"1a2b3c4"``; ``"current"`` stays."""
    return label.removeprefix("baseline ")


def code_env(code: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(code)}


def learnserve_args(code: Path, port: int, host: str = HOST, workers: int = 1) -> list[str]:
    """uvicorn serving ``service.app:factory`` from ``code``, ``workers`` worker
    processes (1: the server is the uvicorn process itself), access log off."""
    args = [sys.executable, "-P", "-m", "uvicorn", "service.app:factory", "--factory",
            "--app-dir", str(code), "--host", host, "--port", str(port),
            "--log-level", "warning", "--no-access-log"]  # fmt: skip
    return args + (["--workers", str(workers)] if workers > 1 else [])


def imported_from(code: Path) -> bool | None:
    """Whether a server runs the code in ``code``: its bytecode or numba's cache files
    (next to the sources, compiled at start-up) are there. A sanity check for an exported
    tree, which starts with neither; None when neither could be written there
    (``PYTHONDONTWRITEBYTECODE`` and ``NUMBA_CACHE_DIR`` both set)."""
    if (code / "service" / "__pycache__").is_dir():
        return True
    if any(code.glob("learners/**/__pycache__/*.nbi")):
        return True
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and os.environ.get("NUMBA_CACHE_DIR"):
        return None
    return False


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (0.0 where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (uvicorn's workers), from /proc."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and of its live children (a worker that exited is not counted:
    read it before and after a run in which none exits)."""
    return cpu_seconds(pid) + sum(cpu_seconds(c) for c in child_pids(pid))
