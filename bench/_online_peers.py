"""The peers ``bench/online.py`` times next to ours, on the same streams in the same run:
Vowpal Wabbit (the Python wrapper, the raw binding and VW's own C++ driver) and River's
``PAClassifier``. Each is imported only when measured (the ``bench`` extra)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import measure, stopwatch
from bench._online_streams import Stream, slice_batch
from learners.features import Batch

VW_ARGS = "--quiet --noconstant -b 20 --loss_function logistic"


# --------------------------------------------------------------------------- Vowpal Wabbit


def vw_lines(stream: Stream, X: Batch | None = None, y: np.ndarray | None = None) -> list[str]:
    """VW text lines ``label | j:v ...``; numeric names hash to themselves in VW."""
    X = stream.X if X is None else X
    y = stream.y if y is None else y
    ip, ix, vs = X.indptr, X.indices.tolist(), X.values.tolist()
    out = []
    for i, lab in enumerate(y.tolist()):
        a, b = int(ip[i]), int(ip[i + 1])
        feats = " ".join([f"{j}:{v:.9g}" for j, v in zip(ix[a:b], vs[a:b], strict=True)])
        out.append(f"{lab} | {feats}")
    return out


def bench_vw(
    stream: Stream, *, pool: int, repeats: int, tmpdir: Path, native: bool
) -> dict[str, Any]:
    import vowpalwabbit
    from vowpalwabbit.pyvw import pylibvw

    out: dict[str, Any] = {"args": VW_ARGS, "version": vowpalwabbit.__version__}
    n_pool = min(pool, stream.n)
    lines = vw_lines(stream, slice_batch(stream.X, 0, n_pool), stream.y[:n_pool])
    out["pool"] = n_pool

    ws = vowpalwabbit.Workspace(VW_ARGS)
    with stopwatch() as sw:
        exs = [ws.parse(line) for line in lines]
    out["parse_rate"] = n_pool / sw[0]
    learn, predict = ws.learn, ws.predict
    raw_learn, raw_predict = pylibvw.vw.learn, pylibvw.vw.predict
    # Each timed run covers as many calls as ours (the pool cycled), so both sides
    # are measured over runs of similar length on this shared machine.
    seq = exs * max(1, round(stream.n / n_pool))
    out["calls_per_run"] = len(seq)

    def py_learn(_: Any) -> None:
        for e in seq:
            learn(e)

    def py_predict(_: Any) -> None:
        for e in seq:
            predict(e)

    def bind_learn(_: Any) -> None:
        for e in seq:
            raw_learn(ws, e)

    def bind_predict(_: Any) -> None:
        for e in seq:
            raw_predict(ws, e)

    for e in exs:  # warm-up: first touch of the weights, the pool in cache
        learn(e)
        predict(e)
    m = len(seq)
    out["learn"] = measure(py_learn, repeats=repeats, warmup=0, n_items=m)
    out["predict"] = measure(py_predict, repeats=repeats, warmup=0, n_items=m)
    out["learn_binding"] = measure(bind_learn, repeats=repeats, warmup=0, n_items=m)
    out["predict_binding"] = measure(bind_predict, repeats=repeats, warmup=0, n_items=m)
    seq.clear()
    for e in exs:
        ws.finish_example(e)
    ws.finish()
    exs.clear()

    if native:
        out.update(_vw_native(stream, tmpdir, repeats))
    if stream.X_test is not None and stream.y_test is not None:
        out["test_accuracy"] = _vw_test_accuracy(stream)
    return out


def _vw_native(stream: Stream, tmpdir: Path, repeats: int) -> dict[str, Any]:
    """VW's own C++ driver over the whole stream: from text, then from its binary cache."""
    import vowpalwabbit

    data = tmpdir / f"{stream.name}.vw"
    cache = tmpdir / f"{stream.name}.vw.cache"
    model = tmpdir / f"{stream.name}.model"
    empty = tmpdir / "empty.vw"
    empty.write_text("")
    data.write_text("\n".join(vw_lines(stream)) + "\n")
    n = stream.n

    def run(args: str) -> None:
        vowpalwabbit.Workspace(args).finish()

    # Workspace set-up/tear-down (weights allocation etc.) is subtracted from the runs.
    base = measure(lambda _: run(f"{VW_ARGS} -d {empty}"), repeats=repeats, warmup=1).best
    with stopwatch() as sw:  # parses text, learns, writes the cache
        run(f"{VW_ARGS} -d {data} --cache_file {cache} -f {model}")
    out: dict[str, Any] = {"driver_text_rate": n / max(sw[0] - base, 1e-9), "setup_s": base}
    t = measure(lambda _: run(f"{VW_ARGS} -d {data} --cache_file {cache}"), repeats=repeats)
    out["driver_cache_learn"] = t
    out["driver_cache_learn_rate"] = n / max(t.best - base, 1e-9)
    t = measure(
        lambda _: run(f"--quiet -t -i {model} -d {data} --cache_file {cache}"), repeats=repeats
    )
    out["driver_cache_predict"] = t
    out["driver_cache_predict_rate"] = n / max(t.best - base, 1e-9)
    for p in (data, cache, model, empty):
        p.unlink(missing_ok=True)
    return out


def _vw_test_accuracy(stream: Stream) -> float:
    """One streaming pass over the training rows, then the sign of VW's score on the test."""
    import vowpalwabbit

    assert stream.X_test is not None and stream.y_test is not None
    ws = vowpalwabbit.Workspace(VW_ARGS)
    for line in vw_lines(stream):
        ws.learn(line)  # a string is parsed, learned and finished by the wrapper
    test = vw_lines(stream, stream.X_test, stream.y_test)
    scores = np.array([ws.predict(line) for line in test])
    ws.finish()
    return float(np.mean(np.where(scores >= 0.0, 1, -1) == stream.y_test))


# --------------------------------------------------------------------------- River


def bench_river(stream: Stream, *, n_max: int, repeats: int) -> dict[str, Any]:
    import river
    from river.linear_model import PAClassifier

    def dicts(X: Batch) -> list[dict[int, float]]:
        ix, vs = X.indices.tolist(), X.values.tolist()
        ip = X.indptr.tolist()
        return [dict(zip(ix[a:b], vs[a:b], strict=True)) for a, b in itertools.pairwise(ip)]

    n = min(n_max, stream.n)
    xs = dicts(slice_batch(stream.X, 0, n))
    ys = (stream.y[:n] > 0).tolist()

    def make() -> Any:
        return PAClassifier(C=1.0, mode=1, learn_intercept=False)

    last: dict[str, Any] = {}

    def learn(m: Any) -> None:
        for x, t in zip(xs, ys, strict=True):
            m.learn_one(x, t)
        last["model"] = m

    out: dict[str, Any] = {
        "version": river.__version__,
        "n": n,
        "model": "PAClassifier(C=1, mode=1)",
    }
    out["learn"] = measure(learn, setup=make, repeats=repeats, warmup=0, n_items=n)
    m = last["model"]
    out["predict"] = measure(
        lambda _: [m.predict_one(x) for x in xs], repeats=repeats, warmup=0, n_items=n
    )
    if stream.X_test is not None and stream.y_test is not None:
        full = make()
        for x, t in zip(dicts(stream.X), (stream.y > 0).tolist(), strict=True):
            full.learn_one(x, t)
        pred = np.array([full.predict_one(x) for x in dicts(stream.X_test)])
        out["test_accuracy"] = float(np.mean(np.where(pred, 1, -1) == stream.y_test))
    return out
