"""What raw records cost against pre-encoded vectors (issue 22), in one run.

    flock /tmp/bench.lock .venv/bin/python bench/features.py            # ~1 min
    .venv/bin/python bench/features.py --limit 300 --rounds 1 --repeats 1   # smoke

1. ``/update`` through HTTP: one learnserve (uvicorn ``service.app:factory``, one worker,
   the embedded SQLite store in a temp dir, default checkpointing) with three AROW models:
   ``adult-raw`` (Adult's raw CSV rows, ``features.kind = "records"``: the bins config of
   ``tests/learners/test_records_quality.py``), ``sms`` (SMS texts, words + character
   3-5-grams) and ``a9a`` (the same Adult training rows pre-encoded as LIBSVM's a9a,
   ``kind = "sparse"``, dim 123). Bodies of ``--batch`` (100) examples are encoded to
   JSON bytes before timing and posted back to back from one keep-alive httpx client;
   each round is one pass over each stream, the streams taking turns (who goes first
   rotates). Per stream: server CPU per example (user + system of the server process
   from ``/proc``, over the pass) and wall time per example at the client. The figures
   are the round with the least server CPU per example (all rounds in the JSON). Ratios:
   raw Adult / a9a (issue 22's target: <= 1.5x) and SMS / a9a.
2. In-process extraction, records/s, ours against Vowpal Wabbit's own parser on the same
   records (``bench/_features_inproc.py`` says exactly what each side does).

JSON: ``bench/results/features.json`` (``--out-dir`` elsewhere).
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import orjson  # noqa: E402

from bench._baseline import REPO, code_env, learnserve_args, tree_cpu_seconds  # noqa: E402
from bench._common import (  # noqa: E402
    fmt_rate,
    fmt_ratio,
    print_table,
    shared_data_dir,
    write_results,
)
from bench._features_data import Stream, load_streams  # noqa: E402
from bench._features_inproc import extraction  # noqa: E402
from tests.service.procs import free_port, start_service, stop_process  # noqa: E402

JSON = {"content-type": "application/json"}


def bodies(s: Stream, batch: int) -> list[bytes]:
    return [
        orjson.dumps({"model": s.name, "examples": [
            {"x": x, "y": y} for x, y in zip(s.records[i : i + batch],
                                              s.labels[i : i + batch], strict=True)]})
        for i in range(0, len(s.records), batch)
    ]  # fmt: skip


def one_pass(c: httpx.Client, pid: int, blobs: list[bytes], n: int) -> dict[str, float]:
    cpu0, t0 = tree_cpu_seconds(pid), time.perf_counter()
    for b in blobs:
        r = c.post("/update", content=b, headers=JSON)
        if r.status_code != 200:
            raise RuntimeError(f"/update answered {r.status_code}: {r.text[:500]}")
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds(pid) - cpu0
    return {"examples": n, "requests": len(blobs), "wall_s": wall, "server_cpu_s": cpu,
            "server_cpu_us_per_example": cpu / n * 1e6,
            "wall_us_per_example": wall / n * 1e6}  # fmt: skip


def over_http(streams: dict[str, Stream], batch: int, rounds: int) -> dict[str, Any]:
    """Every round of every stream, and the best (least server CPU per example) per stream."""
    encoded = {k: bodies(s, batch) for k, s in streams.items()}
    port = free_port()
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in streams}
    with tempfile.TemporaryDirectory(prefix="bench-features-") as data_dir:
        env = {"LEARNSERVE_DATA_DIR": data_dir, "LEARNSERVE_LOG_LEVEL": "warning",
               **code_env(REPO)}  # fmt: skip
        proc = start_service(learnserve_args(REPO, port), env, port, timeout=900,
                             health_path="/readyz")  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as c:
                for name, s in streams.items():
                    r = c.put(f"/models/{name}", json={"algorithm": "arow",
                                                       "features": s.features})  # fmt: skip
                    if r.status_code != 201:
                        raise RuntimeError(f"PUT /models/{name}: {r.status_code} {r.text}")
                    one_pass(c, proc.pid, encoded[name][:3], 1)  # kernels load, not timed
                names = list(streams)
                for rnd in range(rounds):
                    order = names[rnd % len(names) :] + names[: rnd % len(names)]
                    for name in order:
                        runs[name].append(one_pass(c, proc.pid, encoded[name],
                                                   len(streams[name].records)))  # fmt: skip
        finally:
            stop_process(proc)
    best = {k: min(v, key=lambda r: r["server_cpu_us_per_example"]) for k, v in runs.items()}
    body_bytes = {k: sum(map(len, v)) / len(streams[k].records) for k, v in encoded.items()}
    return {"rounds": runs, "best": best, "body_bytes_per_example": body_bytes}


def ratios(best: dict[str, dict[str, float]]) -> dict[str, dict[str, float | None]]:
    """Per example, raw records over a9a. None where a9a's figure is 0: /proc counts CPU
    in clock ticks (10 ms), which a tiny smoke run may not reach."""
    a9a = best["a9a"]
    return {
        f"{k} / a9a": {m: best[k][m] / a9a[m] if a9a[m] > 0 else None
                       for m in ("server_cpu_us_per_example", "wall_us_per_example")}
        for k in ("adult-raw", "sms")
    }  # fmt: skip


def load_caption() -> str:
    import os

    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} cores, shared; load average {one:.1f} (1 min), {five:.1f} (5 min)"


def report(http: dict[str, Any], rat: dict[str, Any], ext: dict[str, Any], batch: int) -> None:
    best = http["best"]
    print_table(
        f"/update through HTTP, {batch} examples per request, AROW, SQLite store (best round)",
        ["stream", "examples", "bytes/example", "server CPU us/ex", "wall us/ex", "ex/s wall"],
        [[k, f"{b['examples']:,}", f"{http['body_bytes_per_example'][k]:.0f}",
          f"{b['server_cpu_us_per_example']:.1f}", f"{b['wall_us_per_example']:.1f}",
          fmt_rate(1e6 / b["wall_us_per_example"])] for k, b in best.items()],
        caption=load_caption(),
    )  # fmt: skip
    print_table(
        "ratios (issue 22 target: raw Adult / a9a <= 1.5x on server CPU)",
        ["ratio", "server CPU", "wall"],
        [[k, fmt_ratio(v["server_cpu_us_per_example"]), fmt_ratio(v["wall_us_per_example"])]
         for k, v in rat.items()],
    )  # fmt: skip
    rows = []
    for label, r in ext.items():
        v = r["vw"]
        for k in ("bytes -> batch", "encode", "learn", "json + encode"):
            over = r.get("ours_over_vw_cpu", {}).get(k)
            over1 = r.get("ours_over_vw_cpu_vw_one_core", {}).get(k)
            rows.append([label, k, f"{r['nnz_per_record']:.0f}",
                         f"{fmt_rate(r[k]['rate_best'])} / {fmt_rate(r[k]['rate_cpu'])}",
                         f"{fmt_rate(v.get('rate_best'))} / {fmt_rate(v.get('rate_cpu'))}"
                         f" / {fmt_rate(v.get('rate_cpu_one_core'))}",
                         fmt_ratio(over), fmt_ratio(over1)])  # fmt: skip
    print_table(
        "in-process extraction, records/s, best of runs (target: ours / VW >= 1x)",
        [
            "data",
            "ours",
            "nnz/rec",
            "ours wall / CPU",
            "VW wall / CPU / CPU 1 core",
            "ours/VW CPU",
            "ours/VW 1 core",
        ],
        rows,
        right_align_from=2,
        caption=load_caption(),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batch", type=int, default=100, help="examples per /update")
    ap.add_argument("--rounds", type=int, default=3, help="passes over each stream over HTTP")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs in process, per round")
    ap.add_argument("--inproc-rounds", type=int, default=3,
                    help="interleaved in-process rounds; each side's fastest kept")  # fmt: skip
    ap.add_argument("--limit", type=int, default=None, help="the first N rows of each stream")
    ap.add_argument("--out-dir", type=Path, default=None, help="default bench/results")
    args = ap.parse_args()
    streams = load_streams(shared_data_dir(), args.limit)
    if isinstance(streams, str):
        sys.exit(streams)
    print("in process ...", flush=True)
    ext = extraction(streams, args.repeats, args.inproc_rounds)
    print("over HTTP ...", flush=True)
    http = over_http(streams, args.batch, args.rounds)
    rat = ratios(http["best"])
    report(http, rat, ext, args.batch)
    payload = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "http": http, "http_ratios": rat, "extraction": ext,
               "features": {k: s.features for k, s in streams.items()}}  # fmt: skip
    path = write_results("features", payload, extra_packages=("vowpalwabbit", "orjson"),
                         results_dir=args.out_dir)  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
