"""LightGBM models imported with ``learnserve import lightgbm``: how exact, how fast.

For each model LightGBM trains here (its lambdarank example with lambdarank and
rank_xendcg, 100 trees; a9a binary, 100 trees; diabetes regression with 10 % NaN,
100 trees, and the same as a random forest), the imported artifact's scores are
compared with ``Booster.predict(raw_score=True)`` on the held-out rows (max
absolute difference; NDCG@k on the ranking test file), and both are timed scoring
those rows (best of ``--repeats``, one thread each: ``num_threads=1`` for LightGBM,
``NUMBA_NUM_THREADS=1`` recommended for ours).

    .venv/bin/python bench/lightgbm_import.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `bench` importable
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from bench._common import print_table, shared_data_dir, write_results


def _best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _cases(data: Path) -> list[tuple[str, dict[str, Any], Any, Any, Any, Any, Any]]:
    """(name, params, X_train, y_train, dataset kwargs, X_test, test extras)."""
    import scipy.sparse as sp
    from sklearn.datasets import load_diabetes

    from learners.io.svmlight import read_svmlight

    def csr(b: Any, dim: int) -> Any:
        return sp.csr_matrix((b.values, b.indices, b.indptr), shape=(b.n_rows, dim))

    out: list[tuple[str, dict[str, Any], Any, Any, Any, Any, Any]] = []
    rank = data / "lightgbm-lambdarank"
    if (rank / "rank.train").exists():
        tr = read_svmlight(rank / "rank.train", query_file=rank / "rank.train.query")
        te = read_svmlight(rank / "rank.test", query_file=rank / "rank.test.query")
        dim = max(tr.X.dim, te.X.dim)
        for obj in ("lambdarank", "rank_xendcg"):
            p = {
                "objective": obj,
                "num_leaves": 31,
                "min_data_in_leaf": 50,
                "min_sum_hessian_in_leaf": 5.0,
                "bagging_fraction": 0.9,
                "bagging_freq": 1,
            }
            out.append(
                (
                    obj,
                    p,
                    csr(tr.X, dim),
                    tr.y,
                    {"group": tr.group_sizes},
                    csr(te.X, dim),
                    (te.y, te.group_sizes),
                )
            )
    else:
        print(f"skipped ranking: {rank} is absent", file=sys.stderr)
    a9a = data / "a9a"
    if (a9a / "a9a").exists():
        tr, te = read_svmlight(a9a / "a9a"), read_svmlight(a9a / "a9a.t")
        dim = max(tr.X.dim, te.X.dim)
        out.append(
            (
                "binary (a9a)",
                {"objective": "binary"},
                csr(tr.X, dim),
                (tr.y > 0).astype(int),
                {},
                csr(te.X, dim),
                None,
            )
        )
    else:
        print(f"skipped a9a: {a9a} is absent", file=sys.stderr)
    X, y = load_diabetes(return_X_y=True)
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    for name, extra in (
        ("regression (diabetes, NaN)", {}),
        (
            "random forest (diabetes, NaN)",
            {"boosting": "rf", "bagging_freq": 1, "bagging_fraction": 0.7},
        ),
    ):
        p = {"objective": "regression", "num_leaves": 8, "min_data_in_leaf": 5, **extra}
        out.append((name, p, X[:300], y[:300], {}, X[300:], None))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    import lightgbm as lgb

    from learners.ranking.lambdamart import LambdaMART
    from learners.ranking.lightgbm_import import from_lightgbm_text
    from learners.ranking.ndcg import ndcg_at_k

    rows, results = [], []
    for name, params, Xtr, ytr, ds, Xte, extra in _cases(shared_data_dir()):
        b = lgb.train(
            {"verbose": -1, "num_threads": 1, **params}, lgb.Dataset(Xtr, ytr, **ds), args.trees
        )
        t0 = time.perf_counter()
        m = LambdaMART.from_bytes(from_lightgbm_text(b.model_to_string()).to_bytes())
        import_s = time.perf_counter() - t0
        ref = b.predict(Xte, raw_score=True)
        if m.meta_["average_output"]:
            ref = ref / b.num_trees()
        ours = m.predict(Xte)
        diff = float(np.max(np.abs(ours - ref)))
        r: dict[str, Any] = {
            "model": name,
            "trees": b.num_trees(),
            "test_rows": int(Xte.shape[0]),
            "max_abs_diff": diff,
            "import_seconds": import_s,
        }
        if extra is not None:
            yte, g = extra
            r["ndcg"] = {
                f"@{k}": [ndcg_at_k(ours, yte, g, k), ndcg_at_k(ref, yte, g, k)]
                for k in (1, 3, 5, 10)
            }
        r["ours_seconds"] = _best(lambda: m.predict(Xte), args.repeats)  # noqa: B023
        r["lightgbm_seconds"] = _best(lambda: b.predict(Xte, raw_score=True), args.repeats)  # noqa: B023
        results.append(r)
        nd = r.get("ndcg", {}).get("@10")
        rows.append(
            [
                name,
                r["trees"],
                r["test_rows"],
                f"{diff:.3g}",
                "-" if nd is None else f"{nd[0]:.6f} / {nd[1]:.6f}",
                f"{r['ours_seconds'] * 1e3:.2f}",
                f"{r['lightgbm_seconds'] * 1e3:.2f}",
            ]
        )
    print_table(
        "LightGBM import: imported artifact vs Booster.predict(raw_score=True)",
        [
            "model",
            "trees",
            "rows",
            "max |diff|",
            "NDCG@10 ours / LightGBM",
            "ours ms",
            "LightGBM ms",
        ],
        rows,
    )
    path = write_results("lightgbm_import", {"results": results}, extra_packages=["lightgbm"])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
