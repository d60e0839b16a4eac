"""The report of ``bench/online.py``: the table rows (ours, then the VW variants, then
River, per stream) with the ratios between them, the issue-2 criteria (PASS/FAIL), and
the JSON form of the results."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from bench._common import Timing, fmt_rate, fmt_ratio, print_table

TARGET_RATE = 2_000_000  # issue 2: diagonal AROW / SCW-I update, sparse stream
TARGET_VW_RATIO = 5.0
TARGET_ALGOS = ("arow", "scw1")
TARGET_STREAM = "sparse"


def _rate(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    return v.rate if isinstance(v, Timing) else float(v)


def _cpu_rate(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return v.cpu_rate if isinstance(v, Timing) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


COLUMNS = {
    "stream": "stream",
    "learner": "learner",
    "update": "update/s",
    "update_cpu": "upd/s cpu",
    "update_1000": "upd@1000",
    "update_100": "upd@100",
    "predict": "predict/s",
    "predict_100": "pred@100",
    "acc": "acc",
    "x_vw": "xVW",
    "x_vwmax": "xVWmax",
    "x_vw_cpu": "xVW cpu",
    "pred_x_vwmax": "pred xVWmax",
    "x_river": "xRiver",
    "crit_rate": ">=2M/s",
    "crit_vw": ">=5xVW",
}


def _row(**cells: Any) -> list[Any]:
    unknown = set(cells) - COLUMNS.keys()
    if unknown:
        raise KeyError(f"unknown table columns {sorted(unknown)}")
    return [cells.get(k) for k in COLUMNS]


def _acc(x: float | None) -> str | None:
    return f"{x:.4f}" if x is not None else None


def build_rows(
    streams: dict[str, dict[str, Any]],
) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """Table rows (ours, then VW variants, then River, per stream) and the criteria."""
    rows: list[list[Any]] = []
    criteria: list[dict[str, Any]] = []
    for sname, s in streams.items():
        vw, river = s.get("vw", {}), s.get("river", {})
        vw_learn, vw_predict = _rate(vw, "learn"), _rate(vw, "predict")
        vw_learn_cpu = _cpu_rate(vw, "learn")
        vw_pred_all = (
            vw_predict,
            _rate(vw, "predict_binding"),
            _rate(vw, "driver_cache_predict_rate"),
        )
        vw_pred_max = max((r for r in vw_pred_all if r), default=None)
        vw_all = (vw_learn, _rate(vw, "learn_binding"), _rate(vw, "driver_cache_learn_rate"))
        vw_max = max((r for r in vw_all if r), default=None)
        river_learn = _rate(river, "learn")
        for name, r in s.get("ours", {}).items():
            if "error" in r:
                rows.append(_row(stream=sname, learner=name, update="error"))
                continue
            upd, upd_cpu = _rate(r, "update"), _cpu_rate(r, "update")
            x_vw, x_vwmax = _ratio(upd, vw_learn), _ratio(upd, vw_max)
            x_vw_cpu = _ratio(upd_cpu, vw_learn_cpu)
            crit_rate = crit_vw = None
            if sname == TARGET_STREAM and name in {f"{a} (diag)" for a in TARGET_ALGOS}:
                crit_rate = "PASS" if upd is not None and upd >= TARGET_RATE else "FAIL"
                crit_vw = "PASS" if x_vw is not None and x_vw >= TARGET_VW_RATIO else "FAIL"
                criteria.append(
                    {
                        "stream": sname,
                        "learner": name,
                        "update_rate": upd,
                        "target_rate": TARGET_RATE,
                        "rate_pass": crit_rate == "PASS",
                        "ratio_to_vw_learn": x_vw,
                        "ratio_to_vw_fastest": x_vwmax,
                        "target_ratio": TARGET_VW_RATIO,
                        "vw_pass": crit_vw == "PASS",
                        "vw_fastest_pass": x_vwmax is not None and x_vwmax >= TARGET_VW_RATIO,
                        # the same on CPU time (what the run would show on an idle machine)
                        "update_rate_cpu": upd_cpu,
                        "rate_cpu_pass": upd_cpu is not None and upd_cpu >= TARGET_RATE,
                        "ratio_to_vw_learn_cpu": x_vw_cpu,
                        "vw_cpu_pass": x_vw_cpu is not None and x_vw_cpu >= TARGET_VW_RATIO,
                    }
                )
            rows.append(
                _row(
                    stream=sname,
                    learner=name,
                    update=fmt_rate(upd),
                    update_cpu=fmt_rate(upd_cpu),
                    update_1000=fmt_rate(_rate(r, "update_chunk1000")),
                    update_100=fmt_rate(_rate(r, "update_chunk100")),
                    predict=fmt_rate(_rate(r, "predict")),
                    predict_100=fmt_rate(_rate(r, "predict_chunk100")),
                    acc=_acc(r.get("test_accuracy", r.get("progressive_accuracy"))),
                    x_vw=fmt_ratio(x_vw),
                    x_vwmax=fmt_ratio(x_vwmax),
                    x_vw_cpu=fmt_ratio(x_vw_cpu),
                    pred_x_vwmax=fmt_ratio(_ratio(_rate(r, "predict"), vw_pred_max)),
                    x_river=fmt_ratio(_ratio(upd, river_learn)),
                    crit_rate=crit_rate,
                    crit_vw=crit_vw,
                )
            )
        if vw and "error" not in vw:
            rows.append(
                _row(
                    stream=sname,
                    learner=f"vw ws.learn ({vw['pool'] // 1000}k pool)",
                    update=fmt_rate(vw_learn),
                    update_cpu=fmt_rate(vw_learn_cpu),
                    predict=fmt_rate(vw_predict),
                    acc=_acc(vw.get("test_accuracy")),
                    x_vw="1.00x",
                    x_river=fmt_ratio(_ratio(vw_learn, river_learn)),
                )
            )
            rows.append(
                _row(
                    stream=sname,
                    learner="vw binding pylibvw",
                    update=fmt_rate(_rate(vw, "learn_binding")),
                    update_cpu=fmt_rate(_cpu_rate(vw, "learn_binding")),
                    predict=fmt_rate(_rate(vw, "predict_binding")),
                )
            )
            if "driver_cache_learn_rate" in vw:
                rows.append(
                    _row(
                        stream=sname,
                        learner="vw C++ driver (cache)",
                        update=fmt_rate(vw["driver_cache_learn_rate"]),
                        predict=fmt_rate(vw["driver_cache_predict_rate"]),
                    )
                )
                rows.append(
                    _row(
                        stream=sname,
                        learner="vw C++ driver (text)",
                        update=fmt_rate(vw["driver_text_rate"]),
                    )
                )
        if river and "error" not in river:
            rows.append(
                _row(
                    stream=sname,
                    learner=f"river PA ({river['n'] // 1000}k rows)",
                    update=fmt_rate(river_learn),
                    update_cpu=fmt_rate(_cpu_rate(river, "learn")),
                    predict=fmt_rate(_rate(river, "predict")),
                    acc=_acc(river.get("test_accuracy")),
                    x_vw=fmt_ratio(_ratio(river_learn, vw_learn)),
                    x_river="1.00x",
                )
            )
    return rows, criteria


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def to_json(obj: Any) -> Any:
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def print_report(
    results: dict[str, dict[str, Any]], rows: list[list[Any]], cold: dict[str, float]
) -> None:
    """The rates table, then the numba compile times per learner (cold, first call)."""
    print_table(
        "Online linear classifiers: examples/s (best of runs), same machine, same run",
        list(COLUMNS.values()),
        rows,
        right_align_from=2,
        caption=(
            "Rates are wall-clock (perf_counter), best run; 'upd/s cpu' uses this process's "
            "CPU time (excludes waiting for a core on a busy machine). acc: a9a = accuracy "
            "on a9a.t after one pass; synthetic = progressive (predict-then-learn) accuracy. "
            "xVW = ours/VW ws.learn (pre-parsed); xVWmax = ours/fastest VW (binding or C++ "
            "driver from cache); xVW cpu = xVW on CPU time; pred xVWmax = ours/fastest VW "
            "predict (ws.predict pays for its Python wrapper). Criteria (wall): "
            f">= {TARGET_RATE:,} ex/s and >= {TARGET_VW_RATIO:g}x VW for "
            f"{', '.join(TARGET_ALGOS)} (diag) on the {TARGET_STREAM} stream. "
            f"Load average at the end: {_loadavg()}."
        ),
    )
    learners = list(dict.fromkeys(n for res in results.values() for n in res["ours"]))
    if not learners:
        return
    snames = list(results)
    compile_rows = []
    for name in learners:
        cold_s = cold.get(name)
        firsts = [results[sn]["ours"].get(name, {}).get("first_call_s") for sn in snames]
        compile_rows.append(
            [name, f"{cold_s:.2f}s" if cold_s is not None else None]
            + [f"{f:.3f}s" if f is not None else None for f in firsts]
        )
    print_table(
        "Numba compile: fresh process with an empty cache (cold), and the first call "
        "on a tiny batch in this run, per stream (cache load or compile)",
        ["learner", "cold", *(f"first call {sn}" for sn in snames)],
        compile_rows,
    )
