"""The server under the app (issue 30): granian (its ASGI interface) against uvicorn, on
the same learnserve app and on a bare ASGI app (the anchor: bare ASGI on uvicorn).

    PYTHONPATH=. .venv/bin/python bench/servers.py [--rounds 3] [--duration 3] [--quick]

Four servers side by side, each one process tree with 1 worker, HTTP/1.1, keep-alive, access
log off, on 127.0.0.1: uvicorn (uvloop + httptools, as ``learnserve serve``) and ``granian
--interface asgi --http 1`` (its defaults otherwise), each serving ``bench._http_apps:bare``
and ``service.app:factory`` (factory) on a private redis-server (``bench/http.py``'s
settings). ``wrk`` (``bench/_wrk.py``) on one core, every server and redis-server on the
other; 32 connections. Scenarios (bodies as ``bench/http.py`` builds them): ``GET /healthz``,
``POST /predict`` 1 instance, ``POST /update`` 1 and 100 examples; the bare app answers them
all with its constant. Within each scenario the servers take turns (order rotated per round)
over ``--rounds``; each keeps its best round; server CPU per request from /proc over the
timed run (granian's supervisor and worker; the redis-server apart). Each warm-up + timed
run holds ``flock /tmp/bench.lock`` (other benchmarks share the machine). ``core used``: the
server's CPU seconds over the run's seconds; under 100% its core was shared with other work,
and there granian (two busy threads: its tokio runtime and the Python loop) gets a larger
share than uvicorn's one thread: read CPU per request beside req/s.

Before timing, correctness on both servers: the same ``/update`` + ``/predict`` sequence on a
fresh model answers byte for byte the same; a body over ``max_body_bytes`` (declared, and
chunked) gets the same 413; a body that stalls gets the same 408. After timing, graceful
shutdown: SIGTERM while an ``/update`` body is half sent; the rest is sent after, and the
request must still be answered (and new connections refused). JSON on stdout and in
``bench/results/servers.json``; tables on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent  # (bench/http.py would shadow the stdlib's http)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._baseline import REPO, learnserve_args  # noqa: E402
from bench._common import fmt_rate, fmt_ratio, print_table, write_results  # noqa: E402
from bench._loadgen import build_request  # noqa: E402
from bench._wrk import find_wrk, pin, two_cores  # noqa: E402
from bench.http import DENSE_MODEL, HOST, LoadGen, cpu_now, load, rows, uvicorn_args  # noqa: E402
from tests.service.procs import (  # noqa: E402
    RedisServer,
    find_redis_server,
    free_port,
    start_service,
    stop_process,
)

LOCK = "/tmp/bench.lock"
MAX_BODY = 16 << 20
ENV = {  # bench/http.py's, plus a short body deadline the 408 check waits for
    "LEARNSERVE_LOG_LEVEL": "warning",
    "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "1000",
    "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "3600",
    "LEARNSERVE_BODY_TIMEOUT_SECONDS": "2",
    "LEARNSERVE_MAX_BODY_BYTES": str(MAX_BODY),
}
SERVERS, APPS = ("uvicorn", "granian"), ("bare", "learnserve")


def granian_args(target: str, port: int, factory: bool = False) -> list[str]:
    args = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", HOST,
            "--port", str(port), "--workers", "1", "--http", "1", "--no-ws",
            "--log-level", "warning", "--no-access-log"]  # fmt: skip
    return args + (["--factory"] if factory else []) + [target]


def command(server: str, app: str, port: int) -> list[str]:
    if app == "bare":
        make = uvicorn_args if server == "uvicorn" else granian_args
        return make("bench._http_apps:bare", port)
    if server == "uvicorn":
        return learnserve_args(REPO, port, HOST)  # what bench/http.py runs
    return granian_args("service.app:factory", port, factory=True)


# ----------------------------------------------------------------------------- raw HTTP


def read_response(sock: socket.socket, timeout: float = 10.0) -> tuple[int, bytes]:
    """(status, body) of one HTTP/1.1 answer (Content-Length, chunked, or up to EOF);
    (0, b"") when the connection closes without one."""
    sock.settimeout(timeout)
    buf = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in buf and (chunk := sock.recv(65536)):
            buf += chunk
    if b"\r\n\r\n" not in buf:
        return 0, b""
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    length = int(headers.get("content-length", -1))
    with contextlib.suppress(OSError):
        while (length < 0 or len(body) < length) and (
            headers.get("transfer-encoding") != "chunked" or not body.endswith(b"0\r\n\r\n")
        ):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    if headers.get("transfer-encoding") == "chunked":
        out, rest = b"", body
        while rest and (size := int(rest.split(b"\r\n", 1)[0], 16)):
            rest = rest.split(b"\r\n", 1)[1]
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return int(lines[0].split()[1]), body


def alive(sock: socket.socket) -> bool:
    """Whether the connection still answers a request (keep-alive after an error)."""
    with contextlib.suppress(OSError):
        sock.sendall(build_request("GET", "/healthz"))
        return read_response(sock, 3.0)[0] == 200
    return False


def too_large(port: int, chunked: bool) -> dict[str, Any]:
    """An /update body over the limit: declared in Content-Length (nothing sent), or sent
    chunked (1 MiB chunks until the server answers or the limit is passed)."""
    with socket.create_connection((HOST, port)) as s:
        size = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {MAX_BODY + 1}"
        head = ["POST /update HTTP/1.1", "Host: bench", "Content-Type: application/json", size]
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent = 0
        with contextlib.suppress(OSError):
            while chunked and sent <= MAX_BODY and not select.select([s], [], [], 0)[0]:
                s.sendall(b"100000\r\n" + b" " * (1 << 20) + b"\r\n")
                sent += 1 << 20
        status, body = read_response(s)
        return {"status": status, "body": body.decode(errors="replace"), "sent": sent,
                "connection_kept": alive(s)}  # fmt: skip


def stalled(port: int) -> dict[str, Any]:
    """An /update whose body stops half way: the body deadline (2 s) answers 408."""
    body = json.dumps({"model": "check", "examples": rows(np.random.default_rng(5), 10)}).encode()
    with socket.create_connection((HOST, port)) as s:
        t0 = time.perf_counter()
        s.sendall(build_request("POST", "/update", body)[: -len(body) // 2])
        status, answer = read_response(s, 10.0)
        return {"status": status, "body": answer.decode(errors="replace"),
                "seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip


# ----------------------------------------------------------------------------- checks


def put_model(c: httpx.Client, name: str) -> None:
    """PUT a model, retrying while its kernels compile (503 + Retry-After)."""
    for _ in range(600):
        r = c.put(f"/models/{name}", json=DENSE_MODEL)
        if r.status_code in (200, 201):
            return
        assert r.status_code == 503, r.text
        time.sleep(float(r.headers.get("retry-after", 1)))
    raise RuntimeError(f"PUT /models/{name} kept answering 503")


def answers(port: int) -> list[bytes]:
    """The raw answers to one fixed /update + /predict sequence on a fresh model."""
    rng, out = np.random.default_rng(7), []
    with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=120) as c:
        put_model(c, "check")
        for n, decimals in ((1, 5), (1, 5), (7, 5), (100, 5), (100, None), (2000, 5)):
            r = c.post("/update", json={"model": "check", "examples": rows(rng, n, decimals)})
            out.append(b"%d " % r.status_code + r.content)
            xs = [{"x": e["x"]} for e in rows(rng, 50, None)]
            r = c.post("/predict", json={"model": "check", "instances": xs})
            out.append(b"%d " % r.status_code + r.content)
        r = c.post("/update", json={"model": "check", "examples": [{"x": [1.0], "y": "s"}]})
        out.append(b"%d " % r.status_code + r.content)  # a refusal (wrong dimension)
    return out


def headers_of(port: int) -> list[str]:
    with httpx.Client(base_url=f"http://{HOST}:{port}") as c:
        return sorted(c.get("/healthz").headers)


def shutdown(proc: Any, port: int, app: str) -> dict[str, Any]:
    """SIGTERM while an /update body is half sent, then the rest of it: is it answered?"""
    examples = rows(np.random.default_rng(9), 100)
    body = json.dumps({"model": "bench", "examples": examples}).encode()
    req = build_request("POST", "/update", body)
    idle = socket.create_connection((HOST, port))
    assert alive(idle)
    with socket.create_connection((HOST, port)) as s:
        s.sendall(req[: -len(body) // 2])
        time.sleep(0.3)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            refused = False
        except OSError:
            refused = True
        with contextlib.suppress(OSError):
            s.sendall(req[-len(body) // 2 :])
        status, answer = read_response(s)
    idle_closed = read_response(idle, 5.0)[0] == 0
    idle.close()
    try:
        code = proc.wait(30)
    except Exception:
        code = None
    ok = status == 200 and (app == "bare" or json.loads(answer).get("applied") == 100)
    log = Path(proc.log_path).read_text(errors="replace")
    return {"in_flight_status": status, "in_flight_answered": ok, "in_flight_body":
            answer[:200].decode(errors="replace"), "new_connections_refused": refused,
            "idle_keepalive_closed": idle_closed, "log_tracebacks": log.count("Traceback"),
            "exit_code": code, "exit_seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip


# ----------------------------------------------------------------------------- main


def scenarios() -> list[tuple[str, list[bytes]]]:
    """bench/http.py's bodies (the same generator, the same order)."""
    rng = np.random.default_rng(0)
    predict = [json.dumps({"model": "bench", "instances": [{"x": r["x"]}]}).encode()
               for r in rows(rng, 64)]  # fmt: skip
    rows(rng, 1000)  # bench/http.py's warm-up rows
    out = [("GET /healthz", [build_request("GET", "/healthz")])]
    out.append(("POST /predict (1)", [build_request("POST", "/predict", b) for b in predict]))
    for n, count in ((1, 256), (100, 64)):
        bodies = [json.dumps({"model": "bench", "examples": rows(rng, n)}).encode()
                  for _ in range(count)]  # fmt: skip
        out.append((f"POST /update ({n})", [build_request("POST", "/update", b) for b in bodies]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per timed run")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="1 round of 1 s (a smoke test)")
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.duration = 1, 1.0
    if find_wrk() is None or (redis_bin := find_redis_server()) is None:
        sys.exit("needs wrk and redis-server (apt-get install -y wrk redis-server)")
    wrk_cpu, server_cpu = two_cores()
    gen = LoadGen(wrk=True, cpu=wrk_cpu)
    procs: dict[tuple[str, str], tuple[Any, int, Any]] = {}  # (server, app) -> proc, port, redis
    redises: list[RedisServer] = []
    checks: dict[str, Any] = {}
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    try:
        for server in SERVERS:
            for app in APPS:
                port, redis, env = free_port(), None, dict(ENV)
                if app == "learnserve":
                    redis = RedisServer(redis_bin, Path(tempfile.mkdtemp(prefix="bench-redis-")))
                    redises.append(redis)
                    redis.start()
                    pin(redis.proc.pid, {server_cpu})
                    env["LEARNSERVE_REDIS_URL"] = redis.url
                print(f"starting {app} on {server} ...", file=sys.stderr, flush=True)
                proc = start_service(command(server, app, port), env, port, timeout=900,
                                     health_path="/" if app == "bare" else "/readyz")  # fmt: skip
                pin(proc.pid, {server_cpu})
                procs[(server, app)] = (proc, port, redis)
        ls = {s: procs[(s, "learnserve")][1] for s in SERVERS}
        seqs = {s: answers(p) for s, p in ls.items()}
        checks["update_predict_bytes_equal"] = seqs["uvicorn"] == seqs["granian"]
        checks["update_predict_answers"] = len(seqs["uvicorn"])
        checks["first_differing"] = next(
            (
                [a.decode()[:300], b.decode()[:300]]
                for a, b in zip(*seqs.values(), strict=True)
                if a != b
            ),
            None,
        )
        for what, fn in (
            ("413_declared", lambda p: too_large(p, False)),
            ("413_chunked", lambda p: too_large(p, True)),
            ("408_stalled", stalled),
        ):
            got = {s: fn(p) for s, p in ls.items()}
            same = {k: v for k, v in got["uvicorn"].items() if k not in ("sent", "seconds")}
            checks[what] = {**got, "equal": same == {k: got["granian"][k] for k in same}}
        hs = {s: set(headers_of(p)) for s, p in ls.items()}
        checks["healthz_header_names_only_in"] = {
            "uvicorn": sorted(hs["uvicorn"] - hs["granian"]),
            "granian": sorted(hs["granian"] - hs["uvicorn"]),
        }  # fmt: skip
        with httpx.Client(timeout=600) as c:  # the timed model, warm on every path
            for p in ls.values():
                c.base_url = f"http://{HOST}:{p}"
                put_model(c, "bench")
                warm = rows(np.random.default_rng(0), 1064)[64:]
                assert c.post("/update", json={"model": "bench", "examples": warm}).is_success
        print(json.dumps({"checks": checks}, indent=1, default=str), file=sys.stderr)

        order = [(s, a) for a in APPS for s in SERVERS]
        for rnd in range(args.rounds):
            turn = order[rnd % len(order) :] + order[: rnd % len(order)]
            for name, reqs in scenarios():
                for key in turn:
                    proc, port, redis = procs[key]
                    pids = [proc.pid] + ([redis.proc.pid] if redis else [])
                    c0: list[float] = []
                    with open(LOCK, "a") as lock:
                        fcntl.flock(lock, fcntl.LOCK_EX)
                        res = load(port, reqs, args.connections, args.duration, gen,
                                   lambda pids=pids, c0=c0: c0.extend(cpu_now(pids)))  # fmt: skip
                        cpu = [b - a for a, b in zip(c0, cpu_now(pids), strict=True)]
                    per = 1e6 / res.requests if res.requests else 0.0
                    runs.setdefault((name, *key), []).append({
                        "req_per_s": res.rps, "p50_ms": res.percentile(0.5) * 1e3,
                        "p99_ms": res.percentile(0.99) * 1e3, "errors": res.errors,
                        "server_cpu_us": cpu[0] * per, "core_share": cpu[0] / res.seconds,
                        "redis_cpu_us": cpu[1] * per if redis else None})  # fmt: skip
                    print(f"round {rnd + 1} {key[0]:>8} {key[1]:>10} {name:<20} "
                          f"{res.rps:>9,.0f} req/s", file=sys.stderr, flush=True)  # fmt: skip
        checks["shutdown"] = {f"{s} {a}": shutdown(procs[(s, a)][0], procs[(s, a)][1], a)
                              for s in SERVERS for a in APPS}  # fmt: skip
        sd, same = checks["shutdown"], ("in_flight_status", "in_flight_answered",
                                         "new_connections_refused", "idle_keepalive_closed",
                                         "log_tracebacks")  # fmt: skip
        checks["shutdown_equal"] = all(
            sd[f"uvicorn {a}"][k] == sd[f"granian {a}"][k] for a in APPS for k in same
        )  # (exit codes differ: uvicorn re-raises SIGTERM once it has shut down, granian 0)
    finally:
        for proc, _, _ in procs.values():
            stop_process(proc)
        for redis in redises:
            redis.stop()
            shutil.rmtree(redis.dir, ignore_errors=True)

    results = []
    for (name, server, app), rs in runs.items():
        best = dict(max(rs, key=lambda r: r["req_per_s"]))
        best.update(scenario=name, server=server, app=app,
                    req_per_s_rounds=[r["req_per_s"] for r in rs],
                    server_cpu_us_min=min(r["server_cpu_us"] for r in rs))  # fmt: skip
        results.append(best)
    by = {(r["scenario"], r["server"], r["app"]): r for r in results}
    for r in results:
        other = by[(r["scenario"], "uvicorn", r["app"])]
        anchor = by[(r["scenario"], "uvicorn", "bare")]
        r["vs_uvicorn_same_app"] = r["req_per_s"] / other["req_per_s"]
        r["cpu_vs_uvicorn_same_app"] = r["server_cpu_us_min"] / other["server_cpu_us_min"]
        r["vs_bare_on_uvicorn"] = r["req_per_s"] / anchor["req_per_s"]
    with contextlib.redirect_stdout(sys.stderr):
        print_table(
            f"granian vs uvicorn: wrk on core {wrk_cpu}, servers on core {server_cpu}, "
            f"{args.connections} connections, best of {args.rounds} rounds of {args.duration:g} s",
            ["scenario", "server", "app", "req/s", "CPU us/req", "p50 ms", "p99 ms",
             "/ uvicorn (same app)", "CPU / uvicorn", "/ bare on uvicorn", "core used", "errors"],
            [[r["scenario"], r["server"], r["app"], fmt_rate(r["req_per_s"]),
              f"{r['server_cpu_us_min']:.1f}", f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}",
              fmt_ratio(r["vs_uvicorn_same_app"]), fmt_ratio(r["cpu_vs_uvicorn_same_app"]),
              fmt_ratio(r["vs_bare_on_uvicorn"]), f"{r['core_share']:.0%}", r["errors"]]
             for r in results],
            right_align_from=3,
        )  # fmt: skip
    doc = {
        "settings": {"rounds": args.rounds, "duration_s": args.duration, "wrk_cpu": wrk_cpu,
                     "server_cpu": server_cpu, "connections": args.connections,
                     "commands": {f"{s} {a}": command(s, a, 0)[1:] for s in SERVERS
                                  for a in APPS}},
        "checks": checks,
        "scenarios": results,
    }  # fmt: skip
    packages = ("uvicorn", "granian", "uvloop", "httptools", "starlette")
    path = write_results("servers", doc, results_dir=args.out_dir, extra_packages=packages)
    print(json.dumps({**doc, "written": str(path)}, indent=1, default=str))


if __name__ == "__main__":
    main()
