"""Capacity: the highest request rate a local service sustains with p99 < 50 ms and no failure.

For each configuration (embedded SQLite store, then Redis; 1, then 2 workers) it starts
``learnserve serve`` on a free port, then runs Locust headless at increasing offered
rates (users x ``--user-rate`` requests/s each) until a step misses the target. A step
is *sustained* when Locust achieved >= 90 % of the offered rate, its p99 is under
``--p99-ms`` and no request failed. Prints a table and writes bench/results/capacity.json.

    .venv/bin/python loadtest/capacity.py                       # a few minutes
    .venv/bin/python loadtest/capacity.py --scenario MixedUser --rates 50,100,200 --step 20

Locust runs on the same machine as the service, so the figures are a floor for the
service (they include Locust's own CPU use); compare configurations within one run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ok(url: str, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited ({proc.returncode}) before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f}s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A private redis-server configured like docker-compose's (AOF, fsync every second)."""
    port = free_port()
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError("redis-server did not start")


def start_service(workdir: Path, workers: int, redis_url: str | None) -> tuple[Any, str]:
    port = free_port()
    args = [str(BIN / "learnserve"), "serve", "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(workers), "--data-dir", str(workdir / "data"),
            "--log-level", "warning"]  # fmt: skip
    if redis_url:
        args += ["--redis-url", redis_url]
    env = {**os.environ, "LEARNSERVE_API_KEYS": "", "LEARNSERVE_ENVIRONMENT": "development"}
    log = open(workdir / "serve.log", "wb")  # noqa: SIM115 - the process owns it
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ok(f"{url}/readyz", proc)
    return proc, url


def run_step(
    url: str, users: int, opts: argparse.Namespace, workdir: Path, seconds: int | None = None
) -> dict[str, Any]:
    prefix = workdir / f"step_{users}"
    cmd = [str(BIN / "locust"), "-f", str(HERE / "locustfile.py"), "--headless",
           "--host", url, "-u", str(users), "-r", str(users), "-t", f"{seconds or opts.step}s",
           "--user-rate", str(opts.user_rate), "--csv", str(prefix), "--only-summary",
           "--stop-timeout", "5", "--loglevel", "ERROR", "--exit-code-on-error", "0",
           opts.scenario]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    with open(f"{prefix}_stats.csv", newline="") as f:
        total = next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    if int(total["Request Count"]) == 0:
        raise RuntimeError(f"locust sent no request:\n{(run.stdout + run.stderr)[-3000:]}")
    offered = users * opts.user_rate
    achieved = float(total["Requests/s"])
    p99 = float(total["99%"] or "nan")
    failures = int(total["Failure Count"])
    return {
        "users": users,
        "offered_rps": offered,
        "achieved_rps": round(achieved, 1),
        "p50_ms": float(total["50%"] or "nan"),
        "p99_ms": p99,
        "requests": int(total["Request Count"]),
        "failures": failures,
        "sustained": achieved >= 0.9 * offered and p99 < opts.p99_ms and failures == 0,
    }


def measure(store: str, workers: int, opts: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="learnserve-capacity-") as tmp:
        workdir = Path(tmp)
        redis = None
        redis_url = None
        if store == "redis":
            redis, redis_url = start_redis(workdir)
        try:
            service, url = start_service(workdir, workers, redis_url)
            try:
                # Warm-up, not counted: creates the models and compiles the numba kernels
                # (the first request of a fresh process pays for it).
                run_step(url, 2, opts, workdir, seconds=8)
                steps = []
                for rate in opts.rates:
                    users = max(1, round(rate / opts.user_rate))
                    step = run_step(url, users, opts, workdir)
                    steps.append(step)
                    print(f"  {store:6} w={workers} offered {step['offered_rps']:6.0f}/s -> "
                          f"{step['achieved_rps']:7.1f}/s p99 {step['p99_ms']:5.0f} ms "
                          f"fail {step['failures']}", flush=True)  # fmt: skip
                    if not step["sustained"]:
                        break
            finally:
                stop(service)
        finally:
            if redis is not None:
                stop(redis)
    ok = [s for s in steps if s["sustained"]]
    best = max(ok, key=lambda s: s["achieved_rps"]) if ok else None
    return {
        "store": store,
        "workers": workers,
        "max_sustained_rps": best["achieved_rps"] if best else 0.0,
        "p99_ms_at_max": best["p99_ms"] if best else None,
        "steps": steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="PredictHeavyUser", help="Locust user class")
    ap.add_argument("--rates", default="25,50,75,100,125,150,200,300,400",
                    help="offered requests/s, in increasing order")  # fmt: skip
    ap.add_argument("--user-rate", type=float, default=5.0, help="requests/s per Locust user")
    ap.add_argument("--step", type=int, default=10, help="seconds per step")
    ap.add_argument("--p99-ms", type=float, default=50.0)
    ap.add_argument("--configs", default="sqlite:1,sqlite:2,redis:1,redis:2",
                    help="store:workers pairs")  # fmt: skip
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "capacity.json"))
    opts = ap.parse_args()
    opts.rates = [float(r) for r in opts.rates.split(",")]
    configs = [(c.split(":")[0], int(c.split(":")[1])) for c in opts.configs.split(",")]
    if shutil.which("redis-server") is None:
        print("note: no redis-server on PATH; measuring the SQLite store only")
        configs = [c for c in configs if c[0] != "redis"]

    t0 = time.time()
    load_before = os.getloadavg()[0]
    results = []
    for store, workers in configs:
        print(f"{store} store, {workers} worker(s):", flush=True)
        results.append(measure(store, workers, opts))

    print(f"\nscenario {opts.scenario}, p99 < {opts.p99_ms:.0f} ms, 0 failures, "
          f"{opts.step} s per step, load average {load_before:.1f} -> "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'store':8}{'workers':>8}{'max sustained req/s':>22}{'p99 ms':>9}")
    for r in results:
        p99 = "-" if r["p99_ms_at_max"] is None else f"{r['p99_ms_at_max']:.0f}"
        print(f"{r['store']:8}{r['workers']:>8}{r['max_sustained_rps']:>22.1f}{p99:>9}")
    out = Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "capacity",
        "scenario": opts.scenario,
        "criteria": {"p99_ms_below": opts.p99_ms, "failures": 0, "achieved_fraction": 0.9},
        "step_seconds": opts.step,
        "user_rate": opts.user_rate,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "note": "Locust runs on the same machine and shares its CPUs with the service.",
        "elapsed_seconds": round(time.time() - t0, 1),
        # Other work on the machine skews the figures; the 1-min load average says how much.
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "results": results,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
