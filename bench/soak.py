"""Soak (issue 20, defect 10): does a worker's memory settle under sustained mixed load?

Starts a private redis-server (AOF, ``everysec``) and ``uvicorn service.app:factory
--factory --workers 2`` (through ``bench/_soak_server.py``, which adds a SIGUSR1
snapshot handler to each worker), creates ``--models`` models (dense and hashed with
named features, the four online algorithms), then sends an open-loop mixed load at
``--rate`` requests/s for ``--minutes``:

- ``/update`` without a key, with a fresh ``Idempotency-Key``, and a keyed retry;
- ``/predict`` with ids (kept for delayed labels) and without;
- delayed labels: ``{"id", "y"}`` for ids predicted ``--label-delay`` s earlier, and
  some of them sent again (a retry answered as the first time).

Every ``--sample`` s (30) it reads each worker's RSS from ``/proc`` and Redis's
``used_memory``, and the window's requests, statuses and latencies; every
``--snapshot-every`` s (300) it signals the workers, which write their heap (gc object
counts by type, glibc malloc figures, tracemalloc's top lines and growth since the
baseline when ``--tracemalloc N`` traces N frames: the first snapshot starts tracing,
the second is the baseline). The JSON is written
at every sample (a run cut short still has its figures), with each worker's RSS slope
(least squares, MB/min) over the whole run after warm-up and over its last half.

``--costs`` measures instead the per-key costs for the capacity model: idempotency
records on Redis (``MEMORY USAGE`` of the model's hashes and ``used_memory``, per key)
and pending delayed labels on Redis and on SQLite (file pages per id).

    .venv/bin/python bench/soak.py --minutes 10 --tracemalloc 1 --out soak-10min
    nohup .venv/bin/python bench/soak.py --minutes 60 --out soak-60min &
    .venv/bin/python bench/soak.py --costs

JSON: ``bench/results/<--out>.json`` (default ``soak``; ``soak-costs`` for --costs).
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from bench._common import write_results  # noqa: E402
from bench._loadgen import build_request  # noqa: E402
from bench._soak_procs import last_snapshots, rss_kb, summarise, workers  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

REPO = _HERE.parent
HOST = "127.0.0.1"
ALGORITHMS = ("arow", "cw", "scw1", "pa")
DIM = 28
# (operation, weight): the share of requests of each kind
MIX = (("update", 30), ("update_keyed", 15), ("update_keyed_retry", 5), ("predict_ids", 25),
       ("predict", 5), ("label", 17), ("label_retry", 3))  # fmt: skip
JOBS, TOWNS = ("clerk", "exec", "tech", "sales"), tuple(f"town{k}" for k in range(50))


# ----------------------------------------------------------------------- the load
def model_names(n: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for k in range(n):
        algo = ALGORITHMS[k % len(ALGORITHMS)]
        if k % 3 == 2:
            out.append(
                (f"h{k:02d}", {"algorithm": algo, "features": {"kind": "hashed", "bits": 18}})
            )
        else:
            out.append(
                (f"d{k:02d}", {"algorithm": algo, "features": {"kind": "dense", "dim": DIM}})
            )
    return out


def x_of(rng: random.Random, name: str) -> Any:
    if name.startswith("d"):
        return [round(rng.gauss(0, 1), 4) for _ in range(DIM)]
    x: dict[str, Any] = {
        "age": rng.randint(18, 89),
        "job": rng.choice(JOBS),
        "town": rng.choice(TOWNS),
    }
    for k in rng.sample(range(1000), 11):
        x[f"w{k}"] = round(rng.random(), 4)
    return x


def y_of(rng: random.Random) -> str:
    return "s" if rng.random() < 0.5 else "b"


class Load:
    """Builds each request of the mix; remembers predicted ids for their labels."""

    def __init__(self, models: list[str], seed: int, label_delay: float, batch: int) -> None:
        self.rng = random.Random(seed)
        self.models = models
        self.delay = label_delay
        self.batch = batch
        self.ops = [op for op, w in MIX for _ in range(w)]
        self.pending: collections.deque[tuple[float, str, str]] = collections.deque()
        self.labelled: collections.deque[tuple[str, str, str]] = collections.deque(maxlen=2000)
        self.keyed: collections.deque[tuple[str, bytes]] = collections.deque(maxlen=200)

    def next(self) -> tuple[str, bytes, list[tuple[str, str]]]:
        """(operation, request bytes, ids predicted by it: (model, id))."""
        rng, op = self.rng, self.rng.choice(self.ops)
        m = rng.choice(self.models)
        if op == "label":
            now = time.monotonic()
            picked: dict[str, list[tuple[str, str]]] = {}
            while self.pending and self.pending[0][0] <= now - self.delay and len(picked) < 1:
                _, pm, pid = self.pending.popleft()
                picked.setdefault(pm, []).append((pid, y_of(rng)))
                while self.pending and self.pending[0][1] == pm and len(picked[pm]) < 4:
                    _, _, qid = self.pending.popleft()
                    picked[pm].append((qid, y_of(rng)))
            if picked:
                ((pm, pairs),) = picked.items()
                for i, y in pairs:
                    self.labelled.append((pm, i, y))
                body = {"model": pm, "examples": [{"id": i, "y": y} for i, y in pairs]}
                return op, _post("/update", body), []
            op = "predict"
        if op == "label_retry" and self.labelled:
            pm, i, y = rng.choice(self.labelled)
            return op, _post("/update", {"model": pm, "examples": [{"id": i, "y": y}]}), []
        if op == "update_keyed_retry" and self.keyed:
            key, body = rng.choice(self.keyed)
            return op, build_request("POST", "/update", body, {"Idempotency-Key": key}), []
        if op.startswith("predict") or op == "label_retry":
            ids = [uuid.uuid4().hex for _ in range(4)] if op == "predict_ids" else []
            inst = [{"x": x_of(rng, m)} for _ in range(4)]
            for d, i in zip(inst, ids, strict=False):
                d["id"] = i
            return op, _post("/predict", {"model": m, "instances": inst}), [(m, i) for i in ids]
        body = json.dumps(
            {
                "model": m,
                "examples": [{"x": x_of(rng, m), "y": y_of(rng)} for _ in range(self.batch)],
            }
        ).encode()
        if op.startswith("update_keyed"):
            key = uuid.uuid4().hex
            self.keyed.append((key, body))
            return (
                "update_keyed",
                build_request("POST", "/update", body, {"Idempotency-Key": key}),
                [],
            )
        return "update", build_request("POST", "/update", body), []

    def predicted(self, ids: list[tuple[str, str]]) -> None:
        now = time.monotonic()
        self.pending.extend((now, m, i) for m, i in ids)


def _post(path: str, body: dict[str, Any]) -> bytes:
    return build_request("POST", path, json.dumps(body).encode())


async def _read(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    if length:
        await reader.readexactly(length)
    return int(head[9:12])


class Window:
    def __init__(self) -> None:
        self.sent = 0
        self.shed = 0
        self.statuses: collections.Counter[str] = collections.Counter()
        self.by_op: collections.Counter[str] = collections.Counter()
        self.latencies: list[float] = []

    def summary(self, seconds: float) -> dict[str, Any]:
        xs = sorted(self.latencies)
        pct = (
            (lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3, 2))
            if xs
            else (lambda q: None)
        )
        errors = sum(v for k, v in self.statuses.items() if not k.startswith("2"))
        return {"requests": self.sent, "rate": round(self.sent / seconds, 1), "shed": self.shed,
                "errors": errors, "statuses": dict(self.statuses), "by_op": dict(self.by_op),
                "p50_ms": pct(0.5), "p99_ms": pct(0.99)}  # fmt: skip


async def run_load(port: int, load: Load, rate: float, seconds: float, connections: int,
                   on_sample: Any, sample: float) -> None:  # fmt: skip
    queue: asyncio.Queue[tuple[str, bytes, list[tuple[str, str]], float]] = asyncio.Queue()
    win = [Window()]

    async def conn() -> None:
        reader, writer = await asyncio.open_connection(HOST, port)
        while True:
            op, req, ids, _ = await queue.get()
            t0 = time.perf_counter()
            try:
                writer.write(req)
                status = str(await _read(reader))
            except (OSError, asyncio.IncompleteReadError) as e:
                status = type(e).__name__
                writer.close()
                reader, writer = await asyncio.open_connection(HOST, port)
            w = win[0]
            w.latencies.append(time.perf_counter() - t0)
            w.statuses[status] += 1
            w.by_op[f"{op} {status}"] += 1
            if status == "200" and ids:
                load.predicted(ids)
            queue.task_done()

    tasks = [asyncio.create_task(conn()) for _ in range(connections)]
    start = time.monotonic()
    next_sample = start + sample
    k = 0
    while (now := time.monotonic()) < start + seconds and not _STOP:
        if now >= next_sample:
            w, win[0] = win[0], Window()
            await on_sample(w.summary(now - next_sample + sample))
            next_sample += sample
        due = start + k / rate
        if due > now:
            await asyncio.sleep(due - now)
        k += 1
        if queue.qsize() > 4 * connections:  # the server cannot keep up: count, do not pile up
            win[0].shed += 1
            continue
        op, req, ids = load.next()
        win[0].sent += 1
        queue.put_nowait((op, req, ids, time.monotonic()))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(queue.join(), 60)
    for t in tasks:
        t.cancel()


_STOP: list[int] = []


def _stop(signum: int, frame: Any) -> None:
    _STOP.append(signum)


# ----------------------------------------------------------------------- processes
def start_stack(args: argparse.Namespace, snap_dir: Path) -> tuple[Any, RedisServer, int]:
    binary = find_redis_server()
    if binary is None:
        sys.exit("redis-server not found: install it or set LEARNSERVE_REDIS_SERVER")
    redis = RedisServer(binary, Path(tempfile.mkdtemp(prefix="soak-redis-")))
    redis.start()
    port = free_port()
    env = {
        "PYTHONPATH": str(REPO),
        "LEARNSERVE_REDIS_URL": redis.url,
        "LEARNSERVE_LOG_LEVEL": "warning",
        "SOAK_SNAPSHOT_DIR": str(snap_dir),
    }
    if args.tracemalloc:
        env["SOAK_TRACEMALLOC"] = str(args.tracemalloc)
    cmd = [sys.executable, str(_HERE / "_soak_server.py"), "service.app:factory", "--factory",
           "--workers", str(args.workers), "--app-dir", str(REPO), "--host", HOST,
           "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    proc = start_service(cmd, env, port, timeout=900, health_path="/readyz")
    return proc, redis, port


def create_models(port: int, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    names = []
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=600) as c:

        def call(method: str, path: str, body: Any) -> None:
            deadline = time.monotonic() + 900
            while True:  # a worker still compiling answers 503 not_ready
                r = c.request(method, path, json=body)
                if r.status_code != 503 or time.monotonic() > deadline:
                    assert r.status_code in (200, 201), r.text
                    return
                time.sleep(1)

        for name, config in model_names(n):
            call("PUT", f"/models/{name}", config)
            names.append(name)
        for _ in range(4):  # both workers compile their kernels (the kernel spreads accepts)
            for name in names:
                ex = [{"x": x_of(rng, name), "y": y} for y in ("s", "b")]
                call("POST", "/update", {"model": name, "examples": ex})
                call("POST", "/predict", {"model": name, "instances": [{"x": ex[0]["x"]}]})
    return names


def soak(args: argparse.Namespace) -> None:
    snap_dir = Path(tempfile.mkdtemp(prefix="soak-snapshots-"))
    proc, redis, port = start_stack(args, snap_dir)
    doc: dict[str, Any] = {"config": dict(vars(args)), "mix": dict(MIX), "samples": [],
                           "snapshot_dir": str(snap_dir), "snapshots": []}  # fmt: skip
    try:
        print(f"server pid {proc.pid} on port {port}; log {proc.log_path}", flush=True)
        names = create_models(port, args.models, args.seed)
        load = Load(names, args.seed, args.label_delay, args.batch)
        t0 = time.monotonic()
        last_snap = [-1e9]

        async def on_sample(window: dict[str, Any]) -> None:
            t = time.monotonic() - t0
            pids = workers(proc.pid)
            with redis.client() as rc:
                mem = rc.info("memory")
            row = {"t": round(t, 1), "workers": {str(p): rss_kb(p) for p in pids},
                   "redis_used_memory": mem["used_memory"], "redis_rss": mem["used_memory_rss"],
                   "pending_ids": len(load.pending), **window}  # fmt: skip
            doc["samples"].append(row)
            if t >= args.warmup and t - last_snap[0] >= args.snapshot_every - 1:
                last_snap[0] = t
                for p in pids:
                    os.kill(p, signal.SIGUSR1)
                doc["snapshots"].append({"t": round(t, 1), "pids": pids})
            summarise(doc, args.warmup)
            write_results(args.out, doc, extra_packages=("uvicorn", "redis"))
            rss = " ".join(f"{v['VmRSS'] / 1024:.1f}" for v in row["workers"].values())
            print(f"{t / 60:6.1f} min  rss MB {rss}  rate {window['rate']}  errors "
                  f"{window['errors']}  shed {window['shed']}  p99 {window['p99_ms']} ms  "
                  f"redis {mem['used_memory'] / 2**20:.1f} MB", flush=True)  # fmt: skip

        asyncio.run(run_load(port, load, args.rate, args.minutes * 60, args.connections,
                             on_sample, args.sample))  # fmt: skip
        for p in workers(proc.pid):  # a last snapshot at the end of the load
            os.kill(p, signal.SIGUSR1)
        time.sleep(10)  # the last snapshot's files
        doc["snapshot_files"] = sorted(p.name for p in snap_dir.glob("snap-*.json"))
        doc["last_snapshots"] = last_snapshots(snap_dir)
        summarise(doc, args.warmup)
        path = write_results(args.out, doc, extra_packages=("uvicorn", "redis"))
        print(f"wrote {path}", flush=True)
    finally:
        stop_process(proc, 30)
        redis.stop()


# ----------------------------------------------------------------------- per-key costs
def costs(args: argparse.Namespace) -> None:
    from bench._soak_costs import measure_costs

    doc = measure_costs(args.costs_n)
    print(json.dumps(doc, indent=1))
    print(f"wrote {write_results(args.out, doc, extra_packages=('redis',))}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=200.0, help="requests/s (open loop)")
    ap.add_argument("--models", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8, help="examples per /update")
    ap.add_argument(
        "--label-delay", type=float, default=5.0, help="s between a predict and its label"
    )
    ap.add_argument("--sample", type=float, default=30.0, help="s between RSS samples")
    ap.add_argument("--snapshot-every", type=float, default=300.0, help="s between heap snapshots")
    ap.add_argument(
        "--warmup", type=float, default=60.0, help="s before the slopes and first snapshot"
    )
    ap.add_argument("--tracemalloc", type=int, default=0, help="frames traced (0: off)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--costs", action="store_true", help="measure per-key costs instead")
    ap.add_argument("--costs-n", type=int, default=5000, help="keys/ids for --costs")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _stop)  # the load ends, the JSON is written, servers stop
    if args.costs:
        args.out = args.out or "soak-costs"
        costs(args)
    else:
        args.out = args.out or "soak"
        soak(args)


if __name__ == "__main__":
    main()
