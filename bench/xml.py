"""FastXML on Bibtex against a one-vs-rest logistic regression (scikit-learn), in one run.

    .venv/bin/python bench/xml.py              # ~2-4 minutes
    .venv/bin/python bench/xml.py --trees 10 --repeats 1        # quicker look

Data: ``../shared/data/bibtex`` (XC text format, Mulan's split: 4,880 train /
2,515 test points, 1,836 binary features, 159 labels). Measured per model:

- P@1/3/5 and nDCG@1/3/5 on the whole test set (XC Repository definitions);
- training: wall and CPU seconds of one fit. FastXML twice: on all cores
  (``n_jobs=None``, trees on threads, the default) and on one thread (its CPU
  time is the work; the ratio of the two shows what the threads bought);
- prediction: test points per second of one call on the whole test set (best of
  ``--repeats`` after a warm-up), and the latency of a one-point call (what the
  HTTP service does per request), median of 200 calls.

The baseline is ``OneVsRestClassifier(LogisticRegression(solver="liblinear",
C=1.0))`` on the 159-column label matrix: 159 independent binary L2-regularised
logistic regressions (``n_jobs=-1``: in joblib worker processes, so its "CPU s"
counts only the parent's share), ranked by ``decision_function``. Numba
compile time is kept out of the timings (a tiny warm-up fit first). Results:
``bench/results/xml.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import measure, print_table, shared_data_dir, write_results
from learners.io.xc import XCData, read_xc
from learners.xml import FastXML, xml_metrics


def _timed(fn: Any) -> tuple[Any, float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def _latency(fn: Any, n: int = 200) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fastxml(name: str, tr: XCData, te: XCData, repeats: int, **kw: Any) -> dict:
    print(f"training {name} ...", flush=True)
    model, wall, cpu = _timed(lambda: FastXML(**kw).fit(tr.X, tr.Y, n_labels=tr.n_labels))
    labels, _ = model.predict_topk(te.X, k=5)
    t = measure(lambda _: model.predict_topk(te.X, k=5), repeats=repeats, warmup=1,
                n_items=te.X.n_rows)  # fmt: skip
    one = te.X.take([0])
    lat = _latency(lambda: model.predict_topk(one, k=5))
    m = xml_metrics(labels, te.Y)
    print(f"  P@1 {m['P@1']:.4f} P@3 {m['P@3']:.4f} P@5 {m['P@5']:.4f}; train {wall:.1f} s "
          f"(CPU {cpu:.1f} s); predict {t.rate:,.0f}/s", flush=True)  # fmt: skip
    return {
        "model": name, "params": {k: v for k, v in model.get_params().items()
                                  if k != "label_names"},
        "metrics": m, "train_s": wall, "train_cpu_s": cpu, "predict": t.to_json(),
        "predict_per_s": t.rate, "predict_one_ms": lat * 1e3,
        "n_nodes": int(model.forest_["child_pos"].shape[0]),
        "artifact_bytes": len(model.to_bytes()),
    }  # fmt: skip


def _ovr(tr: XCData, te: XCData, repeats: int) -> dict:
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    def csr(d: XCData) -> Any:
        return sp.csr_matrix((d.X.values, d.X.indices, d.X.indptr), shape=(d.X.n_rows, d.X.dim))

    # int64, not int8: with an int8 indicator matrix scikit-learn 1.9's OneVsRestClassifier
    # trains every estimator on the wrong column (P@1 0.007 instead of 0.6)
    Ytr = np.zeros((tr.X.n_rows, tr.n_labels), dtype=np.int64)
    for i, y in enumerate(tr.Y):
        Ytr[i, y] = 1
    Xtr, Xte = csr(tr), csr(te)
    name = "OvR LogisticRegression (liblinear, C=1)"
    print(f"training {name} ...", flush=True)
    clf = OneVsRestClassifier(LogisticRegression(solver="liblinear", C=1.0), n_jobs=-1)
    clf, wall, cpu = _timed(lambda: clf.fit(Xtr, Ytr))

    def top5(X: Any) -> np.ndarray:
        s = clf.decision_function(X)
        return np.argsort(-s, axis=1, kind="stable")[:, :5]

    labels = top5(Xte)
    t = measure(lambda _: top5(Xte), repeats=repeats, warmup=1, n_items=te.X.n_rows)
    one = Xte[:1]
    lat = _latency(lambda: top5(one))
    m = xml_metrics(labels, te.Y)
    print(f"  P@1 {m['P@1']:.4f} P@3 {m['P@3']:.4f} P@5 {m['P@5']:.4f}; train {wall:.1f} s",
          flush=True)  # fmt: skip
    return {
        "model": name, "metrics": m, "train_s": wall, "train_cpu_s": cpu,
        "predict": t.to_json(), "predict_per_s": t.rate, "predict_one_ms": lat * 1e3,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-single-thread", action="store_true")
    args = ap.parse_args()
    d = shared_data_dir() / "bibtex"
    if not (d / "bibtex_train.txt").exists():
        print(f"Bibtex not found under {d}; nothing to benchmark")
        return
    tr, te = read_xc(d / "bibtex_train.txt"), read_xc(d / "bibtex_test.txt")
    # compile (or load cached) numba kernels outside the timed fits
    FastXML(n_trees=2, max_leaf=50).fit(tr.X.take(range(300)), tr.Y[:300]).predict_topk(
        te.X.take([0]), 5
    )
    rows = [_fastxml(f"FastXML ({args.trees} trees, all cores)", tr, te, args.repeats,
                     n_trees=args.trees)]  # fmt: skip
    if not args.skip_single_thread:
        rows.append(_fastxml(f"FastXML ({args.trees} trees, 1 thread)", tr, te, args.repeats,
                             n_trees=args.trees, n_jobs=1))  # fmt: skip
    base = _ovr(tr, te, args.repeats)
    rows.append(base)
    table = []
    for r in rows:
        m = r["metrics"]
        if r is not base:
            r["vs_ovr"] = {
                "train_speedup": base["train_s"] / r["train_s"],
                "predict_speedup": r["predict_per_s"] / base["predict_per_s"],
                "P@1_gap": m["P@1"] - base["metrics"]["P@1"],
            }
        table.append([
            r["model"], f"{m['P@1']:.4f}", f"{m['P@3']:.4f}", f"{m['P@5']:.4f}",
            f"{m['nDCG@5']:.4f}", f"{r['train_s']:.1f}", f"{r['train_cpu_s']:.1f}",
            f"{r['predict_per_s']:,.0f}", f"{r['predict_one_ms']:.2f}",
            f"{r['vs_ovr']['train_speedup']:.2f}x" if "vs_ovr" in r else "-",
            f"{r['vs_ovr']['predict_speedup']:.2f}x" if "vs_ovr" in r else "-",
        ])  # fmt: skip
    print_table(
        "Bibtex (4,880 train / 2,515 test, 159 labels): FastXML vs one-vs-rest LR",
        ["model", "P@1", "P@3", "P@5", "nDCG@5", "train s", "train CPU s", "predict /s",
         "1-point ms", "train vs OvR", "predict vs OvR"],
        table,
        caption="published FastXML (XC Repository Bibtex): P@1 63.4, P@3 39.2, P@5 28.9",
    )  # fmt: skip
    path = write_results("xml", {"rows": rows}, extra_packages=("scikit-learn",))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
