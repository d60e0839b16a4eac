"""First start on a fresh clone: ``make serve`` until ``/healthz`` answers, the README's
first model learns, and a raw-records model is ready; the peak memory of every process
on the way.

Prints every line of ``make serve`` with its time, then the marks (seconds since
``make serve``): ``install`` (make runs ``learnserve serve``), ``healthz`` (its first
200), ``first_update`` (the README's ``PUT /models/adult`` + ``/update`` answered 200,
after the linear kernels compiled in the background), ``records_ready`` (a raw-records
model created right after, answering its first ``/update``), and the largest resident
size of any one process of the tree (a compile child included) and of the whole tree::

    git clone . /tmp/fresh && python3 bench/first_start.py /tmp/fresh

JSON in ``bench/results/first_start.json`` of the clone measured.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path and bench/http.py would shadow the
# standard library's ``http`` (which urllib imports): take bench/ off it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402


def _tree_rss_mb(root: int) -> tuple[float, float]:
    """(largest single process, whole tree) resident MB of ``root`` and descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/statm") as f:
                rss[int(d)] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    todo, seen = [root], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children.get(p, [])
    sizes = [rss.get(p, 0.0) for p in seen]
    return max(sizes, default=0.0), sum(sizes)


def main() -> None:
    repo = sys.argv[1]
    port = 18000 + os.getpid() % 1000
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    peak = {"process_mb": 0.0, "tree_mb": 0.0}
    proc = subprocess.Popen(
        ["make", "serve", f"PORT={port}"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    done = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.monotonic() - t0
            if "learnserve serve" in line and "install" not in marks:
                marks["install"] = t
            sys.stdout.write(f"[{t:7.1f}] {line}")

    def sampler() -> None:
        while not done.wait(0.5):
            one, tree = _tree_rss_mb(proc.pid)
            peak["process_mb"] = max(peak["process_mb"], one)
            peak["tree_mb"] = max(peak["tree_mb"], tree)

    threading.Thread(target=reader, daemon=True).start()
    threading.Thread(target=sampler, daemon=True).start()

    def call(method: str, path: str, body: dict[str, object] | None = None) -> int | None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
        except OSError:
            return None

    def until(name: str, ok: object) -> None:
        while time.monotonic() - t0 < 1800 and name not in marks:
            if callable(ok) and ok():
                marks[name] = time.monotonic() - t0
                return
            time.sleep(0.2)

    model = {"algorithm": "arow", "params": {"r": 1.0}, "features": {"kind": "hashed", "bits": 20}}
    update = {"model": "adult", "examples": [
        {"x": {"age": 39, "job": "clerk"}, "y": "+1"},
        {"x": {"age": 50, "job": "exec"}, "y": "-1"},
    ]}  # fmt: skip
    records = {"algorithm": "arow", "features": {"kind": "records", "bits": 18, "fields": {
        "age": {"type": "numeric", "transform": "log1p"}, "job": {"type": "categorical"},
        "note": {"type": "text", "words": {"ngrams": 2}}}}}  # fmt: skip
    rec_update = {"model": "raw", "examples": [
        {"x": {"age": 39, "job": "clerk", "note": "a short note"}, "y": "+1"}]}  # fmt: skip
    try:
        until("healthz", lambda: call("GET", "/healthz") == 200)
        until("first_update", lambda: call("PUT", "/models/adult", model) in (200, 201)
              and call("POST", "/update", update) == 200)  # fmt: skip
        marks["records_created"] = time.monotonic() - t0
        until("records_ready", lambda: call("PUT", "/models/raw", records) in (200, 201)
              and call("POST", "/update", rec_update) == 200)  # fmt: skip
    finally:
        done.set()
        proc.terminate()
        proc.wait(60)
    install = marks.get("install", float("nan"))
    result = {
        "marks_s": {k: round(v, 1) for k, v in marks.items()},
        "healthz_beyond_install_s": round(marks.get("healthz", float("nan")) - install, 1),
        "first_update_beyond_install_s": round(
            marks.get("first_update", float("nan")) - install, 1
        ),
        "records_ready_after_created_s": round(
            marks.get("records_ready", float("nan")) - marks.get("records_created", float("nan")),
            1,
        ),
        "peak_rss_mb": {k: round(v) for k, v in peak.items()},
    }
    print(json.dumps(result, indent=2))
    out = Path(repo) / "bench" / "results" / "first_start.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
