"""HTTP service benchmark (issue 3): learnserve next to the ceilings uvicorn allows.

Servers (each one uvicorn process, 1 worker, access log off, started by this script):

- ``bare``: a raw ASGI callable answering a fixed JSON — the ceiling.
- ``noop``: FastAPI with one ``POST /predict`` route that reads the body and answers
  a fixed JSON — what any FastAPI service pays before doing work.
- ``learnserve`` on a private redis-server (``appendonly yes``, ``appendfsync everysec``):
  ``/predict`` 1 instance, ``/update`` 1 example, ``/update`` 100 and 1000 examples
  (an AROW model over 28 dense features, HIGGS-shaped synthetic data).

Load: a closed-loop asyncio HTTP/1.1 generator (``bench/_loadgen.py``), ``--connections``
keep-alive connections, ``--duration`` seconds per scenario after a 1 s warm-up, the
scenarios interleaved over ``--rounds`` rounds with the servers running side by side;
the best round of each is reported (all rounds are in the JSON). The generator runs on
the same machine as the servers, so absolute req/s depend on the free cores; the ratios
(measured in the same run) are the comparable figures. Latency percentiles are per
request as seen by the client.

Earlier commits side by side (``--baseline REF``, repeatable): each ref is exported with
``git archive`` into a temp dir (``bench/_baseline.py``, shared with ``bench/update_path.py``)
and served by its own uvicorn worker (``-P --app-dir <tree>``: the baseline runs its own
code; its numba kernels compile cold once, at start-up and in an untimed request down each
path) on its own private redis-server, next to this tree's. Every learnserve scenario runs
against every code, the codes taking turns within each scenario (who goes first rotates
per round), so bare ASGI and no-op FastAPI, measured in the same rounds, give each code's
ratio to the ceiling; the table and the JSON (``side_by_side``) show each code's req/s and
ratio together, and ``current / <ref>``. Only settings every tree knows are set. The
checkpoint stall is measured on this tree only.

``--load wrk`` (issue 21): the load comes from ``wrk`` (``bench/_wrk.py``: a generated Lua
script cycles the same bodies) pinned to one core, and every server with its
redis-server to another, so the generator takes nothing from the servers' core. The
ratios are read the same way; server CPU is counted over the timed run only (uvicorn's
workers included), the redis-server's too. ``--workers N``: N uvicorn workers per
learnserve; ``--no-pin``; ``--checkpoints 0`` skips the stall.

Checkpoint stall: a 2**20-dimensional AROW model (hashed features, ~16 MB of state) is
checkpointed with ``POST /models/big/checkpoint`` while a probe sends ``GET /healthz``
back to back on another connection. The probe's worst latency during the checkpoint,
next to its worst latency without one, is the event-loop stall a checkpoint causes.

    .venv/bin/python bench/http.py                 # ~2 min; JSON to bench/results/http.json
    .venv/bin/python bench/http.py --duration 1 --rounds 1    # quicker
    .venv/bin/python bench/http.py --baseline b395f0d --out bench/results/http-b395f0d.json
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and this file
# (http.py) would shadow the standard library's ``http`` package: put the repo
# root there instead, before anything imports ``http``.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._baseline import (  # noqa: E402
    CURRENT,
    REPO,
    baseline_codes,
    code_env,
    cpu_seconds,
    imported_from,
    learnserve_args,
    remove_exports,
    short_label,
    tree_cpu_seconds,
)
from bench._common import fmt_rate, fmt_ratio, print_table, write_results  # noqa: E402
from bench._loadgen import LoadResult, build_request, run_load  # noqa: E402
from bench._stall import checkpoint_stall, print_stall  # noqa: E402
from bench._wrk import find_wrk, pin, two_cores, wrk_load  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

DIM = 28
HOST = "127.0.0.1"


def uvicorn_args(target: str, port: int, factory: bool = False) -> list[str]:
    args = [sys.executable, "-m", "uvicorn", target, "--host", HOST, "--port", str(port)]
    args += ["--log-level", "warning", "--no-access-log"]
    return args + (["--factory"] if factory else [])


def rows(rng: np.random.Generator, n: int, decimals: int | None = 5) -> list[dict[str, Any]]:
    """``decimals=None``: full-precision doubles (``repr``, up to 17 digits), what a
    client sending ``numpy.tolist()`` output writes."""
    X = rng.normal(size=(n, DIM))
    X = X if decimals is None else X.round(decimals)
    w = np.linspace(-1, 1, DIM)
    y = np.where(X @ w + rng.normal(scale=0.5, size=n) > 0, "s", "b")
    return [{"x": x, "y": str(t)} for x, t in zip(X.tolist(), y.tolist(), strict=True)]


def named_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    """Examples as the README's: named features, two categorical, ~14 per example."""
    jobs, towns = ["clerk", "exec", "tech", "sales"], [f"town{k}" for k in range(50)]
    out = []
    for _ in range(n):
        x: dict[str, Any] = {"age": int(rng.integers(18, 90))}
        x["job"] = jobs[int(rng.integers(0, 4))]
        x["town"] = towns[int(rng.integers(0, 50))]
        for k in rng.choice(1000, 11, replace=False).tolist():
            x[f"w{k}"] = round(float(rng.random()), 4)
        out.append({"x": x, "y": "+1" if rng.random() < 0.5 else "-1"})
    return out


@dataclass(frozen=True)
class LoadGen:
    """Where the load comes from: the asyncio generator in this process (``wrk=False``),
    or ``wrk`` on core ``cpu`` (None: not pinned)."""

    wrk: bool = False
    cpu: int | None = None
    threads: int = 1

    def run(
        self, port: int, requests: list[bytes], connections: int, duration: float
    ) -> LoadResult:
        if self.wrk:
            return wrk_load(HOST, port, requests, connections, duration, self.cpu, self.threads)
        return asyncio.run(run_load(HOST, port, requests, connections, duration))


ASYNCIO = LoadGen()


def load(
    port: int,
    requests: list[bytes],
    connections: int,
    duration: float,
    gen: LoadGen = ASYNCIO,
    timed: Callable[[], None] | None = None,
) -> LoadResult:
    """A warm-up of ``min(1, duration)`` s, then the timed run; ``timed()`` is called in
    between (to read CPU counters over the timed run only)."""
    gen.run(port, requests, connections, min(1.0, duration))  # warm-up
    if timed is not None:
        timed()
    return gen.run(port, requests, connections, duration)


def summarise(name: str, res: LoadResult, examples_per_request: int) -> dict[str, Any]:
    return {
        "scenario": name,
        "requests": res.requests,
        "seconds": res.seconds,
        "req_per_s": res.rps,
        "examples_per_request": examples_per_request,
        "examples_per_s": res.rps * examples_per_request,
        "p50_ms": res.percentile(0.50) * 1e3,
        "p99_ms": res.percentile(0.99) * 1e3,
        "statuses": {str(k): v for k, v in res.statuses.items()},
        "errors": res.errors,
    }


PREDICT = "learnserve /predict (1 instance)"
DENSE_MODEL = {"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}}
HASHED_MODEL = {"algorithm": "arow", "features": {"kind": "hashed", "bits": 20}}
BARE, NOOP = "bare ASGI", "no-op FastAPI"


def start_learnserve(code: Path, env: dict[str, str], workers: int = 1) -> tuple[Any, int]:
    """uvicorn serving ``service.app:factory`` from ``code`` (this tree or an exported
    baseline); a long timeout, as a baseline's kernels compile cold."""
    port = free_port()
    args = learnserve_args(code, port, HOST, workers)
    proc = start_service(args, {**env, **code_env(code)}, port, timeout=900, health_path="/readyz")
    return proc, port


def cpu_now(pids: list[int]) -> list[float]:
    """CPU seconds of a server and its children (uvicorn's workers), then of its
    redis-server alone (an AOF rewrite is a child that comes and goes)."""
    return [tree_cpu_seconds(pids[0]), *(cpu_seconds(q) for q in pids[1:])]


def put_model(c: httpx.Client, name: str, body: dict[str, Any]) -> httpx.Response:
    """PUT, again while the kernels the model runs compile (503 kernels_compiling)."""
    deadline = time.monotonic() + 1800
    while True:
        r = c.put(f"/models/{name}", json=body)
        if r.status_code != 503 or time.monotonic() > deadline:
            return r
        time.sleep(float(r.headers.get("retry-after", "1")))


def set_up_models(port: int, warm_dense: list[dict[str, Any]]) -> None:
    """The models the scenarios use, and one request down each timed path (a baseline's
    numba kernels compile on first use: not inside a timed round)."""
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=600) as c:
        r = put_model(c, "bench", DENSE_MODEL)
        assert r.status_code in (200, 201), r.text
        assert c.post("/update", json={"model": "bench", "examples": warm_dense}).is_success
        r = put_model(c, "hashed", HASHED_MODEL)
        assert r.status_code in (200, 201), r.text
        r = c.post("/predict", json={"model": "bench", "instances": [{"x": warm_dense[0]["x"]}]})
        assert r.status_code == 200, r.text
        hashed = named_rows(np.random.default_rng(1), 100)
        r = c.post("/update", json={"model": "hashed", "examples": hashed})
        assert r.status_code == 200, r.text


def output_path(out: str | None) -> tuple[str, Path | None]:
    """``--out`` as write_results' (name, directory): ``x/y.json`` -> ("y", x)."""
    if not out:
        return "http", None
    p = Path(out).resolve()
    return p.name.removesuffix(".json"), p.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per scenario per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; best one kept")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--checkpoints", type=int, default=3, help="checkpoint-stall repeats")
    ap.add_argument(
        "--baseline", action="append", default=[], metavar="REF",
        help="a git ref whose learnserve is measured too, in the same rounds (repeatable)",
    )  # fmt: skip
    ap.add_argument("--out", help="JSON path (default: bench/results/http.json)")
    ap.add_argument(
        "--load", choices=("asyncio", "wrk"), default="asyncio",
        help="the load generator: asyncio in this process, or wrk pinned to one core and "
        "every server (and its redis-server) pinned to another",
    )  # fmt: skip
    ap.add_argument("--no-pin", action="store_true", help="--load wrk without pinning")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn workers per learnserve")
    args = ap.parse_args()
    out_name, out_dir = output_path(args.out)
    gen, server_cpus = ASYNCIO, None
    if args.load == "wrk":
        if find_wrk() is None:
            sys.exit("wrk not found: apt-get install -y wrk")
        wrk_cpu, server_cpu = (None, None) if args.no_pin else two_cores()
        gen = LoadGen(wrk=True, cpu=wrk_cpu)
        server_cpus = None if server_cpu is None else {server_cpu}

    def pinned(proc: Any) -> Any:
        if server_cpus is not None:
            pin(proc.pid, server_cpus)
        return proc

    rng = np.random.default_rng(0)
    predict_bodies = [
        json.dumps({"model": "bench", "instances": [{"x": r["x"]}]}).encode() for r in rows(rng, 64)
    ]
    predict_reqs = [build_request("POST", "/predict", b) for b in predict_bodies]
    warm_dense = rows(rng, 1000)  # learnt by every code before the rounds

    redis_bin = find_redis_server()
    if redis_bin is None:
        sys.exit("redis-server not found: install it or set LEARNSERVE_REDIS_SERVER")
    # Only settings every measured tree knows (an older one may lack newer ones).
    env = {
        "LEARNSERVE_LOG_LEVEL": "warning",
        # Checkpoints every 1000 updates, the default: the log is trimmed behind them as in
        # production (without, the log grows by GBs over the run and Redis' AOF rewrites
        # of it take a core from every later scenario). No timed ones: the stall
        # measurement below triggers its own.
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1000",
        "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "3600",
        "LEARNSERVE_LOOP_LAG_INTERVAL_SECONDS": "0.001",  # checkpoint_stall reads the lag
    }
    # All servers run side by side and the scenarios (and, within one, the codes) are
    # interleaved round by round, so a burst of load from elsewhere on the machine hits
    # them alike; the best round of each scenario is reported (the median is in the JSON).
    codes = baseline_codes(args.baseline)
    procs: list[Any] = []
    redises: list[RedisServer] = []
    temp_dirs: list[str] = []
    servers: dict[str, tuple[Any, int]] = {}  # code label -> (process, port)
    server_redis: dict[int, RedisServer] = {}  # a learnserve's pid -> its redis-server
    stall: dict[str, Any] = {}
    stall_sqlite: dict[str, Any] = {}
    rounds: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    try:
        ceilings: dict[str, tuple[Any, int]] = {}
        for ceiling, app, health in ((BARE, "bare", "/"), (NOOP, "noop", "/healthz")):
            p = free_port()
            proc = start_service(uvicorn_args(f"bench._http_apps:{app}", p), None, p,
                                 health_path=health)  # fmt: skip
            procs.append(pinned(proc))
            ceilings[ceiling] = (proc, p)
        for label, code in codes.items():
            print(f"starting learnserve ({label}) ...", flush=True)
            redis = RedisServer(redis_bin, Path(tempfile.mkdtemp(prefix="bench-redis-")))
            redises.append(redis)
            redis.start()
            pinned(redis.proc)
            proc, p = start_learnserve(
                code, {**env, "LEARNSERVE_REDIS_URL": redis.url}, args.workers
            )
            procs.append(pinned(proc))
            servers[label] = (proc, p)
            server_redis[proc.pid] = redis
            if label != CURRENT and imported_from(code) is False:
                raise RuntimeError(f"{label}: the server did not import service from {code}")
            set_up_models(p, warm_dense)
        # (name, target: a ceiling's name or None for every learnserve, requests, n)
        scenarios: list[tuple[str, str | None, list[bytes], int]] = [
            (BARE, BARE, predict_reqs, 1),
            (NOOP, NOOP, predict_reqs, 1),
            (PREDICT, None, predict_reqs, 1),
        ]
        for n, count in ((1, 256), (100, 64), (1000, 8)):
            bodies = [
                json.dumps({"model": "bench", "examples": rows(rng, n)}).encode()
                for _ in range(count)
            ]
            reqs = [build_request("POST", "/update", b) for b in bodies]
            scenarios.append((f"learnserve /update ({n} per request)", None, reqs, n))
        full = [
            json.dumps({"model": "bench", "examples": rows(rng, 100, None)}).encode()
            for _ in range(64)
        ]
        reqs = [build_request("POST", "/update", b) for b in full]
        scenarios.append(("learnserve /update (100, full-precision floats)", None, reqs, 100))
        hashed = [
            json.dumps({"model": "hashed", "examples": named_rows(rng, 100)}).encode()
            for _ in range(64)
        ]
        reqs = [build_request("POST", "/update", b) for b in hashed]
        scenarios.append(("learnserve /update (100, hashed named features)", None, reqs, 100))
        labels = list(servers)
        for rnd in range(args.rounds):
            order = labels[rnd % len(labels) :] + labels[: rnd % len(labels)]  # who goes first
            for name, target, reqs, n in scenarios:
                runs = [(None, *ceilings[target])] if target else [(c, *servers[c]) for c in order]
                for who, proc, p in runs:
                    rs = server_redis.get(proc.pid)
                    pids = [proc.pid] + ([rs.proc.pid] if rs is not None and rs.proc else [])
                    c0: list[float] = []

                    def timed(pids: list[int] = pids, c0: list[float] = c0) -> None:
                        c0.extend(cpu_now(pids))

                    res = load(p, reqs, args.connections, args.duration, gen, timed)
                    cpu = [c1 - c for c1, c in zip(cpu_now(pids), c0, strict=True)]
                    s = summarise(name, res, n)
                    s.update(code=who, round=rnd)
                    total = res.requests  # the CPU counters cover the timed run only
                    s["server_cpu_us_per_request"] = cpu[0] / total * 1e6 if total else None
                    if len(cpu) > 1:
                        s["redis_cpu_us_per_request"] = cpu[1] / total * 1e6 if total else None
                    rounds.setdefault((name, who), []).append(s)
                    if len(labels) > 1:
                        print(f"round {rnd + 1} {who or '':>18} {name:<48} "
                              f"{s['req_per_s']:>9,.0f} req/s", flush=True)  # fmt: skip
        time.sleep(3.0)  # let the checkpoints the last scenarios triggered finish
        if args.checkpoints > 0:
            stall = checkpoint_stall(servers[CURRENT][1], args.checkpoints)
        # The same on the embedded store (SQLite under a temporary --data-dir), this tree
        # only, started only now and alone, so it never competes with the other servers.
        for proc in procs:
            stop_process(proc)
        procs.clear()
        if args.checkpoints > 0:
            temp_dirs.append(tempfile.mkdtemp(prefix="bench-sqlite-"))
            sqlite_env = {**env, "LEARNSERVE_DATA_DIR": temp_dirs[-1]}
            proc, sqlite_port = start_learnserve(REPO, sqlite_env)
            procs.append(proc)
            stall_sqlite = checkpoint_stall(sqlite_port, args.checkpoints)
    finally:
        for proc in procs:
            stop_process(proc)
        for redis in redises:
            redis.stop()
        for d in [r.dir for r in redises] + [Path(d) for d in temp_dirs]:
            shutil.rmtree(d, ignore_errors=True)
        remove_exports(codes)

    results = []
    for rs in rounds.values():
        best = dict(max(rs, key=lambda r: r["req_per_s"]))
        best["req_per_s_median"] = float(np.median([r["req_per_s"] for r in rs]))
        best["req_per_s_rounds"] = [r["req_per_s"] for r in rs]
        for what in ("server", "redis"):
            cpus = [r.get(f"{what}_cpu_us_per_request") for r in rs]
            best[f"{what}_cpu_us_per_request_rounds"] = cpus
            best[f"{what}_cpu_us_per_request_min"] = min((c for c in cpus if c), default=None)
        results.append(best)
    by = {(r["scenario"], r["code"]): r for r in results}
    bare, noop = by[(BARE, None)], by[(NOOP, None)]

    def ratio(a: float, b: float) -> float | None:
        return a / b if b else None

    for r in results:
        if r["code"] is None:
            continue
        r["vs_bare_asgi"] = ratio(r["req_per_s"], bare["req_per_s"])
        # examples learnt per request the bare app answers (issue 21: >= 12 for 100 each)
        r["examples_per_bare_request"] = ratio(r["examples_per_s"], bare["req_per_s"])
        r["vs_noop_fastapi"] = ratio(r["req_per_s"], noop["req_per_s"])
        r["vs_bare_asgi_median"] = ratio(r["req_per_s_median"], bare["req_per_s_median"])
        r["current_over_this"] = ratio(by[(r["scenario"], CURRENT)]["req_per_s"], r["req_per_s"])
    noop_vs_bare = ratio(noop["req_per_s"], bare["req_per_s"])
    by_code = {
        label: {
            "predict_vs_bare_asgi": by[(PREDICT, label)]["vs_bare_asgi"],
            "predict_vs_noop_fastapi": by[(PREDICT, label)]["vs_noop_fastapi"],
        }
        for label in codes
    }
    ratios = {**by_code[CURRENT], "noop_fastapi_vs_bare_asgi": noop_vs_bare, "by_code": by_code}
    ls_names = [name for name, target, _, _ in scenarios if target is None]
    side_by_side = [
        {
            "scenario": name,
            "examples_per_request": by[(name, CURRENT)]["examples_per_request"],
            "codes": {
                label: {k: by[(name, label)][k] for k in (
                    "req_per_s", "req_per_s_median", "examples_per_s", "vs_bare_asgi",
                    "vs_noop_fastapi", "vs_bare_asgi_median", "current_over_this",
                    "examples_per_bare_request", "server_cpu_us_per_request_min",
                    "redis_cpu_us_per_request_min", "errors")}
                for label in codes
            },
        }
        for name in ls_names
    ]  # fmt: skip

    how = (
        "asyncio generator"
        if not gen.wrk
        else (
            "wrk"
            + (f" on core {gen.cpu}, servers on core {min(server_cpus)}" if server_cpus else "")
        )
    )
    print_table(
        f"HTTP ({how}, learnserve {args.workers} worker(s)): {args.connections} connections, "
        f"best of {args.rounds} interleaved rounds of {args.duration:g} s",
        ["scenario", "code", "req/s", "examples/s", "x bare", "ex / bare req", "p50 ms",
         "p99 ms", "server CPU us/req", "redis CPU us/req", "non-200"],
        [
            [r["scenario"], r["code"] or "-", fmt_rate(r["req_per_s"]),
             fmt_rate(r["examples_per_s"]), fmt_ratio(r.get("vs_bare_asgi")),
             f"{r.get('examples_per_bare_request') or 0:.1f}" if r["code"] else "-",
             f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}",
             f"{r['server_cpu_us_per_request_min'] or 0:.0f}",
             f"{r['redis_cpu_us_per_request_min'] or 0:.0f}" if r["code"] else "-", r["errors"]]
            for r in results
        ],
        caption="predict / bare ASGI = {}, predict / no-op FastAPI = {} "
        "(target >= 0.25x bare)".format(
            fmt_ratio(ratios["predict_vs_bare_asgi"]), fmt_ratio(ratios["predict_vs_noop_fastapi"])
        ),
    )  # fmt: skip
    if len(codes) > 1:
        short = {label: short_label(label) for label in codes}
        print_table(
            "learnserve, each code side by side: req/s (best round) and / bare ASGI "
            "(same run)",
            ["scenario"]
            + [f"{short[c]} {col}" for c in codes for col in ("req/s", "/bare")]
            + [f"current / {short[c]}" for c in codes if c != CURRENT],
            [
                [row["scenario"].removeprefix("learnserve ")]
                + [cell for c in codes for cell in (fmt_rate(row["codes"][c]["req_per_s"]),
                                                    fmt_ratio(row["codes"][c]["vs_bare_asgi"]))]
                + [fmt_ratio(row["codes"][c]["current_over_this"]) for c in codes if c != CURRENT]
                for row in side_by_side
            ],
            caption=f"bare ASGI {fmt_rate(bare['req_per_s'])} req/s, no-op FastAPI "
            f"{fmt_rate(noop['req_per_s'])} req/s ({fmt_ratio(noop_vs_bare)} bare)",
        )  # fmt: skip
    for store, st in (("Redis", stall), ("SQLite", stall_sqlite)):
        if st:
            print_stall(store, st)
    path = write_results(
        out_name,
        {
            "settings": {
                "duration_s": args.duration,
                "rounds": args.rounds,
                "connections": args.connections,
                "load": args.load,
                "wrk_cpu": gen.cpu,
                "server_cpus": sorted(server_cpus) if server_cpus else None,
                "workers": args.workers,
                "baselines": dict(zip(list(codes)[1:], args.baseline, strict=True)),
            },
            "codes": list(codes),
            "scenarios": results,
            "side_by_side": side_by_side,
            "ratios": ratios,
            "checkpoint_stall": stall,
            "checkpoint_stall_sqlite": stall_sqlite,
        },
        extra_packages=("fastapi", "starlette", "uvicorn", "orjson", "redis"),
        results_dir=out_dir,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
