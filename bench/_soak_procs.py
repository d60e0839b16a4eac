"""Helpers of ``bench/soak.py``: the uvicorn workers' pids and RSS (``/proc``), the RSS
slope, and the summary of the samples and heap snapshots written to the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def workers(parent: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and _ppid(int(d.name)) == parent:
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmd and b"resource_tracker" not in cmd:
                out.append(int(d.name))
    return sorted(out)


def rss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[k] = int(v.split()[0])
    return out


def slope_mb_per_min(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    cov = sum((t - mt) * (v - mv) for t, v in points)
    return round(cov / var * 60 / 1024, 4) if var else None  # kB/s -> MB/min


def last_snapshots(snap_dir: Path) -> dict[str, Any]:
    """Per worker: its first and last snapshot (the last with tracemalloc's growth)."""
    by_pid: dict[str, list[Path]] = {}
    for p in sorted(snap_dir.glob("snap-*.json")):
        by_pid.setdefault(p.name.split("-")[1], []).append(p)
    out = {}
    for pid, files in by_pid.items():
        first, last = (json.loads(f.read_text()) for f in (files[0], files[-1]))
        out[pid] = {"first": first, "last": last}
    return out


def summarise(doc: dict[str, Any], warmup: float) -> None:
    per: dict[str, list[tuple[float, float]]] = {}
    for s in doc["samples"]:
        if s["t"] >= warmup:
            for pid, r in s["workers"].items():
                per.setdefault(pid, []).append((s["t"], r["VmRSS"]))
    out = {}
    for pid, pts in per.items():
        half = [p for p in pts if p[0] >= (pts[0][0] + pts[-1][0]) / 2]
        out[pid] = {"rss_mb_first": round(pts[0][1] / 1024, 1),
                    "rss_mb_last": round(pts[-1][1] / 1024, 1),
                    "rss_mb_max": round(max(v for _, v in pts) / 1024, 1),
                    "slope_mb_per_min": slope_mb_per_min(pts),
                    "slope_last_half_mb_per_min": slope_mb_per_min(half)}  # fmt: skip
    rows = [s for s in doc["samples"] if s["t"] >= warmup]
    sent = sum(s["requests"] for s in rows)
    doc["summary"] = {
        "workers": out,
        "requests": sent,
        "errors": sum(s["errors"] for s in rows),
        "shed": sum(s["shed"] for s in rows),
        "mean_rate": round(sent / max(1e-9, sum(doc["config"]["sample"] for _ in rows)), 1),
    }
