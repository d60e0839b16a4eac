"""Do LL-SVM's data-dependent defaults generalise? Test error per data set, JSON output.

    .venv/bin/python bench/llsvm_defaults.py                       # all, ~20-30 min
    .venv/bin/python bench/llsvm_defaults.py --datasets letter usps digits
    .venv/bin/python bench/llsvm_defaults.py --skip-svc mnist      # RBF SVC on MNIST: ~6 min

Data sets and splits: ``bench/llsvm_data.py`` (MNIST, USPS, UCI letter from
``../shared/data``; scikit-learn's digits; River's ImageSegments and Bananas). A
data set whose files are absent is reported as skipped. Per data set, each fit
once on the training split, error on the whole test split:

- ``rule``: ``learnserve train llsvm`` without flags, i.e. the rule of
  :mod:`learners.llsvm.defaults` on (n, d, classes);
- ``fixed``: ``LLSVM()``, the fixed MNIST-tuned defaults the CLI used before
  the rule (not refitted where the rule picks the same parameters: MNIST);
- ``paper``: the paper's formulation as far as it is known: 100 anchors from
  k-means over all rows, 8 neighbours, inverse-distance coordinates, raw (not
  normalised) rows, the last SGD iterate (no averaging), 10 passes, our lambda /
  t0 / skip (the paper's own parameters are lost, see
  ``shared/data/REFERENCE_RESULTS.md``), no bias (an unregularised per-anchor
  bias on these step sizes diverges: 32.5 % on letter);
- ``svc``: scikit-learn ``SVC(kernel="rbf", gamma="scale", C=10)``, C fixed at 10
  for every data set (not tuned).

Times are wall seconds of one fit (k-means included), on a machine shared with
other jobs (``machine.load_average`` in the JSON). Results:
``bench/results/llsvm_defaults.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

_HERE = Path(__file__).resolve().parent
# Run as a script, bench/ is sys.path[0], and its http.py would shadow the standard
# library's (scikit-learn's dataset loaders import it).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._common import print_table, write_results  # noqa: E402
from bench.llsvm_data import DATASETS, PAPER_ERROR, DataAbsent, load  # noqa: E402
from learners.llsvm import LLSVM  # noqa: E402
from learners.llsvm.defaults import resolve  # noqa: E402

PAPER_SETTINGS: dict[str, Any] = {
    "n_anchors": 100,
    "n_neighbours": 8,
    "weighting": "inverse",
    "anchors": "kmeans",
    "normalize": False,
    "average": False,
    "passes": 10,
}
SVC_C = 10.0


def _fit_error(model: Any, split: tuple[np.ndarray, ...]) -> dict[str, Any]:
    X, y, Xt, yt = split
    start = time.perf_counter()
    model.fit(X, y)
    train_s = time.perf_counter() - start
    err = float(np.mean(model.predict(Xt) != yt))
    return {"error": err, "train_s": train_s}


def run_dataset(name: str, *, svc: bool) -> dict[str, Any]:
    split = load(name)
    X, y, Xt, _ = split
    n, d = X.shape
    n_classes = int(np.unique(y).shape[0])
    params, notes = resolve(n, d, n_classes, {})
    row: dict[str, Any] = {
        "dataset": name,
        "n_train": n,
        "n_test": int(Xt.shape[0]),
        "d": d,
        "classes": n_classes,
        "rule_params": params,
        "rule_notes": notes,
        "paper_error": PAPER_ERROR.get(name),
    }
    print(f"{name}: n={n} d={d} classes={n_classes}; rule {params}", flush=True)
    row["rule"] = _fit_error(LLSVM(**params), split)
    fixed = LLSVM()
    if all(fixed.get_params()[k] == v for k, v in params.items()):
        row["fixed"] = {**row["rule"], "same_as_rule": True}
    else:
        row["fixed"] = _fit_error(fixed, split)
    row["paper"] = _fit_error(LLSVM(**PAPER_SETTINGS), split)
    if svc:
        from sklearn.svm import SVC

        row["svc"] = {**_fit_error(SVC(kernel="rbf", gamma="scale", C=SVC_C), split), "C": SVC_C}
    if row["paper_error"]:
        row["rule_vs_paper"] = row["rule"]["error"] / row["paper_error"]
    for key in ("rule", "fixed", "paper", "svc"):
        if key in row:
            print(f"  {key:6s} error {row[key]['error'] * 100:6.2f} %  "
                  f"train {row[key]['train_s']:7.1f} s", flush=True)  # fmt: skip
    return row


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    ap.add_argument("--skip-svc", nargs="*", default=None, metavar="DATASET",
                    help="leave the RBF SVC out on these data sets (no names: on all)")  # fmt: skip
    args = ap.parse_args()
    if args.skip_svc is None:
        skip_svc: set[str] = set()
    else:
        skip_svc = set(args.skip_svc) if args.skip_svc else set(DATASETS)
    # Compile (or load cached) numba kernels outside the timed fits.
    rng = np.random.default_rng(0)
    LLSVM(n_anchors=4, n_neighbours=2, passes=1).fit(rng.random((50, 3)), rng.integers(0, 2, 50))
    rows, skipped = [], {}
    for name in args.datasets:
        try:
            rows.append(run_dataset(name, svc=name not in skip_svc))
        except DataAbsent as exc:
            print(f"{name}: skipped ({exc})", flush=True)
            skipped[name] = str(exc)
    table = [
        [
            r["dataset"], f"{r['n_train']:,}", r["d"], r["classes"],
            _pct(r["rule"]["error"]), _pct(r["fixed"]["error"]), _pct(r["paper"]["error"]),
            _pct(r.get("svc", {}).get("error")), _pct(r["paper_error"]),
            "-" if "rule_vs_paper" not in r else f"{r['rule_vs_paper']:.2f}x",
            f"{r['rule']['train_s']:.1f}",
        ]
        for r in rows
    ]  # fmt: skip
    print_table(
        "LL-SVM test error (%): rule defaults vs fixed MNIST defaults vs paper-style vs RBF SVC",
        [
            "data set",
            "n",
            "d",
            "classes",
            "rule",
            "fixed",
            "paper-style",
            "SVC C=10",
            "paper",
            "rule/paper",
            "rule train s",
        ],
        table,
    )
    path = write_results(
        "llsvm_defaults", {"rows": rows, "skipped": skipped}, extra_packages=("scikit-learn",)
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
