"""Which kernel families this process has ready, and compiling one in a process of its own.

A family (:mod:`service.models.warmup`) is compiled once per machine and code: numba
keeps the machine code on disk, and a *marker* here says that the family's kernels are
in that cache for these sources (every module the family imported, by digest), this
numba, this Python and this CPU. With a valid marker a family only loads (well under a
second); without one it is compiled by :func:`compile_family` in a child process
(``python -m service.models.kernel_compile NAME``) so the compile's CPU and memory
never land in the server's process, and its event loop never waits for it.

``GATES``/``READY``: while a server runs in this process (each counts itself in
``GATES``), a compiled JSON scanner is used only once its family is ready
(:func:`usable`); until then the orjson path parses the body, which gives the same
batch. Outside a server (library, CLI, tests) nothing is gated: a kernel compiles when
it is first called, as numba does.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import hashlib
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GATES = 0  # servers running in this process: compiled scanners only once READY
READY: set[str] = set()


def usable(name: str) -> bool:
    """Whether code of family ``name`` may run here now without compiling it."""
    return GATES == 0 or name in READY


def marker_dir() -> Path:
    """Where the markers live: beside numba's cache when ``NUMBA_CACHE_DIR`` names it,
    else in this package's ``__pycache__`` (numba's in-tree cache), else the user's."""
    cache = os.environ.get("NUMBA_CACHE_DIR")
    if cache:
        return Path(cache) / "learnserve-families"
    here = Path(__file__).resolve().parent / "__pycache__" / "kernel-families"
    with contextlib.suppress(OSError):
        here.mkdir(parents=True, exist_ok=True)
        if os.access(here, os.W_OK):
            return here
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "learnserve" / "kernel-families"


@functools.cache  # (asked on every marker check; the process's answer never changes)
def _platform() -> dict[str, str]:
    import numba
    from llvmlite import binding

    cpu = os.environ.get("NUMBA_CPU_NAME") or binding.get_host_cpu_name()
    features = os.environ.get("NUMBA_CPU_FEATURES") or binding.get_host_cpu_features().flatten()
    return {
        "numba": numba.__version__,
        "python": platform.python_version(),
        "cpu": cpu,
        "features": hashlib.sha256(features.encode()).hexdigest()[:16],
    }


# learners/ and service/ sit side by side; a marker names files relative to here, so
# a checkout or an image moved elsewhere keeps its markers (numba's cache moves too).
_ROOT = Path(__file__).resolve().parents[2]


def _kernel_files() -> dict[str, str]:
    """The sources of every kernel compiled (or loaded) in this process so far and of
    every module it can inline, by digest: what numba's cache of them depends on
    (``learners._kernel_cache``), so an edit elsewhere leaves the marker valid."""
    from learners._kernel_cache import file_digest, module_files

    out = {}
    for module in {d.py_func.__module__ for d in _kernels()}:
        for path in module_files(module).values():
            with contextlib.suppress(ValueError):  # (not under _ROOT: not ours after all)
                out[_rel(path)] = file_digest(path)
    return out


def _kernels() -> list[Any]:
    """Every numba kernel of ours compiled or loaded in this process."""
    from numba.core.registry import CPUDispatcher

    return [
        d
        for d in gc.get_objects()  # (module globals, class attributes, closures alike)
        if isinstance(d, CPUDispatcher)
        and d.overloads
        and str(d.py_func.__module__).split(".", 1)[0] in ("learners", "service")
    ]


def _index_files() -> list[str]:
    """numba's index files of the kernels compiled or loaded here: a marker is valid only
    while they exist (a cache cleared by hand, but not the markers, is compiled again)."""
    out = set()
    for d in _kernels():
        cache_file = getattr(getattr(d, "_cache", None), "_cache_file", None)
        index = getattr(cache_file, "_index_path", None)
        if isinstance(index, str):
            out.add(_rel(index))
    return sorted(out)


def _rel(path: str) -> str:
    """``path`` relative to the checkout (an in-tree cache moves with it), else as is."""
    try:
        return Path(path).resolve().relative_to(_ROOT).as_posix()
    except ValueError:
        return path


def _marker(name: str) -> Path:
    return marker_dir() / f"{name}.json"


def marker_valid(name: str) -> bool:
    """Whether family ``name`` was compiled into the cache for exactly this code here."""
    try:
        data = json.loads(_marker(name).read_text())
        if data.get("platform") != _platform():
            return False
        from learners._kernel_cache import file_digest

        return all((_ROOT / p).is_file() for p in data["indexes"]) and all(
            file_digest(str(_ROOT / p)) == d for p, d in data["files"].items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def compile_family(name: str, run: Callable[[], None]) -> dict[str, Any]:
    """Compile (or load) family ``name`` (``run``) in this process and leave its marker:
    what it cost (``compiled``: whether numba compiled anything, or all came from the
    cache). One process per family at a time on this machine (a lock file), so two
    workers starting together compile it once."""
    from numba.core import event

    folder = marker_dir()
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with event.install_recorder("numba:compile") as recorder:
            run()
        marker = {"platform": _platform(), "files": _kernel_files(), "indexes": _index_files()}
        tmp = folder / f"{name}.json.{os.getpid()}"
        tmp.write_text(json.dumps(marker, sort_keys=True))
        tmp.replace(_marker(name))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "family": name,
        "compiled": bool(recorder.buffer),
        "seconds": round(time.perf_counter() - t0, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(_peak_rss_kb(usage.ru_maxrss) / 1024, 1),
    }


def _peak_rss_kb(fallback: int) -> int:
    """This process's own peak resident size: ``VmHWM`` (``ru_maxrss`` carries the peak
    of the process it was forked from, e.g. a whole server's)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return fallback


def child_command(name: str, behind: bool = False) -> list[str]:
    """The command that compiles family ``name`` in a process of its own
    (:mod:`service.models.kernel_compile`); ``behind``: at a lower CPU priority (a
    server's: a request must not wait for a compile)."""
    return [sys.executable, "-m", "service.models.kernel_compile", name] + (
        ["--behind"] if behind else []
    )
