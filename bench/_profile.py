"""A sampling profile of a running server under load (``bench/update_path.py --profile``).

:func:`record` runs ``py-spy record --format raw`` (collapsed stacks, idle samples
left out: what the process spends CPU on) on a process while the caller's load runs;
:func:`summary` turns the stacks into text: each function's own samples ("self") and
the samples with it anywhere on the stack ("total"), in percent of the samples, and
the self samples per package (``service.api``, ``redis``, ``uvicorn``, ``asyncio``...).

py-spy comes from PyPI (``pip install py-spy``); it reads the target's memory, which
needs the same user (and ``ptrace`` allowed: root, or ``kernel.yama.ptrace_scope=0``).
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")


def find_py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def record(
    pid: int, seconds: float, out: Path, run_load: Callable[[], Any], rate: int = 500
) -> Any:
    """Profile ``pid`` for ``seconds`` while ``run_load()`` runs (it should last about as
    long); the collapsed stacks go to ``out``. Returns what ``run_load`` returned."""
    spy = find_py_spy()
    if spy is None:
        raise SystemExit("py-spy not found: pip install py-spy")
    cmd = [spy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
           "--rate", str(rate), "--format", "raw", "--nonblocking", "-o", str(out)]  # fmt: skip
    spy_proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        result = run_load()
    finally:
        _, err = spy_proc.communicate(timeout=seconds + 60)
    if spy_proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed ({spy_proc.returncode}): {err.decode()[-2000:]}")
    return result


def _where(file: str) -> str:
    """A frame's package: ``service/api/hot.py`` -> ``service.api``; site-packages'
    ``redis/asyncio/client.py`` -> ``redis``; the standard library's ``asyncio/...`` ->
    ``asyncio``."""
    p = file.replace("\\", "/")
    for marker in ("site-packages/", "/lib/python3"):
        if marker in p:
            p = p.split(marker, 1)[1]
            if marker.startswith("/lib"):
                p = p.split("/", 1)[1] if "/" in p else p
            break
    else:
        for root in ("service/", "learners/", "bench/"):
            if root in p:
                p = root + p.rsplit(root, 1)[1]
                break
    parts = p.split("/")
    if parts[0] in ("service", "learners") and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0].removesuffix(".py")


def _short(file: str) -> str:
    p = file.replace("\\", "/")
    for marker in ("site-packages/", "/lib/python3"):
        if marker in p:
            return p.split(marker, 1)[1]
    for root in ("service/", "learners/", "bench/"):
        if root in p:
            return root + p.rsplit(root, 1)[1]
    return p


def summary(stacks: Path, title: str, top: int = 45) -> str:
    """Text: the top functions by self and by total samples, and self samples per package."""
    self_n: collections.Counter[str] = collections.Counter()
    total_n: collections.Counter[str] = collections.Counter()
    pkg_n: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in stacks.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = stack.split(";")[1:]  # the first is the process/thread
        names = []
        for f in frames:
            m = _FRAME.match(f)
            names.append((f"{m['fn']} ({_short(m['file'])})", _where(m["file"])) if m else (f, "?"))
        if not names:
            continue
        self_n[names[-1][0]] += n
        pkg_n[names[-1][1]] += n
        for name in {nm for nm, _ in names}:
            total_n[name] += n
    pct = 100.0 / samples if samples else 0.0
    out = [f"# {title}", f"# {samples} samples (CPU only: idle samples left out)", ""]
    out.append("## self time by package")
    out += [f"{c * pct:6.1f}%  {p}" for p, c in pkg_n.most_common()]
    out += ["", f"## top {top} functions by self time"]
    out += [f"{c * pct:6.1f}%  {f}" for f, c in self_n.most_common(top)]
    out += ["", f"## top {top} functions by total time (on the stack)"]
    out += [f"{c * pct:6.1f}%  {f}" for f, c in total_n.most_common(top)]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------- cProfile, CPU time
#
# py-spy samples a thread that is runnable but not running (preempted by the
# redis-server it just woke on the same core, or by anything else on a shared machine) as
# busy where it stands: the send to Redis then looks like a quarter of the time. A
# deterministic profile on the thread's CPU clock (``time.thread_time``) counts only
# what the event loop's thread really runs (cProfile's own overhead inflates functions
# of many small calls; compare its figures with each other, not with the wall clock).

CPROFILE_START, CPROFILE_STOP = "SIGUSR1", "SIGUSR2"


def serve_profiled(out: str, uvicorn_args: list[str]) -> None:
    """Run uvicorn (``uvicorn_args`` as after ``-m uvicorn``) with a cProfile on the main
    thread's CPU clock that SIGUSR1 starts and SIGUSR2 stops, writing its stats to ``out``."""
    import cProfile
    import runpy
    import signal
    import time

    prof = cProfile.Profile(time.thread_time)

    def start(*_: Any) -> None:
        prof.enable()

    def stop(*_: Any) -> None:
        prof.disable()
        prof.dump_stats(out)

    signal.signal(getattr(signal, CPROFILE_START), start)
    signal.signal(getattr(signal, CPROFILE_STOP), stop)
    sys.argv = ["uvicorn", *uvicorn_args]
    runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)


def cprofile_summary(stats_path: Path, title: str, top: int = 45) -> str:
    """The top functions by own CPU time and by cumulative CPU time, as text."""
    import io
    import pstats

    out = io.StringIO()
    out.write(f"# {title}\n")
    # Named relative to the repository: the summary is committed, the machine's paths not.
    st = pstats.Stats(str(stats_path), stream=out)
    st.files = [stats_path.name]  # pstats would print "<date>    <absolute path>"
    st.strip_dirs()
    out.write(
        f"# {st.total_tt:.3f} s of the event loop thread's CPU time (cProfile, thread_time)\n"
    )
    for key, what in (("tottime", "own"), ("cumulative", "cumulative")):
        out.write(f"\n## top {top} functions by {what} CPU time\n")
        st.sort_stats(key).print_stats(top)
    return out.getvalue()


if __name__ == "__main__":  # python -m bench._profile OUT.prof <uvicorn arguments>
    serve_profiled(sys.argv[1], sys.argv[2:])
