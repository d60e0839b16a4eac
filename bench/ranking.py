"""LambdaMART (issue 4) against LightGBM: training time, NDCG, batch scoring throughput.

Run (about 1-2 minutes on 2 cores)::

    .venv/bin/python bench/ranking.py

Data: LightGBM's ``examples/lambdarank`` files (``../shared/data/lightgbm-lambdarank`` or
``$LEARNSERVE_SHARED_DATA``): train on rank.train (3,005 docs, 201 queries), test on
rank.test (768 docs, 50 queries), 300 features.

What is measured, in one run, with the same parameters for both (LightGBM's example
configuration: 100 trees, learning rate 0.1, 31 leaves, min_data_in_leaf 50,
min_sum_hessian_in_leaf 5, bagging_fraction 0.9, bagging_freq 1, seed 0):

- training: wall time of the whole ``fit`` (binning included) / ``lgb.train`` on a fresh
  ``lgb.Dataset`` (its binning included), best of ``--repeats``, **single-threaded for
  both** (LightGBM ``num_threads=1``; our training kernels are serial). CPU seconds too.
- numba compile time apart: a fresh process with an empty numba cache fits and scores a
  tiny problem ("cold"); the first call in this process (cache load) is reported too.
- NDCG@1/3/5/10 on rank.test (our :func:`learners.ranking.ndcg.ndcg_at_k`, LightGBM's
  definition) for both models.
- batch scoring: rank.test replicated to ``--score-n`` documents (1M by default) as one
  CSR ``Batch`` (ours) / ``scipy.sparse.csr_matrix`` (LightGBM), and as a dense float64
  matrix for both; **2 threads for both** (numba's threads / LightGBM ``num_threads=2``).
  Documents per second of the best run; per CPU-second too (the machine is shared).

- scoring through the service: ``uvicorn service.app:factory`` (1 worker, SQLite store in
  a temp dir) on a free port, the trained model deployed with ``PUT /models/{name}/artifact``
  (``index_base`` 1, so sparse keys are the file's), then ``POST /predict`` from one httpx
  keep-alive client, back to back: ``instances`` batches of ``--http-batch`` documents
  (rank.test replicated, 1-based sparse keys) and ``queries`` (rank.test's 50 queries, 768
  documents, one request). Bodies are JSON-encoded once beforehand (the client's encoding is
  not timed; its decoding of the answers is). Documents per second over ``--http-requests``
  requests, next to in-process ``predict`` on the same batch (the HTTP + JSON overhead).

Writes ``bench/results/ranking.json``. Goals: training time <= 3x LightGBM's, scoring
>= 1,000,000 documents/s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `bench` importable
    # ...and drop bench/ itself, whose http.py would shadow the standard library's
    # ``http`` package (httpx needs it for the scoring-through-the-service part).
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from bench._common import (
    REPO_DIR,
    Timing,
    fmt_rate,
    fmt_ratio,
    measure,
    print_table,
    shared_data_dir,
    write_results,
)

CONFIG: dict[str, Any] = {
    "n_estimators": 100, "learning_rate": 0.1, "num_leaves": 31, "min_data_in_leaf": 50,
    "min_sum_hessian_in_leaf": 5.0, "bagging_fraction": 0.9, "bagging_freq": 1, "seed": 0,
}  # fmt: skip
LGB_PARAMS: dict[str, Any] = {
    "objective": "lambdarank", "num_leaves": 31, "learning_rate": 0.1, "min_data_in_leaf": 50,
    "min_sum_hessian_in_leaf": 5.0, "bagging_fraction": 0.9, "bagging_freq": 1, "seed": 0,
    "verbose": -1,
}  # fmt: skip
KS = (1, 3, 5, 10)

_COLD = """
import time, numpy as np
t0 = time.perf_counter()
from learners.ranking.lambdamart import LambdaMART
rng = np.random.default_rng(0)
X = rng.random((200, 5)); y = rng.integers(0, 3, 200); g = [20] * 10
m = LambdaMART(n_estimators=2, min_data_in_leaf=5, bagging_fraction=0.9, bagging_freq=1)
m.fit(X, y, g, valid=(X, y, g)); m.predict(X); m.predict(m and __import__("learners.features",
    fromlist=["Batch"]).Batch.from_dense(X))
print("COLD", time.perf_counter() - t0)
"""


def cold_compile_seconds() -> float | None:
    """Fit + score a tiny problem in a fresh process whose numba cache is empty."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        proc = subprocess.run(
            [sys.executable, "-c", _COLD], capture_output=True, text=True, env=env, cwd=REPO_DIR,
            timeout=900,
        )  # fmt: skip
    for line in proc.stdout.splitlines():
        if line.startswith("COLD "):
            return float(line.split()[1])
    print(f"cold compile run failed: {proc.stderr[-500:]}", file=sys.stderr)
    return None


def ndcgs(scores: Any, y: np.ndarray, groups: np.ndarray) -> dict[str, float]:
    from learners.ranking.ndcg import ndcg_at_k

    scores = np.asarray(scores, dtype=np.float64)
    return {f"ndcg@{k}": round(ndcg_at_k(scores, y, groups, k), 4) for k in KS}


def timing_doc(t: Timing) -> dict[str, Any]:
    return {
        "best_s": t.best, "median_s": t.median, "times_s": t.times, "cpu_s": t.cpu_times,
        "rate": t.rate, "rate_per_cpu_s": t.n_items / min(t.cpu_times) if t.cpu_times else None,
    }  # fmt: skip


def http_scoring(model: Any, te: Any, batch_size: int, n_requests: int) -> dict[str, Any]:
    """Deploy ``model`` to a fresh service and score rank.test through ``POST /predict``."""
    import httpx
    import orjson

    from learners.ranking.lambdamart import LambdaMART
    from tests.service.procs import free_port, start_service, stop_process

    model = LambdaMART.from_bytes(model.to_bytes())
    model.meta_["index_base"] = 1  # rank.* are 1-based SVMlight files, read with zero_based=False
    X = te.X
    rows = [
        {str(int(j) + 1): float(v) for j, v in zip(X.indices[a:b], X.values[a:b], strict=True)}
        for a, b in zip(X.indptr[:-1], X.indptr[1:], strict=True)
    ]
    picks = np.arange(batch_size) % X.n_rows
    inst_body = orjson.dumps({"model": "lm", "instances": [{"x": rows[i]} for i in picks]})
    queries, start = [], 0
    for q, n in enumerate(te.group_sizes.tolist()):
        queries.append({"qid": q, "items": [{"x": rows[i]} for i in range(start, start + n)]})
        start += n
    query_body = orjson.dumps({"model": "lm", "queries": queries})
    expect = model.predict(X.take(picks))
    in_process = measure(lambda _: model.predict(X.take(picks)), repeats=5, n_items=batch_size)

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-ranking-") as data_dir:
        args = [sys.executable, "-m", "uvicorn", "service.app:factory", "--factory",
                "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                "--no-access-log"]  # fmt: skip
        env = {"LEARNSERVE_DATA_DIR": data_dir, "LEARNSERVE_LOG_LEVEL": "warning"}
        proc = start_service(args, env, port, health_path="/readyz")
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
                r = c.put(
                    "/models/lm/artifact",
                    content=model.to_bytes(),
                    headers={"content-type": "application/octet-stream"},
                )
                assert r.status_code == 201, r.text
                headers = {"content-type": "application/json"}

                def post(body: bytes) -> Any:
                    r = c.post("/predict", content=body, headers=headers)
                    assert r.status_code == 200, r.text
                    return r.json()

                got = [p["score"] for p in post(inst_body)["predictions"]]
                assert np.allclose(got, expect, rtol=0, atol=0), "HTTP scores differ"
                post(query_body)
                out: dict[str, Any] = {}
                for key, body, docs in (
                    ("instances", inst_body, batch_size),
                    ("queries", query_body, X.n_rows),
                ):
                    lat = []
                    t0 = time.perf_counter()
                    for _ in range(n_requests):
                        t1 = time.perf_counter()
                        post(body)
                        lat.append(time.perf_counter() - t1)
                    elapsed = time.perf_counter() - t0
                    lat.sort()
                    out[key] = {
                        "documents_per_request": docs, "requests": n_requests,
                        "request_bytes": len(body), "seconds": elapsed,
                        "docs_per_s": docs * n_requests / elapsed,
                        "p50_ms": lat[len(lat) // 2] * 1e3, "max_ms": lat[-1] * 1e3,
                    }  # fmt: skip
        finally:
            stop_process(proc)
    out["in_process_same_batch"] = timing_doc(in_process)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="timed runs (best is reported)")
    ap.add_argument("--score-n", type=int, default=1_000_000, help="documents scored")
    ap.add_argument("--no-cold", action="store_true", help="skip the empty-cache compile run")
    ap.add_argument("--out", default="ranking", help="results file stem in bench/results/")
    ap.add_argument("--http-batch", type=int, default=1000, help="instances per /predict")
    ap.add_argument("--http-requests", type=int, default=40, help="timed /predict requests")
    ap.add_argument("--no-http", action="store_true", help="skip scoring through the service")
    args = ap.parse_args(argv)

    import lightgbm as lgb
    import numba
    import scipy.sparse as sp

    from learners.features import Batch, concat
    from learners.io.svmlight import read_svmlight
    from learners.ranking.lambdamart import LambdaMART

    d = shared_data_dir() / "lightgbm-lambdarank"
    if not (d / "rank.train").exists():
        print(f"skipped: {d} is absent (set LEARNSERVE_SHARED_DATA)")
        return 0
    tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
    assert tr.group_sizes is not None and te.group_sizes is not None
    gtr, gte = tr.group_sizes, te.group_sizes

    def csr(b: Batch) -> Any:
        return sp.csr_matrix((b.values, b.indices, b.indptr), shape=(b.n_rows, b.dim))

    tr_csr = csr(tr.X)

    # ------------------------------------------------------------------ compile
    cold = None if args.no_cold else cold_compile_seconds()
    t0 = time.perf_counter()
    LambdaMART(n_estimators=2, min_data_in_leaf=5).fit(
        tr.X.take(np.arange(200)), tr.y[:200], [100, 100]
    ).predict(te.X)
    warm_first_call = time.perf_counter() - t0

    # ------------------------------------------------------------------ training
    numba.set_num_threads(1)
    ours_train = measure(
        lambda _: LambdaMART(**CONFIG).fit(tr.X, tr.y, gtr), repeats=args.repeats, warmup=0
    )
    lgb_train = measure(
        lambda _: lgb.train(
            {**LGB_PARAMS, "num_threads": 1}, lgb.Dataset(tr_csr, tr.y, group=gtr),
            num_boost_round=100,
        ),
        repeats=args.repeats, warmup=0,
    )  # fmt: skip
    ours = LambdaMART(**CONFIG).fit(tr.X, tr.y, gtr)
    booster = lgb.train(
        {**LGB_PARAMS, "num_threads": 1}, lgb.Dataset(tr_csr, tr.y, group=gtr), num_boost_round=100
    )
    q_ours = ndcgs(ours.predict(te.X), te.y, gte)
    q_lgb = ndcgs(booster.predict(csr(te.X), num_threads=1), te.y, gte)

    # ------------------------------------------------------------------ scoring
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    reps = -(-args.score_n // te.X.n_rows)
    big = concat([te.X] * reps)
    big_csr = csr(big)
    big_dense = np.tile(te.X.to_dense(), (reps, 1))
    n = big.n_rows
    score = {
        "ours_csr": measure(lambda _: ours.predict(big), repeats=args.repeats, n_items=n),
        "lightgbm_csr": measure(
            lambda _: booster.predict(big_csr, num_threads=2), repeats=args.repeats, n_items=n
        ),
        "ours_dense": measure(lambda _: ours.predict(big_dense), repeats=args.repeats, n_items=n),
        "lightgbm_dense": measure(
            lambda _: booster.predict(big_dense, num_threads=2), repeats=args.repeats, n_items=n
        ),
    }
    same = np.allclose(ours.predict(te.X), booster.predict(csr(te.X)), atol=1e-4)
    http = None if args.no_http else http_scoring(ours, te, args.http_batch, args.http_requests)

    # ------------------------------------------------------------------ report
    ratio = ours_train.best / lgb_train.best
    rows = [
        ["LambdaMART (ours)", f"{ours_train.best:.3f}", f"{min(ours_train.cpu_times):.3f}",
         fmt_ratio(ratio), *(q_ours[f"ndcg@{k}"] for k in KS)],
        ["LightGBM 4 lambdarank", f"{lgb_train.best:.3f}", f"{min(lgb_train.cpu_times):.3f}",
         "1.00x", *(q_lgb[f"ndcg@{k}"] for k in KS)],
    ]  # fmt: skip
    print_table(
        "Training on rank.train (100 trees, 1 thread each), NDCG on rank.test",
        ["model", "train s", "cpu s", "x LightGBM", "NDCG@1", "NDCG@3", "NDCG@5", "NDCG@10"],
        rows,
        caption=f"numba: cold compile {cold if cold is None else f'{cold:.1f}'} s, "
        f"first call in this process {warm_first_call:.2f} s (not in train s); "
        f"goal train <= 3x LightGBM: {'PASS' if ratio <= 3 else 'FAIL'}",
    )
    srows = []
    for key, t in score.items():
        peer = score[key.replace("ours", "lightgbm")]
        srows.append([
            key.replace("_", " "), fmt_rate(t.rate), fmt_rate(t.n_items / min(t.cpu_times)),
            fmt_ratio(t.rate / peer.rate) if key.startswith("ours") else "",
            ("PASS" if t.rate >= 1e6 else "FAIL") if key.startswith("ours") else "",
        ])  # fmt: skip
    print_table(
        f"Batch scoring, {n:,} documents in-process (2 threads each)",
        ["scorer", "docs/s", "docs per cpu-s", "x LightGBM", ">= 1M/s"],
        srows,
        caption=f"scores agree with LightGBM within 1e-4: {same}",
    )
    if http is not None:
        base = http["in_process_same_batch"]["rate"]
        print_table(
            "Scoring through the service (POST /predict, 1 worker, keep-alive, back to back)",
            ["body", "docs/request", "request KB", "docs/s", "p50 ms", "x in-process"],
            [
                [key, f"{h['documents_per_request']:,}", f"{h['request_bytes'] / 1024:.0f}",
                 fmt_rate(h["docs_per_s"]), f"{h['p50_ms']:.1f}", fmt_ratio(h["docs_per_s"] / base)]
                for key, h in http.items() if key != "in_process_same_batch"
            ],
            caption=f"in-process predict of the same {args.http_batch:,}-document batch: "
            f"{fmt_rate(base)} docs/s",
        )  # fmt: skip
    payload = {
        "data": "lightgbm-lambdarank (rank.train -> rank.test)",
        "config": CONFIG,
        "threads": {"training": 1, "scoring": 2},
        "numba_compile_cold_s": cold,
        "numba_first_call_s": warm_first_call,
        "train": {"ours": timing_doc(ours_train), "lightgbm": timing_doc(lgb_train)},
        "train_time_ratio": ratio,
        "ndcg": {"ours": q_ours, "lightgbm": q_lgb},
        "scoring_docs": n,
        "scoring": {k: timing_doc(v) for k, v in score.items()},
        "scores_agree_1e-4": bool(same),
        "http_scoring": http,
        "goals": {
            "train_ratio_le_3": ratio <= 3,
            "scoring_ge_1M_per_s": score["ours_csr"].rate >= 1e6,
        },
    }
    path = write_results(args.out, payload, extra_packages=("lightgbm", "scipy"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
