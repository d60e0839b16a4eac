"""uvicorn for ``bench/soak.py``, with a SIGUSR1 handler in every worker that writes
what the worker's heap holds to ``$SOAK_SNAPSHOT_DIR/snap-<pid>-<n>.json``.

    python bench/_soak_server.py service.app:factory --factory --workers 2 ...

Arguments are uvicorn's. uvicorn starts its workers with multiprocessing's *spawn*,
which runs this file again in each worker as ``__mp_main__`` (everything but the
``__main__`` block): so the handler is installed there without adding anything to the
service. A snapshot holds:

- ``gc``: the number of objects the collector tracks, by type (top 40), always;
- ``malloc``: glibc's ``mallinfo2`` (heap bytes in use and free), where there is one;
- ``tracemalloc`` with ``SOAK_TRACEMALLOC=<frames>`` in the environment (inherited
  by the workers): the first signal starts tracing (not at start-up: numba's
  compilation under tracemalloc takes many times longer), the second takes the
  baseline, which the worker keeps in memory, and every later one writes the traced
  total, the top lines by size, and the top lines by growth since the baseline.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ first on sys.path would let bench/http.py shadow the standard library's http.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import collections  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from typing import Any  # noqa: E402

_OUT = os.environ.get("SOAK_SNAPSHOT_DIR")
_FRAMES = int(os.environ.get("SOAK_TRACEMALLOC") or 0)
_TOP = 40
_state: dict[str, Any] = {"n": 0, "base": None}
_SKIP = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]  # fmt: skip


def _malloc() -> dict[str, int] | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        f = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    f.restype = _MallInfo2
    m = f()
    return {"heap_bytes": m.arena, "mmap_bytes": m.hblkhd, "in_use_bytes": m.uordblks,
            "free_bytes": m.fordblks, "releasable_bytes": m.keepcost}  # fmt: skip


def _where(filename: str) -> str:
    """A source file as the JSON names it: relative to the repository (its .venv
    included), a standard-library file under ``<python>/``: no machine's paths."""
    path = Path(filename)
    try:
        return str(path.relative_to(_HERE.parent))
    except ValueError:
        parts = path.parts
        lib = next((i for i, p in enumerate(parts) if p.startswith("python3")), None)
        return "<python>/" + "/".join(parts[lib + 1 :]) if lib is not None else path.name


def _stat(s: Any) -> dict[str, Any]:
    frame = s.traceback[0]
    where = f"{_where(frame.filename)}:{frame.lineno}"
    out = {"where": where, "bytes": s.size, "count": s.count}
    if hasattr(s, "size_diff"):
        out.update(bytes_diff=s.size_diff, count_diff=s.count_diff)
    return out


def _snapshot() -> dict[str, Any]:
    gc.collect()
    objs = gc.get_objects()
    kinds = collections.Counter(type(o).__qualname__ for o in objs)
    doc: dict[str, Any] = {
        "pid": os.getpid(),
        "n": _state["n"],
        "time": time.time(),
        "gc_objects": len(objs),
        "gc_top": kinds.most_common(_TOP),
        "malloc": _malloc(),
    }
    del objs
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot().filter_traces(_SKIP)
        cur, peak = tracemalloc.get_traced_memory()
        doc["tracemalloc"] = {
            "frames": tracemalloc.get_traceback_limit(),
            "traced_bytes": cur,
            "peak_bytes": peak,
            "top": [_stat(s) for s in snap.statistics("lineno")[:_TOP]],
        }
        if _state["base"] is None:
            _state["base"] = snap
        else:
            diff = snap.compare_to(_state["base"], "lineno")
            doc["tracemalloc"]["growth"] = [_stat(s) for s in diff[:_TOP]]
            tb = snap.compare_to(_state["base"], "traceback")[:10]
            doc["tracemalloc"]["growth_tracebacks"] = [
                {**_stat(s), "traceback": [f"{_where(f.filename)}:{f.lineno}" for f in s.traceback]}
                for s in tb
            ]
            doc["tracemalloc"]["since"] = _state["base_time"]
        _state.setdefault("base_time", doc["time"])
    elif _FRAMES:
        tracemalloc.start(_FRAMES)
        doc["tracemalloc"] = {"started": True, "frames": _FRAMES}
    return doc


def _dump(signum: int, frame: Any) -> None:
    assert _OUT is not None
    doc = _snapshot()
    path = Path(_OUT) / f"snap-{os.getpid()}-{_state['n']:03d}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)
    _state["n"] += 1


if _OUT:
    signal.signal(signal.SIGUSR1, _dump)

if __name__ == "__main__":
    from uvicorn.main import main

    sys.argv = ["uvicorn", *sys.argv[1:]]
    main()
