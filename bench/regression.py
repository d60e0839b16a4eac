"""Online regression (issue 33): progressive quality through HTTP next to River, Vowpal
Wabbit and the running mean, and ``/update`` speed of a regressor next to a classifier.

1. **Quality, one pass, progressive.** ``learnserve serve`` (a subprocess, SQLite under a
   temporary ``--data-dir``) gets one model per algorithm (``pa_regression``,
   ``pa1_regression``, ``pa2_regression``, ``arow_regression``, ``sgd_regression``, their
   default params) over raw records (every numeric field ``standardize``, categories
   one-hot, a missing cell ``null``, the intercept on), and the stream's rows in order
   through ``/update``, ``--batch`` rows per request. The model predicts each row before it
   learns it, and a request is only a transport: a body of 50 rows leaves the model
   (weights, target statistics and record statistics) as 50 bodies of one would, so the
   progressive figures are those of the row-by-row protocol. The figures reported are the
   server's own,
   ``GET /models/{name}`` -> ``online_metrics.cumulative`` (MAE, RMSE, R², and the 90 %
   interval coverage of AROW). Cross-check: the in-process learner
   (``learners.regression.make_regressor`` with the params the server reports, the records
   encoder of ``learners.features.FeatureSpec.records``) is fed the same rows **one at a
   time**; its ``state_digest`` must equal the server's, and the MAE/RMSE/R²/coverage
   recomputed here from its pre-update predictions must match the server's.
   Peers on the same rows in the same order, in this run (``bench/_regression_streams.py``):
   River ``StandardScaler | LinearRegression`` (defaults, and ``l1=1.0``),
   ``StandardScaler | PARegressor``, the running mean, and on California Housing Vowpal
   Wabbit (defaults; each ``-l`` of a small grid, and of an extended one).
   Streams: River's ``ChickWeights`` and ``TrumpApproval``, and California Housing (raw
   CSV from the shared data, permuted with ``default_rng(0)``; skipped with a message when
   absent).
2. **Speed.** A fresh ``learnserve serve`` pinned to one core, ``wrk`` to another
   (``bench/_wrk.py``), two models over the same 8 dense features (intercept on for both):
   ``arow_regression`` and the ``arow`` classifier. ``POST /update`` with 1 and with 100
   examples per body (distinct finite ``y`` per example for the regressor, ``"+1"`` /
   ``"-1"`` for the classifier), ``--connections`` connections, ``--duration`` s after a
   1 s warm-up, interleaved over ``--rounds`` rounds, best round kept (all in the JSON),
   plus the server's CPU time per example over the timed run. Ratio regression /
   classifier (the issue asks >= 0.9x).

    PYTHONPATH=. .venv/bin/python bench/regression.py            # ~3 min
    PYTHONPATH=. .venv/bin/python bench/regression.py --quick    # smoke run, ~1 min
    PYTHONPATH=. .venv/bin/python bench/regression.py --no-speed # quality only

JSON: ``bench/results/regression.json`` (``--out``).
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
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._baseline import tree_cpu_seconds  # noqa: E402
from bench._common import (  # noqa: E402
    fmt_rate,
    fmt_ratio,
    print_table,
    shared_data_dir,
    write_results,
)
from bench._loadgen import build_request  # noqa: E402
from bench._regression_streams import (  # noqa: E402
    VW_LEARNING_RATES,
    Scores,
    Stream,
    california_stream,
    river_models,
    river_stream,
    run_river,
    run_vw,
    scores,
)
from bench._wrk import find_wrk, pin, two_cores  # noqa: E402
from bench.http import LoadGen, load, put_model, summarise  # noqa: E402
from tests.service.procs import free_port, start_service, stop_process  # noqa: E402

REPO = _HERE.parent
HOST = "127.0.0.1"
ALGORITHMS = ("pa", "pa1", "pa2", "arow", "sgd")
VW_EXTENDED_RATES = (100.0, 1e3, 1e4, 1e5, 1e6)
BITS = 18
SPEED_DIM = 8


# ----------------------------------------------------------------------- server


def serve(data_dir: str) -> tuple[Any, int]:
    """``learnserve serve`` from this tree (``-P`` + ``PYTHONPATH``: this checkout's code,
    whatever the venv has installed) on a free port, SQLite under ``data_dir``."""
    port = free_port()
    args = [sys.executable, "-P", "-m", "service.cli", "serve", "--host", HOST,
            "--port", str(port), "--data-dir", data_dir, "--log-level", "warning"]  # fmt: skip
    env = {"PYTHONPATH": str(REPO), "LEARNSERVE_LOG_LEVEL": "warning"}
    return start_service(args, env, port, timeout=900, health_path="/readyz"), port


def ok(r: httpx.Response) -> dict[str, Any]:
    if r.status_code not in (200, 201):
        raise RuntimeError(f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:500]}")
    out: dict[str, Any] = r.json()
    return out


# ----------------------------------------------------------------------- quality


def learnserve_http(c: httpx.Client, stream: Stream, algorithm: str, batch: int) -> dict[str, Any]:
    """One model, the stream in order through /update, then GET /models/{name}."""
    name = f"{stream.name}-{algorithm}"
    body = {"algorithm": f"{algorithm}_regression", "features": stream.records_config(BITS)}
    ok(put_model(c, name, body))
    t0 = time.perf_counter()
    for s in range(0, len(stream.rows), batch):
        part = stream.rows[s : s + batch]
        examples = [{"x": x, "y": y} for x, y in part]
        got = ok(c.post("/update", json={"model": name, "examples": examples}))
        assert got["applied"] == len(part), got
    seconds = time.perf_counter() - t0
    info = ok(c.get(f"/models/{name}"))
    cum = info["online_metrics"]["cumulative"]
    assert cum["examples"] == len(stream.rows), cum
    return {
        "model": name,
        "config": info["config"],
        "state_digest": info["state_digest"],
        "target": info.get("target"),
        "seconds": seconds,
        "requests": math.ceil(len(stream.rows) / batch),
        "cumulative": cum,
    }


def in_process(stream: Stream, config: dict[str, Any]) -> tuple[Scores, str]:
    """The same learner and record encoder in this process, the rows one at a time:
    (scores from its pre-update predictions, the digest the server computes)."""
    from learners.features import FeatureSpec
    from learners.regression import make_regressor

    spec = FeatureSpec.records(config["features"])
    algorithm = config["algorithm"].removesuffix("_regression")
    reg = make_regressor(algorithm, spec.dim, dict(config["params"]))
    preds, variances = [], []
    t0 = time.perf_counter()
    for x, y in stream.rows:
        res = reg.update(spec.encoder.learn([x]), [y])
        assert res.predicted is not None
        preds.append(float(res.predicted[0]))
        if res.variance is not None:
            variances.append(float(res.variance[0]))
    seconds = time.perf_counter() - t0
    sc = scores([y for _, y in stream.rows], preds, variances or None, seconds)
    digest = f"{reg.state_digest()}:{spec.encoder.state_digest()}" if spec.stateful else None
    both = reg.state_digest() if digest is None else hashlib.sha256(digest.encode()).hexdigest()
    return sc, both


def close(a: float | None, b: float | None, rel: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def quality(stream: Stream, c: httpx.Client, batch: int, vw: bool) -> dict[str, Any]:
    print(f"{stream.name}: {len(stream.rows):,} rows ...", flush=True)
    y = [y for _, y in stream.rows]
    rows: list[dict[str, Any]] = []
    for alg in ALGORITHMS:
        got = learnserve_http(c, stream, alg, batch)
        cum = got["cumulative"]
        mine, digest = in_process(stream, got["config"])
        check = {
            "state_digest_equal": digest == got["state_digest"],
            "in_process": mine.to_json(),
            "figures_equal": all(close(cum[k], getattr(mine, k))
                                 for k in ("mae", "rmse", "r2", "interval_coverage")),
        }  # fmt: skip
        rows.append({
            "who": f"learnserve {alg}_regression", "family": "learnserve",
            "mae": cum["mae"], "rmse": cum["rmse"], "r2": cum["r2"],
            "interval_coverage": cum["interval_coverage"], "n": cum["examples"],
            "http": got, "cross_check": check,
        })  # fmt: skip
    for who, make in river_models().items():
        sc = run_river(make, stream.rows)
        family = "mean" if "mean" in who else "river"
        rows.append({"who": who, "family": family, **sc.to_json()})
    if vw:
        default = run_vw(stream.rows)
        rows.append({"who": "VW (defaults, -l 0.5)", "family": "vw", **default.to_json()})
        for rates, label in ((VW_LEARNING_RATES, "grid"), (VW_EXTENDED_RATES, "extended grid")):
            grid = {lr: run_vw(stream.rows, lr) for lr in rates}
            best = min(grid, key=lambda lr: grid[lr].mae)
            rows.append({
                "who": f"VW best of {label} (-l {best:g}, hindsight)", "family": f"vw {label}",
                **grid[best].to_json(), "learning_rate": best,
                "grid": {f"{lr:g}": s.to_json() for lr, s in grid.items()},
            })  # fmt: skip
    ours = [r for r in rows if r["family"] == "learnserve"]
    best_ours = min(ours, key=lambda r: r["mae"])
    verdicts: dict[str, Any] = {"best_learnserve": best_ours["who"], "by": "MAE"}
    for fam, label in (("river", "best_river_linear"), ("vw", "vw_defaults"),
                       ("vw grid", "vw_best_of_grid"), ("vw extended grid", "vw_best_extended"),
                       ("mean", "running_mean")):  # fmt: skip
        peers = [r for r in rows if r["family"] == fam]
        if peers:
            p = min(peers, key=lambda r: r["mae"])
            verdicts[label] = {"who": p["who"], "mae": p["mae"],
                               "learnserve_le": best_ours["mae"] <= p["mae"],
                               "ratio": best_ours["mae"] / p["mae"]}  # fmt: skip
    verdicts["learnserve_losing_to_running_mean"] = [
        r["who"] for r in ours if r["mae"] > verdicts["running_mean"]["mae"]
    ]
    return {
        "stream": stream.name, "about": stream.about, "rows": len(stream.rows),
        "y_mean": float(np.mean(y)), "y_std": float(np.std(y)), "batch": batch,
        "records_config": stream.records_config(BITS), "results": rows, "verdicts": verdicts,
        **stream.extra,
    }  # fmt: skip


def fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def print_quality(q: dict[str, Any]) -> None:
    v = q["verdicts"]
    bits = []
    for label, what in (
        ("best_river_linear", "best River linear"),
        ("vw_best_of_grid", "VW best -l grid"),
        ("vw_best_extended", "VW best extended -l"),
        ("running_mean", "running mean"),
    ):
        if label in v:
            bits.append(f"{what}: {'yes' if v[label]['learnserve_le'] else 'NO'} "
                        f"({fmt_ratio(v[label]['ratio'])})")  # fmt: skip
    caption = f"best learnserve ({v['best_learnserve']}) MAE <= " + "; ".join(bits)
    table = []
    for r in q["results"]:
        chk = r.get("cross_check")
        table.append([
            r["who"], fmt(r["mae"]), fmt(r["rmse"]), fmt(r["r2"], 3),
            "-" if r.get("interval_coverage") is None else f"{r['interval_coverage']:.3f}",
            "-" if chk is None else ("same" if chk["state_digest_equal"] and chk["figures_equal"]
                                     else "DIFFERS"),
        ])  # fmt: skip
    print_table(
        f"{q['stream']} ({q['rows']:,} rows, y mean {fmt(q['y_mean'])}, std {fmt(q['y_std'])}): "
        f"progressive, one pass",
        ["model", "MAE", "RMSE", "R²", "90% cov.", "in-process check"], table, caption=caption,
    )  # fmt: skip


# ----------------------------------------------------------------------- speed


def speed_bodies(model: str, n: int, count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    w = np.linspace(-1, 1, SPEED_DIM)
    out = []
    for _ in range(count):
        X = rng.normal(size=(n, SPEED_DIM)).round(5)
        t = X @ w + rng.normal(scale=0.5, size=n)
        if model == "regression":
            ys: list[Any] = (t * 10 + 50).round(5).tolist()  # distinct finite floats
        elif model == "regression_int":  # whole numbers, written as JSON integers
            ys = [int(v) for v in (t * 10 + 50).round().tolist()]
        else:
            ys = np.where(t > 0, "+1", "-1").tolist()
        ex = [{"x": x, "y": y} for x, y in zip(X.tolist(), ys, strict=True)]
        out.append(json.dumps({"model": model, "examples": ex}).encode())
    return out


SPEED_MODELS = {
    "regression": {"algorithm": "arow_regression",
                   "features": {"kind": "dense", "dim": SPEED_DIM, "intercept": True}},
    # a diagnostic: the same regressor with whole-number targets (the dense body scanner
    # takes a label that is a string or a whole number; a fractional y goes to the
    # general parser)
    "regression_int": {"algorithm": "arow_regression",
                       "features": {"kind": "dense", "dim": SPEED_DIM, "intercept": True}},
    "classifier": {"algorithm": "arow",
                   "features": {"kind": "dense", "dim": SPEED_DIM, "intercept": True}},
}  # fmt: skip


def in_process_parts(repeats: int = 5, number: int = 100) -> list[dict[str, Any]]:
    """Where an /update body's server time goes, per body of 100, without HTTP: the parse
    (the bytes-only scanner ``parse_update_raw``, or when it declines, ``orjson.loads`` +
    ``parse_update``, the general path), the dry run (``check_update``) and the apply, for
    the classifier and the regressor (fractional and whole-number y); best of
    ``repeats`` x ``number`` calls, in the steady state (every label known)."""
    import timeit

    import orjson

    from service.models.linear import LinearAdapter
    from service.models.regression import RegressionAdapter
    from service.settings import Settings

    settings = Settings()
    out: list[dict[str, Any]] = []
    for model in ("classifier", "regression", "regression_int"):
        cls = LinearAdapter if model == "classifier" else RegressionAdapter
        ad = cls.create(cls.normalize_config(SPEED_MODELS[model], settings))
        bodies = speed_bodies(model, 100, 8, seed=100)
        fast = ad.parse_update_raw(bodies[0], settings) is not None

        def parse(raw: bytes, ad: Any = ad) -> bytes:
            got = ad.parse_update_raw(raw, settings)
            if got is not None:
                return bytes(got.payload)
            return ad.parse_update(orjson.loads(raw), settings, raw)[0]

        for b in bodies:
            ad.apply(parse(b))
        payload = parse(bodies[0])
        first, check, apply = bodies[0], ad.check_update, ad.apply
        us = {part: min(timeit.repeat(fn, number=number, repeat=repeats)) / number * 1e6
              for part, fn in (("parse", functools.partial(parse, first)),
                               ("check", functools.partial(check, payload)),
                               ("apply", functools.partial(apply, payload)))}  # fmt: skip
        out.append({"model": model, "scanner": fast, "us_per_100": us,
                    "total_us_per_100": sum(us.values())})  # fmt: skip
    clf = out[0]["total_us_per_100"]
    print_table(
        "in process, one body of 100 dense examples (us, best of "
        f"{repeats} x {number}): parse + dry run + apply",
        ["model", "bytes scanner", "parse", "check", "apply", "total", "clf / this"],
        [[o["model"], "yes" if o["scanner"] else "no (general)",
          *(f"{o['us_per_100'][k]:.1f}" for k in ("parse", "check", "apply")),
          f"{o['total_us_per_100']:.1f}", fmt_ratio(clf / o["total_us_per_100"])] for o in out],
    )  # fmt: skip
    return out


def speed(args: argparse.Namespace) -> dict[str, Any]:
    parts = in_process_parts()
    if find_wrk() is None:
        print("speed over HTTP: wrk not found (apt-get install -y wrk): skipped", flush=True)
        return {"skipped": "wrk not found", "in_process": parts}
    wrk_cpu, server_cpu = two_cores()
    gen = LoadGen(wrk=True, cpu=wrk_cpu)
    data = tempfile.mkdtemp(prefix="bench-regression-speed-")
    proc = None
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        proc, port = serve(data)
        pin(proc.pid, {server_cpu})
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=600) as c:
            for model, body in SPEED_MODELS.items():
                ok(put_model(c, model, body))
                for b in speed_bodies(model, 100, 5, seed=99):  # compiles the update path
                    ok(c.post("/update", content=b, headers={"content-type": "application/json"}))
        pin(proc.pid, {server_cpu})  # threads started meanwhile
        reqs = {
            (model, n): [build_request("POST", "/update", b)
                         for b in speed_bodies(model, n, 256 if n == 1 else 64, seed=n)]
            for model in SPEED_MODELS for n in (1, 100)
        }  # fmt: skip
        for rnd in range(args.rounds):
            for n in (1, 100):
                order = list(SPEED_MODELS) if rnd % 2 == 0 else list(SPEED_MODELS)[::-1]
                for model in order:
                    c0: list[float] = []
                    pid = proc.pid

                    def timed(c0: list[float] = c0, pid: int = pid) -> None:
                        c0.append(tree_cpu_seconds(pid))  # the timed run's start

                    res = load(port, reqs[(model, n)], args.connections, args.duration, gen, timed)
                    cpu_s = tree_cpu_seconds(proc.pid) - c0[0]
                    s = summarise(f"{model} x{n}", res, n)
                    # a kernel compile child that ended during the load takes its CPU out
                    # of the tree's sum: no figure then (run `learnserve warmup` first)
                    valid = res.requests and cpu_s > 0
                    s.update(model=model, round=rnd, server_cpu_s=cpu_s,
                             server_cpu_us_per_example=cpu_s / (res.requests * n) * 1e6
                             if valid else None)  # fmt: skip
                    runs.setdefault((model, n), []).append(s)
                    print(f"round {rnd + 1} {model:>14} x{n:<3} "
                          f"{s['examples_per_s']:>10,.0f} ex/s ({s['req_per_s']:,.0f} req/s, "
                          f"errors {s['errors']})", flush=True)  # fmt: skip
    finally:
        if proc is not None:
            stop_process(proc)
        shutil.rmtree(data, ignore_errors=True)
    best = {k: max(v, key=lambda s: s["examples_per_s"]) for k, v in runs.items()}

    def median(model: str, n: int) -> float:
        return float(np.median([s["examples_per_s"] for s in runs[(model, n)]]))

    def cpu(model: str, n: int) -> float:
        figures = [s["server_cpu_us_per_example"] for s in runs[(model, n)]]
        return min((f for f in figures if f is not None), default=math.nan)

    ratios: dict[str, dict[str, Any]] = {}
    for reg in ("regression", "regression_int"):
        for n in (1, 100):
            r, c = best[(reg, n)]["examples_per_s"], best[("classifier", n)]["examples_per_s"]
            ratios[f"{reg} x{n}"] = {
                "model": reg, "examples_per_request": n,
                "examples_per_s_regression": r, "examples_per_s_classifier": c,
                "ratio": r / c, "ratio_median": median(reg, n) / median("classifier", n),
                "cpu_us_per_example_regression": cpu(reg, n),
                "cpu_us_per_example_classifier": cpu("classifier", n),
                # examples per server CPU second, regression / classifier
                "ratio_cpu": cpu("classifier", n) / cpu(reg, n),
                "meets_0_9": r / c >= 0.9,
            }  # fmt: skip
    print_table(
        f"POST /update, 8 dense features: wrk on core {wrk_cpu}, server on core {server_cpu}, "
        f"{args.connections} connections, best of {args.rounds} rounds of {args.duration:g} s",
        ["regressor's y", "body", "regression ex/s", "classifier ex/s", "reg / clf", ">= 0.9x",
         "reg / clf (median rounds)", "server CPU us/ex reg", "clf", "reg / clf (CPU)"],
        [["fractional (the figure)" if v["model"] == "regression" else "whole numbers (diagnostic)",
          f"{v['examples_per_request']} per request", fmt_rate(v["examples_per_s_regression"]),
          fmt_rate(v["examples_per_s_classifier"]), fmt_ratio(v["ratio"]),
          "PASS" if v["meets_0_9"] else "FAIL", fmt_ratio(v["ratio_median"]),
          f"{v['cpu_us_per_example_regression']:.1f}", f"{v['cpu_us_per_example_classifier']:.1f}",
          fmt_ratio(v["ratio_cpu"])] for v in ratios.values()],
        right_align_from=2,
    )  # fmt: skip
    return {
        "settings": {"duration_s": args.duration, "rounds": args.rounds,
                     "connections": args.connections, "wrk_cpu": wrk_cpu,
                     "server_cpu": server_cpu, "models": SPEED_MODELS, "store": "sqlite"},
        "ratios": ratios,
        "runs": [s for v in runs.values() for s in v],
        "in_process": parts,
    }  # fmt: skip


# ----------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 3,000 California rows, 1 round of 1 s loads")  # fmt: skip
    ap.add_argument("--batch", type=int, default=50, help="rows per /update request (quality)")
    ap.add_argument("--california-n", type=int, default=None, help="first N permuted rows")
    ap.add_argument("--seed", type=int, default=0, help="California's permutation")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per speed load")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--no-quality", action="store_true")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--out", default="regression", help="results file stem")
    args = ap.parse_args()
    if args.quick:
        args.california_n = args.california_n or 3000
        args.duration, args.rounds = 1.0, 1

    payload: dict[str, Any] = {"quick": args.quick}
    if not args.no_quality:
        streams = [river_stream("chick_weights"), river_stream("trump_approval")]
        path = shared_data_dir() / "california-housing" / "housing.csv"
        if path.exists():
            streams.append(california_stream(path, args.seed, args.california_n))
        else:
            print(f"california: {path} is absent (set LEARNSERVE_SHARED_DATA): skipped")
        data = tempfile.mkdtemp(prefix="bench-regression-")
        proc = None
        out: list[dict[str, Any]] = []
        try:
            proc, port = serve(data)
            with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=600) as c:
                for s in streams:
                    out.append(quality(s, c, args.batch, vw=s.name == "california"))
        finally:
            if proc is not None:
                stop_process(proc)
            shutil.rmtree(data, ignore_errors=True)
        for q in out:
            print_quality(q)
        payload["quality"] = out
    if not args.no_speed:
        payload["speed"] = speed(args)
    extra = ("river", "vowpalwabbit", "fastapi", "uvicorn")
    path = write_results(args.out, payload, extra_packages=extra)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
