"""``/update`` throughput, this code next to earlier commits in the same run, and what
the dry run costs next to the apply.

1. **In process** (no HTTP, no store): per batch, the parse of the body
   (``parse_update_raw``), the dry run (``check_update``: decode + the one-call kernel
   of ``learners.linear._dry_run_kernels``), the dry run as it was before that kernel
   (the twin classifier, still the path for full covariance and for batches that bring
   new labels: ``dry_run._first_nonfinite_row_twin``), and the apply (``apply``:
   decode + ``update`` + feature names). The dry run's cost is given as a fraction of
   the apply's. Best of ``--repeats`` timings of ``--calls`` calls each.
2. **Over HTTP**: one uvicorn worker per code (this tree, and each ``--baseline REF``,
   exported with ``git archive`` into a temp dir; its numba kernels compile cold
   once), each on its own private redis-server (``appendonly yes``, ``everysec``), an
   AROW model over 28 dense features (``bench/http.py``'s update scenarios) and a
   2**20-dim hashed one with named features. ``/update`` with 1, 100 and 1000 dense
   examples per request and 100 hashed ones; ``--connections`` keep-alive connections
   (``bench/_loadgen.py``), ``--duration`` s per scenario after a 1 s warm-up, the
   codes and scenarios interleaved over ``--rounds`` rounds, the best round kept
   (every round in the JSON). Besides wall-clock examples/s: the server process's CPU
   time per request (``/proc/<pid>/stat``), which other load on a shared machine
   disturbs far less.

``--load wrk``: the HTTP part with wrk pinned to one core and the servers (with their
redis-servers) to the other. ``--profile LABEL`` (``--cprofile``): only a profile of this
tree's server under each scenario's load, to ``bench/profiles/LABEL-<scenario>.txt``.

    .venv/bin/python bench/update_path.py --baseline 8ff78fe --baseline 65016d5 --duration 4
    .venv/bin/python bench/update_path.py --no-http     # the in-process part only
    .venv/bin/python bench/update_path.py --load wrk --baseline 24642f3 --duration 5

JSON: ``bench/results/update_path.json``.
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
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._baseline import (  # noqa: E402
    baseline_codes,
    cpu_seconds,
    learnserve_args,
    remove_exports,
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
from bench.http import ASYNCIO, LoadGen, load, named_rows, rows, summarise  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

REPO = _HERE.parent
HOST = "127.0.0.1"
DENSE = {"algorithm": "arow", "features": {"kind": "dense", "dim": 28}}
HASHED = {"algorithm": "arow", "features": {"kind": "hashed", "bits": 20}}
# (name, model, examples per request, distinct bodies cycled)
SCENARIOS = [("dense x1", "dense", 1, 256), ("dense x100", "dense", 100, 64),
             ("dense x1000", "dense", 1000, 8), ("hashed x100", "hashed", 100, 64)]  # fmt: skip


def bodies(model: str, n: int, count: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    make = rows if model == "dense" else named_rows
    return [json.dumps({"model": model, "examples": make(rng, n)}).encode() for _ in range(count)]


# ----------------------------------------------------------------------- in process


def in_process(calls: int, repeats: int) -> list[dict[str, Any]]:
    from service.models.linear import LinearAdapter
    from service.settings import Settings

    settings = Settings()
    out = []
    for name, model, n, count in SCENARIOS:
        config = LinearAdapter.normalize_config(DENSE if model == "dense" else HASHED, settings)
        ad = LinearAdapter.create(config)
        raw = bodies(model, n, min(count, 16))
        for b in raw:  # learn every label and feature name first: the steady state
            ad.apply(_parsed(ad, b, settings))
        k = max(1, calls // n)
        us = {
            part: min(timeit.repeat(fn, number=k, repeat=repeats)) / k * 1e6
            for part, fn in _parts(ad, raw[0], _parsed(ad, raw[0], settings), settings).items()
        }
        res = {"scenario": name, "examples": n, "calls": k, "us": us}
        res["dry_run_over_apply"] = us["dry_run"] / us["apply"]
        res["dry_run_twin_over_apply"] = us["dry_run_twin"] / us["apply"]
        # what the dry run adds to /update's work: apply reuses the check's decode
        res["dry_run_added_over_apply"] = (us["check_then_apply"] - us["apply"]) / us["apply"]
        out.append(res)
    return out


def _parsed(ad: Any, body: bytes, settings: Any) -> bytes:
    fast = ad.parse_update_raw(body, settings)
    assert fast is not None, "the fast parser refused the body"
    return bytes(fast.payload)


def _parts(ad: Any, body: bytes, payload: bytes, settings: Any) -> dict[str, Any]:
    """The timed calls on one adapter, one body and its log entry."""
    from learners.linear.dry_run import _first_nonfinite_row_twin
    from service.models.example_weights import entry_weights
    from service.models.payload import decode_payload

    def twin() -> None:  # the dry run before the kernel, from the same entry
        batch, meta = decode_payload(payload, ad.spec.dim)
        _, ix, vs = ad.model._check_batch(batch)
        _first_nonfinite_row_twin(ad.model, batch, ix, vs, meta["y"], entry_weights(meta))

    def check_then_apply() -> None:  # as /update runs them (apply reuses the decode)
        ad.check_update(payload)
        ad.apply(payload)

    return {
        "parse": lambda: ad.parse_update_raw(body, settings),
        "dry_run": lambda: ad.check_update(payload),
        "dry_run_twin": twin,
        "apply": lambda: ad.apply(payload),  # decodes: no check cached it
        "check_then_apply": check_then_apply,
    }


# ----------------------------------------------------------------------- over HTTP


def start_server(
    code: Path,
    cpus: set[int] | None = None,
    workers: int = 1,
    models: bool = True,
    cprofile: Path | None = None,
    redis: RedisServer | None = None,
) -> tuple[Any, RedisServer, int]:
    """A learnserve from ``code`` on its own redis-server (or ``redis``; both pinned to
    ``cpus`` if given), the scenarios' models created and their update path compiled;
    ``cprofile``: run under ``bench._profile.serve_profiled`` writing its stats there."""
    if redis is None:
        server = find_redis_server()
        if server is None:
            sys.exit("redis-server not found: install it or set LEARNSERVE_REDIS_SERVER")
        redis = RedisServer(server, Path(tempfile.mkdtemp(prefix="bench-update-redis-")))
        redis.start()
        if cpus is not None and redis.proc is not None:
            pin(redis.proc.pid, cpus)
    port = free_port()
    env = {
        "PYTHONPATH": str(code),
        "LEARNSERVE_REDIS_URL": redis.url,
        "LEARNSERVE_LOG_LEVEL": "warning",
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1000",  # the default: the log is trimmed
        "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "3600",
    }
    # Which code runs: -P keeps the current directory off sys.path, and --app-dir
    # replaces uvicorn's default, which puts the current directory first (a baseline
    # started from a checkout would otherwise run the checkout's code).
    args = learnserve_args(code, port, HOST, workers)
    if cprofile is not None:
        i = args.index("uvicorn")
        args[i - 1 : i + 1] = ["-m", "bench._profile", str(cprofile)]
    proc = start_service(args, env, port, timeout=900, health_path="/readyz")
    if cpus is not None:
        pin(proc.pid, cpus)
    if models:
        set_up(port)
    return proc, redis, port


def set_up(port: int) -> None:
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=600) as c:
        for model, config in (("dense", DENSE), ("hashed", HASHED)):
            r = c.put(f"/models/{model}", json=config)
            assert r.status_code in (200, 201), r.text
            for b in bodies(model, 100, 10, seed=1):  # compiles the update path
                r = c.post("/update", content=b, headers={"content-type": "application/json"})
                assert r.status_code == 200, r.text


def timed_load(
    proc: Any, port: int, reqs: list[bytes], connections: int, duration: float, gen: LoadGen
) -> tuple[Any, float]:
    """The load (after its warm-up) and the server's CPU seconds over the timed run."""
    c0: list[float] = []
    res = load(port, reqs, connections, duration, gen, lambda: c0.append(cpu_seconds(proc.pid)))
    return res, cpu_seconds(proc.pid) - c0[0]


def over_http(
    codes: dict[str, Path],
    rounds: int,
    duration: float,
    connections: int,
    gen: LoadGen = ASYNCIO,
    cpus: set[int] | None = None,
) -> list[dict[str, Any]]:
    servers: dict[str, tuple[Any, RedisServer, int]] = {}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for label, code in codes.items():
            print(f"starting {label} ...", flush=True)
            servers[label] = start_server(code, cpus)
        reqs = {
            name: [build_request("POST", "/update", b) for b in bodies(model, n, count)]
            for name, model, n, count in SCENARIOS
        }
        for rnd in range(rounds):
            for name, _, n, _ in SCENARIOS:
                for label, (proc, _, port) in servers.items():
                    res, cpu = timed_load(proc, port, reqs[name], connections, duration, gen)
                    s = summarise(name, res, n)
                    s.update(code=label, round=rnd)
                    total = res.requests  # the CPU counters cover the timed run only
                    s["server_cpu_us_per_request"] = cpu / total * 1e6 if total else None
                    runs.setdefault((label, name), []).append(s)
                    print(f"{label:>24} {name:<12} {s['examples_per_s']:>10,.0f} ex/s", flush=True)
    finally:
        for proc, redis, _ in servers.values():
            stop_process(proc)
            redis.stop()
    results = []
    for rs in runs.values():
        best = dict(max(rs, key=lambda r: r["req_per_s"]))
        best["examples_per_s_rounds"] = [r["examples_per_s"] for r in rs]
        best["server_cpu_us_per_request_rounds"] = [r["server_cpu_us_per_request"] for r in rs]
        cpus = [c for c in best["server_cpu_us_per_request_rounds"] if c]
        best["server_cpu_us_per_request_min"] = min(cpus) if cpus else None
        results.append(best)
    return results


PROFILES = _HERE / "profiles"
STACKS = _HERE / "results" / "profiles"


def profile(label: str, duration: float, connections: int, cprofile: bool) -> list[Path]:
    """py-spy (or cProfile on the loop thread's CPU clock) over this tree's server
    (pinned with its redis-server to one core, wrk on the other) under each scenario's
    steady load: ``bench/profiles/<label>-<scenario>.txt`` (the raw stacks or stats in
    ``bench/results/profiles/``, git-ignored)."""
    import signal
    import subprocess

    wrk_cpu, server_cpu = two_cores()
    gen = LoadGen(wrk=True, cpu=wrk_cpu)
    git = ["git", "-C", str(REPO), "describe", "--always", "--dirty"]
    commit = subprocess.run(git, capture_output=True, text=True).stdout.strip()
    PROFILES.mkdir(exist_ok=True)
    STACKS.mkdir(parents=True, exist_ok=True)
    written = []
    stats = STACKS / f"{label}.prof"
    proc, redis, port = start_server(REPO, {server_cpu}, cprofile=stats if cprofile else None)
    try:
        for name, model, n, count in SCENARIOS:
            reqs = [build_request("POST", "/update", b) for b in bodies(model, n, count)]
            gen.run(port, reqs, connections, 2.0)  # warm-up
            slug = name.replace(" ", "-")
            stacks = STACKS / f"{label}-{slug}.stacks"  # git-ignored: raw, large
            c0 = cpu_seconds(proc.pid)
            if cprofile:
                stats.unlink(missing_ok=True)
                proc.send_signal(getattr(signal, CPROFILE_START))
                res = gen.run(port, reqs, connections, duration)
                proc.send_signal(getattr(signal, CPROFILE_STOP))
                for _ in range(100):
                    if stats.exists():
                        break
                    time.sleep(0.1)
            else:
                run = functools.partial(gen.run, port, reqs, connections, duration)
                res = record(proc.pid, duration, stacks, run)
            cpu_us = (cpu_seconds(proc.pid) - c0) / max(1, res.requests) * 1e6
            title = (
                f"/update {name} ({n} per request), {label}, code {commit}: one uvicorn worker "
                f"+ redis-server (AOF everysec) on core {server_cpu}, wrk -c{connections} on "
                f"core {wrk_cpu}, {duration:g} s; {res.rps:,.0f} req/s, server CPU "
                f"{cpu_us:.0f} us/request (under {'cProfile' if cprofile else 'py-spy'}; "
                f"`bench/update_path.py --profile {label}{' --cprofile' if cprofile else ''}`)"
            )
            out = PROFILES / f"{label}-{slug}{'-cprofile' if cprofile else ''}.txt"
            time.sleep(0.5)  # the dump finished
            out.write_text(cprofile_summary(stats, title) if cprofile else summary(stacks, title))
            written.append(out)
            print(f"wrote {out}: {res.rps:,.0f} req/s, {cpu_us:.0f} us CPU/request", flush=True)
    finally:
        stop_process(proc)
        redis.stop()
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline", action="append", default=[], help="a git ref to measure too")
    ap.add_argument("--no-http", action="store_true", help="the in-process part only")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per scenario per round")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--calls", type=int, default=20000, help="examples per in-process timing")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scenarios", help="comma-separated names (default: all), e.g. 'dense x100'")
    ap.add_argument(
        "--load", choices=("asyncio", "wrk"), default="asyncio",
        help="over HTTP: the asyncio generator, or wrk pinned to one core and the servers "
        "(and their redis-servers) to another",
    )  # fmt: skip
    ap.add_argument(
        "--profile", metavar="LABEL",
        help="only profile this tree's server (py-spy) under each scenario's load, "
        "--duration s each: bench/profiles/LABEL-<scenario>.txt",
    )  # fmt: skip
    ap.add_argument("--cprofile", action="store_true", help="--profile with cProfile")
    args = ap.parse_args()
    if args.scenarios:
        wanted = {s.strip() for s in args.scenarios.split(",")}
        SCENARIOS[:] = [s for s in SCENARIOS if s[0] in wanted]
    if (args.load == "wrk" or args.profile) and find_wrk() is None:
        sys.exit("wrk not found: apt-get install -y wrk")
    if args.profile:
        profile(args.profile, args.duration, args.connections, args.cprofile)
        return
    gen, cpus = ASYNCIO, None
    if args.load == "wrk":
        wrk_cpu, server_cpu = two_cores()
        gen, cpus = LoadGen(wrk=True, cpu=wrk_cpu), {server_cpu}

    parts = in_process(args.calls, args.repeats)
    print_table(
        "In process: microseconds per /update batch (best of repeats); dry run / apply",
        ["scenario", "parse", "dry run", "dry run (twin, before)", "apply",
         "check+apply", "dry/apply", "added/apply", "twin/apply"],
        [[p["scenario"], *(f"{p['us'][k]:.1f}" for k in
          ("parse", "dry_run", "dry_run_twin", "apply", "check_then_apply")),
          f"{p['dry_run_over_apply']:.2f}", f"{p['dry_run_added_over_apply']:.2f}",
          f"{p['dry_run_twin_over_apply']:.2f}"]
         for p in parts],
    )  # fmt: skip
    http: list[dict[str, Any]] = []
    if not args.no_http:
        codes = baseline_codes(args.baseline, prefix="bench-update-")
        try:
            http = over_http(codes, args.rounds, args.duration, args.connections, gen, cpus)
        finally:
            remove_exports(codes)
        cur = {r["scenario"]: r for r in http if r["code"] == "current"}
        for r in http:
            base = cur[r["scenario"]]
            r["current_over_this"] = base["examples_per_s"] / r["examples_per_s"]
            cpu, cpu_cur = r["server_cpu_us_per_request_min"], base["server_cpu_us_per_request_min"]
            r["cpu_current_over_this"] = cpu_cur / cpu if cpu and cpu_cur else None
        print_table(
            f"/update over HTTP ({args.load}): {args.connections} connections, best of "
            f"{args.rounds} rounds of {args.duration:g} s (server CPU: best round)",
            ["code", "scenario", "examples/s", "req/s", "p50 ms", "server CPU us/req",
             "current / this", "CPU current / this"],
            [[r["code"], r["scenario"], fmt_rate(r["examples_per_s"]), fmt_rate(r["req_per_s"]),
              f"{r['p50_ms']:.2f}", f"{r['server_cpu_us_per_request_min'] or 0:.0f}",
              f"{r['current_over_this']:.2f}x", f"{r['cpu_current_over_this'] or 0:.2f}x"]
             for r in sorted(http, key=lambda r: (r["scenario"], r["code"]))],
        )  # fmt: skip
    settings = {k: v for k, v in vars(args).items()}
    path = write_results("update_path", {"settings": settings, "in_process": parts, "http": http})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
