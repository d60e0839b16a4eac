"""Our online linear classifiers, timed for ``bench/online.py``: ``update`` and
``predict`` of a fresh model on a whole pre-built stream and on pre-built chunks, and the
numba compile time apart (the first call in this process, and a fresh process with an
empty numba cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import measure, stopwatch
from bench._online_streams import Stream, chunked, slice_batch
from learners.features import Batch


def bench_ours(
    stream: Stream,
    algo: str,
    params: dict[str, Any],
    *,
    repeats: int,
    chunk_sizes: Sequence[int],
) -> dict[str, Any]:
    from learners.linear import make_classifier

    def make() -> Any:
        return make_classifier(algo, dim=stream.X.dim, params=params)

    # Labels in the learner's pre-parsed form (an int64 array), as VW's examples are
    # pre-parsed: the timed call is the learning itself, not list-to-array conversion.
    labels: Any = stream.y
    n = stream.n
    # First call on a tiny batch: numba compilation (or loading its on-disk cache).
    tiny = slice_batch(stream.X, 0, min(16, n))
    with stopwatch() as sw:
        warm = make()
        warm.update(tiny, labels[: tiny.n_rows])
        warm.predict(tiny)
        warm.decision_function(tiny)
    out: dict[str, Any] = {"params": params, "first_call_s": sw[0]}

    last: dict[str, Any] = {}

    def run_update(clf: Any) -> None:
        last["result"] = clf.update(stream.X, labels)
        last["model"] = clf

    out["update"] = measure(run_update, setup=make, repeats=repeats, warmup=0, n_items=n)
    res, clf = last["result"], last["model"]
    out["progressive_accuracy"] = res.correct / res.applied if res.applied else None
    out["updates_made"] = int(res.updates)

    for size in chunk_sizes:
        parts = chunked(stream.X, labels, size)

        def run_chunks(c: Any, parts: list[tuple[Batch, Any]] = parts) -> None:
            for b, lab in parts:
                c.update(b, lab)

        out[f"update_chunk{size}"] = measure(
            run_chunks, setup=make, repeats=repeats, warmup=0, n_items=n
        )

    out["predict"] = measure(lambda _: clf.predict(stream.X), repeats=repeats, warmup=1, n_items=n)
    out["decision_function"] = measure(
        lambda _: clf.decision_function(stream.X), repeats=repeats, warmup=1, n_items=n
    )
    for size in chunk_sizes:
        batches = [b for b, _ in chunked(stream.X, labels, size)]

        def run_pred(_: Any, batches: list[Batch] = batches) -> None:
            for b in batches:
                clf.predict(b)

        out[f"predict_chunk{size}"] = measure(run_pred, repeats=repeats, warmup=1, n_items=n)
    if stream.X_test is not None and stream.y_test is not None:
        pred = np.asarray(clf.predict(stream.X_test))
        out["test_accuracy"] = float(np.mean(pred == stream.y_test))
    return out


_COLD_COMPILE = """
import json, sys, time
import numpy as np
from learners.features import Batch
from learners.linear import make_classifier
X = Batch.from_dense(np.eye(4))
out = {}
for label, algo, params in json.loads(sys.argv[1]):
    t0 = time.perf_counter()
    clf = make_classifier(algo, dim=4, params=params)
    clf.update(X, [1, -1, 1, -1])
    clf.predict(X)
    out[label] = time.perf_counter() - t0
print(json.dumps(out))
"""


def cold_compile(todo: Sequence[tuple[str, str, dict[str, Any]]], tmpdir: Path) -> dict[str, float]:
    """Seconds to the first update+predict in a fresh process with an empty numba cache.

    The in-process "first call" only shows compile time when the on-disk cache
    is cold; this is the cost a new deployment without a cache pays, per learner
    in order (kernels shared by several learners compile once, for the first).
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmpdir / "numba-cache"))
    proc = subprocess.run(
        [sys.executable, "-c", _COLD_COMPILE, json.dumps([list(t) for t in todo])],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])
