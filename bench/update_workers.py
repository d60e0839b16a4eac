"""What more workers add to ``/update`` (issue 21), this code next to earlier commits.

Every worker applies every entry of the log, its own (in the request that appended it)
and the other workers' (from the store). Two figures:

1. **Replica apply per entry.** Two learnserve processes (one uvicorn worker each) on one
   redis-server, all three pinned to one core, wrk on the other: wrk sends ``/update``
   to the first only. Its CPU per request is what *serving* an update costs; the second
   one's CPU per entry (less what it spends idle over as long: its loops, measured
   before) is what *applying another worker's entry* costs. Issue 21's goal: apply <= 25%
   of serve for 100-example entries.
2. **``--workers 2`` against 1.** learnserve with one and with two uvicorn workers on its
   own redis-server, nothing pinned (the workers, Redis and wrk share both cores), wrk
   with ``--connections`` (32) connections: req/s of each, in interleaved rounds, best
   round kept. Goal: two workers >= 1.2x one.

    .venv/bin/python bench/update_workers.py --baseline 24642f3 --duration 5 --rounds 3

``--profile LABEL``: only profiles of the replicating process (B) of this tree while
wrk loads A with ``dense x100``: py-spy to ``bench/profiles/replica-LABEL.txt`` and
cProfile (B's event-loop thread CPU clock) to ``bench/profiles/replica-LABEL-cprofile.txt``.

JSON: ``bench/results/update_workers.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path and bench/http.py would shadow the
# standard library's ``http``: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import functools  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from bench._baseline import (  # noqa: E402
    CURRENT,
    baseline_codes,
    cpu_seconds,
    remove_exports,
    tree_cpu_seconds,
)
from bench._common import fmt_rate, print_table, write_results  # noqa: E402
from bench._loadgen import build_request  # noqa: E402
from bench._profile import (  # noqa: E402
    CPROFILE_START,
    CPROFILE_STOP,
    cprofile_summary,
    record,
    summary,
)
from bench._wrk import find_wrk, pin, two_cores  # noqa: E402
from bench.http import LoadGen  # noqa: E402
from bench.update_path import (  # noqa: E402
    HOST,
    PROFILES,
    REPO,
    SCENARIOS,
    STACKS,
    bodies,
    start_server,
)
from tests.service.procs import RedisServer, find_redis_server, stop_process  # noqa: E402


def _version(port: int, model: str) -> int:
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=60) as c:
        r = c.get(f"/models/{model}")
        r.raise_for_status()
        return int(r.json()["version"])


def replica_apply(
    codes: dict[str, Path], scenarios: list[tuple[str, str, int, int]], duration: float,
    connections: int,
) -> list[dict[str, Any]]:  # fmt: skip
    wrk_cpu, server_cpu = two_cores()
    gen = LoadGen(wrk=True, cpu=wrk_cpu)
    out = []
    binary = find_redis_server()
    if binary is None:
        sys.exit("redis-server not found")
    for label, code in codes.items():
        redis = RedisServer(binary, Path(tempfile.mkdtemp(prefix="bench-workers-redis-")))
        redis.start()
        assert redis.proc is not None
        pin(redis.proc.pid, {server_cpu})
        procs: list[Any] = []
        try:
            a, _, port_a = start_server(code, {server_cpu}, redis=redis)
            procs.append(a)
            b, _, port_b = start_server(code, {server_cpu}, redis=redis)
            procs.append(b)
            for name, model, n, count in scenarios:
                reqs = [build_request("POST", "/update", x) for x in bodies(model, n, count)]
                gen.run(port_a, reqs, connections, 2.0)  # warm-up; B catches up meanwhile
                time.sleep(1.0)
                b0, t0 = cpu_seconds(b.pid), time.monotonic()
                time.sleep(duration)  # B idle: its loops' own cost
                idle = (cpu_seconds(b.pid) - b0) / (time.monotonic() - t0)
                v0 = _version(port_b, model)
                a0, b0, t0 = cpu_seconds(a.pid), cpu_seconds(b.pid), time.monotonic()
                res = gen.run(port_a, reqs, connections, duration)
                while _version(port_b, model) < _version(port_a, model):  # B caught up
                    time.sleep(0.05)
                a1, b1, t1 = cpu_seconds(a.pid), cpu_seconds(b.pid), time.monotonic()
                entries = _version(port_b, model) - v0
                serve = (a1 - a0) / max(1, res.requests) * 1e6
                apply = max(0.0, (b1 - b0) - idle * (t1 - t0)) / max(1, entries) * 1e6
                row = {"code": label, "scenario": name, "requests": res.requests,
                       "entries_applied_by_replica": entries, "serve_cpu_us_per_request": serve,
                       "apply_cpu_us_per_entry": apply, "replica_idle_cpu_fraction": idle,
                       "apply_over_serve": apply / serve if serve else None}  # fmt: skip
                out.append(row)
                ratio = row["apply_over_serve"]
                print(f"{label:>24} {name:<12} serve {serve:6.0f} us/req, replica apply "
                      f"{apply:6.0f} us/entry ({ratio:.2f})", flush=True)  # fmt: skip
        finally:
            for p in procs:
                stop_process(p)
            redis.stop()
    return out


def workers_compare(
    codes: dict[str, Path], rounds: int, duration: float, connections: int
) -> list[dict[str, Any]]:
    gen = LoadGen(wrk=True, cpu=None, threads=2)
    servers: dict[tuple[str, int], tuple[Any, RedisServer, int]] = {}
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    name, model, n, count = next(s for s in SCENARIOS if s[0] == "dense x100")
    reqs = [build_request("POST", "/update", x) for x in bodies(model, n, count)]
    try:
        for label, code in codes.items():
            for workers in (1, 2):
                print(f"starting {label} with {workers} worker(s) ...", flush=True)
                servers[(label, workers)] = start_server(code, None, workers=workers)
        for rnd in range(rounds):
            for key, (proc, _, port) in servers.items():
                gen.run(port, reqs, connections, 1.0)
                c0 = tree_cpu_seconds(proc.pid)
                res = gen.run(port, reqs, connections, duration)
                cpu = (tree_cpu_seconds(proc.pid) - c0) / max(1, res.requests) * 1e6
                runs.setdefault(key, []).append({"req_per_s": res.rps, "cpu_us_per_request": cpu,
                                                 "errors": res.errors, "round": rnd})  # fmt: skip
                print(f"round {rnd + 1} {key[0]:>24} workers={key[1]} {res.rps:8,.0f} req/s "
                      f"{cpu:6.0f} us CPU/req", flush=True)  # fmt: skip
    finally:
        for proc, redis, _ in servers.values():
            stop_process(proc)
            redis.stop()
    out = []
    for (label, workers), rs in runs.items():
        best = max(rs, key=lambda r: r["req_per_s"])
        out.append({"code": label, "workers": workers, "scenario": name, **best,
                    "req_per_s_rounds": [r["req_per_s"] for r in rs]})  # fmt: skip
    for r in out:
        one = next(x for x in out if x["code"] == r["code"] and x["workers"] == 1)
        r["over_one_worker"] = r["req_per_s"] / one["req_per_s"] if one["req_per_s"] else None
    return out


def profile_replica(label: str, duration: float, connections: int) -> None:
    """py-spy, then cProfile, over B (the replica) while wrk loads A (the appender), as
    ``replica_apply`` sets them up (this tree only)."""
    import signal
    import subprocess

    wrk_cpu, server_cpu = two_cores()
    gen = LoadGen(wrk=True, cpu=wrk_cpu)
    git = ["git", "-C", str(REPO), "describe", "--always", "--dirty"]
    commit = subprocess.run(git, capture_output=True, text=True).stdout.strip()
    PROFILES.mkdir(exist_ok=True)
    STACKS.mkdir(parents=True, exist_ok=True)
    binary = find_redis_server()
    if binary is None:
        sys.exit("redis-server not found")
    name, model, n, count = next(s for s in SCENARIOS if s[0] == "dense x100")
    reqs = [build_request("POST", "/update", x) for x in bodies(model, n, count)]
    stats = STACKS / f"replica-{label}.prof"
    for tool in ("py-spy", "cProfile"):
        redis = RedisServer(binary, Path(tempfile.mkdtemp(prefix="bench-workers-redis-")))
        redis.start()
        assert redis.proc is not None
        pin(redis.proc.pid, {server_cpu})
        procs: list[Any] = []
        try:
            a, _, port_a = start_server(REPO, {server_cpu}, redis=redis)
            procs.append(a)
            b, _, port_b = start_server(
                REPO, {server_cpu}, redis=redis, cprofile=stats if tool == "cProfile" else None
            )
            procs.append(b)
            gen.run(port_a, reqs, connections, 2.0)  # warm-up
            time.sleep(1.0)
            v0, b0 = _version(port_b, model), cpu_seconds(b.pid)
            if tool == "cProfile":
                stats.unlink(missing_ok=True)
                b.send_signal(getattr(signal, CPROFILE_START))
                res = gen.run(port_a, reqs, connections, duration)
                b.send_signal(getattr(signal, CPROFILE_STOP))
                for _ in range(100):
                    if stats.exists():
                        break
                    time.sleep(0.1)
                time.sleep(0.5)
            else:
                stacks = STACKS / f"replica-{label}.stacks"
                run = functools.partial(gen.run, port_a, reqs, connections, duration)
                res = record(b.pid, duration, stacks, run)
            entries = _version(port_b, model) - v0
            cpu_us = (cpu_seconds(b.pid) - b0) / max(1, entries) * 1e6
            title = (
                f"replica B applying A's /update {name} entries, {label}, code {commit}: A, B "
                f"(one uvicorn worker each) and redis-server on core {server_cpu}, wrk "
                f"-c{connections} on A from core {wrk_cpu}, {duration:g} s; A {res.rps:,.0f} "
                f"req/s, B applied {entries} entries, B's CPU {cpu_us:.0f} us/entry (under "
                f"{tool}; `bench/update_workers.py --profile {label}`)"
            )
            suffix = "-cprofile" if tool == "cProfile" else ""
            out = PROFILES / f"replica-{label}{suffix}.txt"
            text = cprofile_summary(stats, title) if tool == "cProfile" else summary(stacks, title)
            out.write_text(text)
            print(f"wrote {out}: {res.rps:,.0f} req/s, B {cpu_us:.0f} us CPU/entry", flush=True)
        finally:
            for p in procs:
                stop_process(p)
            redis.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline", action="append", default=[], help="a git ref to measure too")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--connections", type=int, default=32, help="for --workers 1 vs 2")
    ap.add_argument("--scenarios", default="dense x100", help="replica apply scenarios")
    ap.add_argument("--skip", choices=("replica", "workers"), action="append", default=[])
    ap.add_argument("--profile", metavar="LABEL", help="only profile the replica (see above)")
    args = ap.parse_args()
    if find_wrk() is None:
        sys.exit("wrk not found: apt-get install -y wrk")
    if args.profile:
        profile_replica(args.profile, args.duration, 16)
        return
    wanted = {s.strip() for s in args.scenarios.split(",")}
    scenarios = [s for s in SCENARIOS if s[0] in wanted]
    codes = baseline_codes(args.baseline, prefix="bench-workers-")
    replica: list[dict[str, Any]] = []
    workers: list[dict[str, Any]] = []
    try:
        if "replica" not in args.skip:
            replica = replica_apply(codes, scenarios, args.duration, 16)
        if "workers" not in args.skip:
            workers = workers_compare(codes, args.rounds, args.duration, args.connections)
    finally:
        remove_exports(codes)
    if replica:
        print_table(
            "Replica apply: CPU to serve an /update (worker A) vs to apply its entry on "
            "another worker (B); goal apply/serve <= 0.25 for 100 examples",
            ["code", "scenario", "serve us/req", "apply us/entry", "apply / serve"],
            [[r["code"], r["scenario"], f"{r['serve_cpu_us_per_request']:.0f}",
              f"{r['apply_cpu_us_per_entry']:.0f}", f"{r['apply_over_serve']:.2f}"]
             for r in replica],
        )  # fmt: skip
    if workers:
        print_table(
            f"/update dense x100, wrk {args.connections} connections, nothing pinned: one "
            "uvicorn worker vs two (goal: two >= 1.2x one)",
            ["code", "workers", "req/s", "examples/s", "CPU us/req", "x one worker"],
            [[r["code"], r["workers"], fmt_rate(r["req_per_s"]), fmt_rate(r["req_per_s"] * 100),
              f"{r['cpu_us_per_request']:.0f}", f"{r['over_one_worker']:.2f}x"]
             for r in sorted(workers, key=lambda r: (r["code"] != CURRENT, r["code"],
                                                     r["workers"]))],
        )  # fmt: skip
    path = write_results("update_workers", {"settings": vars(args), "replica_apply": replica,
                                            "workers": workers})  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
