"""Small helpers shared by every benchmark script in ``bench/``.

- :func:`measure` times a callable with warm-up and ``repeats`` runs
  (``time.perf_counter``), giving best and median; a ``setup`` hook builds fresh
  state for every run outside the timed region (an online learner must start
  from scratch each time, or later runs would see a model that makes fewer
  updates and look faster than a first pass really is).
- :func:`machine_info` and :func:`write_results` put results in
  ``bench/results/<name>.json`` together with what they were measured on.
- :func:`print_table` prints rows with rich.

>>> t = measure(lambda state: sum(range(state)), setup=lambda: 1000, repeats=3, n_items=1000)
>>> t.repeats, t.best <= t.median
(3, True)
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
REPO_DIR = BENCH_DIR.parent

__all__ = [
    "RESULTS_DIR",
    "Timing",
    "fmt_rate",
    "fmt_ratio",
    "machine_info",
    "measure",
    "print_table",
    "shared_data_dir",
    "stopwatch",
    "write_results",
]


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """Seconds of ``repeats`` timed runs, each processing ``n_items`` items."""

    times: list[float]
    n_items: int
    warmup: int = 0
    # CPU seconds of this process in each run (time.process_time): on a shared,
    # oversubscribed machine wall time includes waiting for a core; CPU time does not.
    cpu_times: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def repeats(self) -> int:
        return len(self.times)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def rate(self) -> float:
        """Items per second of the best run.

        The best run is the least disturbed one; on a shared machine the others
        mostly measure the neighbours. The median rate is kept in the JSON too.
        """
        return self.n_items / self.best if self.best > 0 else float("inf")

    @property
    def median_rate(self) -> float:
        return self.n_items / self.median if self.median > 0 else float("inf")

    @property
    def cpu_rate(self) -> float | None:
        """Items per CPU-second of the run with the least CPU time (single-threaded code)."""
        if not self.cpu_times:
            return None
        best = min(self.cpu_times)
        return self.n_items / best if best > 0 else None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            best_s=self.best,
            median_s=self.median,
            rate_best=self.rate,
            rate_median=self.median_rate,
            rate_cpu=self.cpu_rate,
        )
        return d


def measure(
    fn: Callable[[Any], Any],
    *,
    setup: Callable[[], Any] | None = None,
    repeats: int = 3,
    warmup: int = 1,
    n_items: int = 1,
) -> Timing:
    """Run ``fn(setup())`` ``warmup`` times untimed, then ``repeats`` times timed.

    Only the call to ``fn`` is inside the timed region; ``setup`` (building a
    fresh model, say) runs before each call and is not counted.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    make = setup if setup is not None else (lambda: None)
    for _ in range(warmup):
        fn(make())
    times, cpu_times = [], []
    for _ in range(repeats):
        state = make()
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn(state)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    return Timing(times=times, n_items=n_items, warmup=warmup, cpu_times=cpu_times)


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as sw: ...`` then ``sw[0]`` is the elapsed seconds."""
    out: list[float] = [0.0]
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out[0] = time.perf_counter() - t0


# --------------------------------------------------------------------------- data


def shared_data_dir() -> Path:
    """``../shared/data`` beside the checkout, or ``$LEARNSERVE_SHARED_DATA``.

    The same rule as ``tests/conftest.py``; benchmarks skip a data set (with a
    message) when its file is absent rather than fail.
    """
    env = os.environ.get("LEARNSERVE_SHARED_DATA")
    return Path(env) if env else (REPO_DIR.parent / "shared" / "data").resolve()


# --------------------------------------------------------------------------- results


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=BENCH_DIR,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _dirty() -> bool | None:
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def machine_info(extra_packages: Sequence[str] = ()) -> dict[str, Any]:
    """What a result was measured on: CPUs, load, Python and library versions."""
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    packages = {p: _version(p) for p in ("numpy", "numba", *extra_packages)}
    return {
        "timestamp_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        # The bench machine is often shared: a high load average explains noise.
        "load_average": load,
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": packages,
        "git_commit": _git("rev-parse", "HEAD") or None,
        # Uncommitted changes to tracked files mean the commit alone does not pin the code.
        "git_dirty": _dirty(),
    }


def write_results(
    name: str,
    payload: Mapping[str, Any],
    *,
    extra_packages: Sequence[str] = (),
    results_dir: Path | None = None,
) -> Path:
    """Write ``payload`` plus :func:`machine_info` to ``<results_dir>/<name>.json``."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"name must be a plain file stem, got {name!r}")
    out_dir = results_dir if results_dir is not None else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    doc = {"benchmark": name, "machine": machine_info(extra_packages), **payload}
    tmp = path.with_suffix(".json.tmp")
    # allow_nan=False: a NaN/inf in the results is a bug to see, not JSON to write.
    tmp.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- printing


def fmt_rate(x: float | None) -> str:
    """Items per second, human-sized: ``1,234``, ``12.3k``, ``2.41M``."""
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:,.0f}"


def fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    right_align_from: int = 1,
    caption: str | None = None,
) -> None:
    """Print ``rows`` under ``columns`` with rich (cells are ``str()``-ed).

    Columns from index ``right_align_from`` on are right-aligned (numbers).
    ``PASS``/``FAIL`` cells are coloured.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=caption, show_lines=False)
    for i, col in enumerate(columns):
        table.add_column(col, justify="right" if i >= right_align_from else "left")
    for row in rows:
        cells = []
        for cell in row:
            s = "-" if cell is None else str(cell)
            if s == "PASS":
                s = "[green]PASS[/green]"
            elif s == "FAIL":
                s = "[red]FAIL[/red]"
            cells.append(s)
        table.add_row(*cells)
    # A wide console so the table is not wrapped when stdout is a file or a pipe.
    Console(width=max(200, Console().width)).print(table)
