"""Batch models served over HTTP against the same scoring in process (issue 21).

LambdaMART, LL-SVM and FastXML, each trained here on LightGBM's lambdarank example
(``rank.train``: 300 features, ~95 non-zeros per document; a synthetic set of the same
shape when the data is absent), deployed to one learnserve (one uvicorn worker, SQLite
in a temp dir) with ``PUT /models/{name}/artifact``, then scored with ``POST /predict``
bodies of ``--batch`` (1,000) sparse documents (``{"x": {"1": 0.5, ...}}``, rank.test
replicated; LambdaMART's keys 1-based as its training file's), back to back from one
httpx keep-alive client (as ``bench/ranking.py`` does: the client's decoding of the
answers counts, its encoding of the bodies, done once before, does not). Next to it,
the model's own scoring of the same batch in this process (``predict``,
``decision_function``, ``predict_topk``), best of 30, and the same with the batch taken
from the test set in each call (``X.take``, as ``bench/ranking.py``'s in-process figure,
which issue 21 quotes). The ratio HTTP / in process is the figure (issue 21's goal:
>= 0.15 for each kind).

``--baseline REF`` runs an earlier commit's server on the same artifacts in the same run
(``bench/_baseline.py``).

    .venv/bin/python bench/batch_http.py --baseline 24642f3

JSON: ``bench/results/batch_http.json``.
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
import numpy as np  # noqa: E402
import orjson  # noqa: E402

from bench._baseline import (  # noqa: E402
    baseline_codes,
    code_env,
    learnserve_args,
    remove_exports,
)
from bench._common import fmt_rate, print_table, shared_data_dir, write_results  # noqa: E402
from learners.features import Batch  # noqa: E402
from tests.service.procs import free_port, start_service, stop_process  # noqa: E402


def data() -> tuple[Batch, np.ndarray, list[int], Batch, str]:
    """(train X, relevance, query sizes, test X, where from)."""
    from learners.io.svmlight import read_svmlight

    d = shared_data_dir() / "lightgbm-lambdarank"
    if (d / "rank.train").exists():
        tr = read_svmlight(d / "rank.train", n_features=300, query_file=d / "rank.train.query")
        te = read_svmlight(d / "rank.test", n_features=300, query_file=d / "rank.test.query")
        assert tr.group_sizes is not None
        return tr.X, tr.y, tr.group_sizes.tolist(), te.X, str(d)
    rng = np.random.default_rng(0)

    def sparse(n: int) -> Batch:
        X = np.zeros((n, 300))
        for row in X:
            row[rng.choice(300, 95, replace=False)] = rng.random(95)
        return Batch.from_dense(X)

    return sparse(3000), rng.integers(0, 5, 3000), [30] * 100, sparse(768), "synthetic"


def models(X: Batch, y: np.ndarray, groups: list[int]) -> dict[str, Any]:
    from learners.llsvm.model import LLSVM
    from learners.ranking.lambdamart import LambdaMART
    from learners.xml.fastxml import FastXML

    lm = LambdaMART(n_estimators=100, num_leaves=31, min_data_in_leaf=50).fit(X, y, groups)
    lm.meta_["index_base"] = 1  # rank.* are 1-based SVMlight files
    labels = np.where(y >= 2, "relevant", "not")
    sv = LLSVM(n_anchors=20, n_neighbours=4, passes=2, seed=0).fit(X, labels)
    Y = [[int(v)] for v in y]
    xml = FastXML(n_trees=8, max_leaf=16, labels_per_leaf=5, seed=0).fit(X, Y)
    return {"lambdamart": lm, "llsvm": sv, "fastxml": xml}


def in_process(name: str, model: Any, X: Any, repeats: int = 30) -> float:
    """Documents per second of the model's own scoring of ``X`` (what /predict runs;
    ``X`` may be a callable giving the batch, timed with the scoring)."""
    if name == "lambdamart":
        score = model.predict
    elif name == "llsvm":
        score = model.decision_function
    else:
        score = lambda b: model.predict_topk(b, k=5)  # noqa: E731
    score(X() if callable(X) else X)
    best = min(_timed(score, X) for _ in range(repeats))  # the quietest of many runs
    return (X() if callable(X) else X).n_rows / best


def _timed(fn: Any, X: Any) -> float:
    t0 = time.perf_counter()
    fn(X() if callable(X) else X)
    return time.perf_counter() - t0


def rows_of(X: Batch, base: int) -> list[dict[str, float]]:
    return [
        {str(int(j) + base): float(v) for j, v in zip(X.indices[a:b], X.values[a:b], strict=True)}
        for a, b in zip(X.indptr[:-1], X.indptr[1:], strict=True)
    ]


def over_http(code: Path, blobs: dict[str, bytes], bodies: dict[str, bytes],
              n_requests: int) -> dict[str, dict[str, float]]:  # fmt: skip
    port = free_port()
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-batch-http-") as data_dir:
        env = {"LEARNSERVE_DATA_DIR": data_dir, "LEARNSERVE_LOG_LEVEL": "warning",
               **code_env(code)}  # fmt: skip
        proc = start_service(learnserve_args(code, port), env, port, timeout=900,
                             health_path="/readyz")  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as c:
                headers = {"content-type": "application/json"}
                for name, blob in blobs.items():
                    r = c.put(f"/models/{name}/artifact", content=blob,
                              headers={"content-type": "application/octet-stream"})  # fmt: skip
                    assert r.status_code == 201, r.text
                for name, body in bodies.items():
                    for _ in range(3):  # warm: a baseline's kernels compile cold
                        r = c.post("/predict", content=body, headers=headers)
                        assert r.status_code == 200, r.text[:500]
                    lat = []
                    t0 = time.perf_counter()
                    for _ in range(n_requests):
                        t1 = time.perf_counter()
                        r = c.post("/predict", content=body, headers=headers)
                        r.json()
                        lat.append(time.perf_counter() - t1)
                    secs = time.perf_counter() - t0
                    docs = len(orjson.loads(body)["instances"])
                    out[name] = {"docs_per_s": docs * n_requests / secs,
                                 "p50_ms": sorted(lat)[len(lat) // 2] * 1e3}  # fmt: skip
        finally:
            stop_process(proc)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline", action="append", default=[], help="a git ref to measure too")
    ap.add_argument("--batch", type=int, default=1000, help="documents per /predict")
    ap.add_argument("--requests", type=int, default=30, help="timed requests per model")
    args = ap.parse_args()
    Xtr, y, groups, Xte, source = data()
    print(f"data: {source}; training ...", flush=True)
    ms = models(Xtr, y, groups)
    picks = np.arange(args.batch) % Xte.n_rows
    X = Xte.take(picks)
    blobs = {name: m.to_bytes() for name, m in ms.items()}
    bodies = {
        name: orjson.dumps({"model": name, "instances": [
            {"x": r} for r in rows_of(X, 1 if name == "lambdamart" else 0)]})
        for name in ms
    }  # fmt: skip
    local = {name: in_process(name, m, X) for name, m in ms.items()}
    # bench/ranking.py's in-process figure (issue 21's reference): the batch is taken
    # from the test set in each call, as a caller in process would build it
    taking = {name: in_process(name, m, lambda: Xte.take(picks)) for name, m in ms.items()}
    codes = baseline_codes(args.baseline, prefix="bench-batch-")
    http: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for label, code in codes.items():
            print(f"serving {label} ...", flush=True)
            http[label] = over_http(code, blobs, bodies, args.requests)
    finally:
        remove_exports(codes)
    rows = []
    for name in ms:
        for label in codes:
            h = http[label][name]
            rate = h["docs_per_s"]
            rows.append({"model": name, "code": label, "in_process_docs_per_s": local[name],
                         "in_process_with_take_docs_per_s": taking[name], **h,
                         "http_over_in_process": rate / local[name],
                         "http_over_in_process_with_take": rate / taking[name]})  # fmt: skip
    print_table(
        f"Batch models: /predict of {args.batch:,} sparse documents (~{X.nnz / X.n_rows:.0f} "
        "features each) vs in-process scoring of the same batch (goal >= 0.15x)",
        ["model", "code", "in process docs/s", "take + score docs/s", "HTTP docs/s", "p50 ms",
         "HTTP / in process", "HTTP / take + score"],
        [[r["model"], r["code"], fmt_rate(r["in_process_docs_per_s"]),
          fmt_rate(r["in_process_with_take_docs_per_s"]), fmt_rate(r["docs_per_s"]),
          f"{r['p50_ms']:.1f}", f"{r['http_over_in_process']:.3f}x",
          f"{r['http_over_in_process_with_take']:.3f}x"] for r in rows],
    )  # fmt: skip
    body_bytes = {k: len(v) for k, v in bodies.items()}
    path = write_results("batch_http", {"settings": vars(args), "data": source,
                                        "body_bytes": body_bytes, "results": rows})  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
