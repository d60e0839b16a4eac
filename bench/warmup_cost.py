"""What compiling each numba kernel family costs: CPU seconds, wall seconds and the peak
resident memory of the process that compiles it, into an empty cache and then again
from the warm cache.

Each family runs in a fresh process of its own (one after the other, so one family's
peak is not another's), with ``NUMBA_CACHE_DIR`` pointed at a new empty directory:
the figures are a first start's, whatever this checkout's caches hold. ``--source``
measures another checkout (e.g. a ``git worktree`` of the commit before a change) with
this venv's Python, for a before/after in one run::

    .venv/bin/python bench/warmup_cost.py                      # this checkout
    git worktree add /tmp/base <commit>
    .venv/bin/python bench/warmup_cost.py --source /tmp/base   # the other one

JSON on stdout (and in ``bench/results/warmup_cost.json`` unless ``--out -``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = """
import sys, time
sys.path.insert(0, {src!r})
from service.models.warmup import families
fam = next(f for f in families() if f.name == {name!r})
t0 = time.perf_counter()
fam.run()
print(time.perf_counter() - t0)
"""


def _family_names(src: Path) -> list[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(src)!r}); "
        "from service.models.warmup import families; print(' '.join(f.name for f in families()))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True)
    out.check_returncode()
    return out.stdout.split()


def run_family(src: Path, name: str, cache: str) -> dict[str, float]:
    """One family in a fresh process: its CPU, wall and in-family seconds, peak RSS."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(src))
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(src=str(src), name=name)],
        cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    assert p.stdout is not None and p.stderr is not None
    out, err = p.stdout.read(), p.stderr.read()
    if status != 0:
        raise RuntimeError(f"family {name} failed:\n{err[-2000:]}")
    return {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "wall_s": round(wall, 2),
        "family_s": round(float(out.split()[-1]), 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=HERE.parent, help="checkout to measure")
    ap.add_argument("--families", nargs="*", help="only these families")
    ap.add_argument("--out", default=str(HERE / "results" / "warmup_cost.json"))
    args = ap.parse_args()
    src = args.source.resolve()
    names = args.families or _family_names(src)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=src, capture_output=True, text=True
    ).stdout.strip()
    result: dict[str, object] = {"source": commit, "families": {}}
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
        for name in names:
            cold = run_family(src, name, cache)
            warm = run_family(src, name, cache)
            result["families"][name] = {"cold": cold, "warm": warm}  # type: ignore[index]
            print(f"{name}: cold {cold}  warm {warm}", file=sys.stderr, flush=True)
    fams = result["families"]
    assert isinstance(fams, dict)
    result["total_cold_cpu_s"] = round(sum(f["cold"]["cpu_s"] for f in fams.values()), 1)
    result["max_cold_peak_rss_mb"] = max(f["cold"]["peak_rss_mb"] for f in fams.values())
    text = json.dumps(result, indent=2)
    print(text)
    if args.out != "-":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
