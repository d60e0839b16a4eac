"""Speed of the online linear classifiers (issue 2) against Vowpal Wabbit and River.

Run (about 2-3 minutes on 2 cores)::

    .venv/bin/python bench/online.py

Streams (built once, before any timing):

- ``a9a``: LIBSVM a9a (123 features, 32,561 rows; accuracy on ``a9a.t``), read from
  ``../shared/data/a9a`` or ``$LEARNSERVE_SHARED_DATA``; skipped with a message if absent.
- ``sparse``: synthetic, ``2**20`` dimensions, 20 non-zeros per row at random indices,
  values ~ N(0, 1), labels ``sign(w.x + noise)`` for a hidden Gaussian ``w``; fixed seed.
- ``dense``: synthetic, 100 dense features; only for AROW with a full covariance
  (``O(d^2)`` per example) next to the diagonal one.

What is timed (examples per second of the best of ``--repeats`` runs; medians in the JSON):

- ours: ``update`` of a fresh model on the whole pre-built ``Batch`` and on pre-built
  chunks of 1,000 and 100 rows (per-call overhead), then ``predict`` likewise. Numba
  compile / cache-load time is the first call on a tiny batch, reported apart.
- Vowpal Wabbit (``--quiet --noconstant -b 20 --loss_function logistic``): examples
  pre-parsed with ``Workspace.parse`` before timing; timed ``ws.learn(ex)`` /
  ``ws.predict(ex)`` over them. Because the Python wrapper dominates that cost, the
  raw binding (``pylibvw.vw.learn``) and VW's own C++ driver reading its binary cache
  are timed too; ``xVW`` is against ``ws.learn``, ``xVWmax`` against the fastest of all.
  VW's parsed examples take ~32 KB each, so a pool of ``--vw-pool`` examples is
  reused across passes (VW's per-example cost does not depend on having seen it).
- River ``PAClassifier`` on dict features, ``learn_one`` / ``predict_one``, on the first
  ``--river-n`` rows.

Writes ``bench/results/online.json``. The streams are in ``bench/_online_streams.py``,
our runs in ``bench/_online_ours.py``, the peers' in ``bench/_online_peers.py`` and the
table and criteria in ``bench/_online_report.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import shared_data_dir, stopwatch, write_results
from bench._online_ours import bench_ours, cold_compile
from bench._online_peers import VW_ARGS, bench_river, bench_vw
from bench._online_report import COLUMNS, build_rows, print_report, to_json
from bench._online_streams import Stream, load_a9a, synthetic_dense, synthetic_sparse

COVARIANCE_ALGOS = frozenset({"cw", "arow", "scw1", "scw2"})

# (table label, algorithm, params) of one of our learners
Run = tuple[str, str, dict[str, Any]]


def _runs(algos: Sequence[str]) -> list[Run]:
    """One run per algorithm, the covariance learners with a diagonal covariance."""
    return [
        (f"{a} (diag)", a, {"covariance": "diagonal"}) if a in COVARIANCE_ALGOS else (a, a, {})
        for a in algos
    ]


def _guard(label: str, errors: list[str], fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one measurement; a failing peer is reported, not fatal to the others."""
    try:
        return fn()
    except Exception as exc:
        errors.append(f"{label}: {type(exc).__name__}: {exc}")
        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"}


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="rows of the synthetic sparse stream")
    ap.add_argument("--dense-n", type=int, default=20_000, help="rows of the dense stream")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs (best is reported)")
    ap.add_argument("--vw-pool", type=int, default=10_000, help="pre-parsed VW examples")
    ap.add_argument("--river-n", type=int, default=20_000, help="rows timed for River")
    ap.add_argument("--algorithms", default=None, help="comma-separated subset of ours")
    ap.add_argument("--no-vw-native", action="store_true", help="skip VW's C++ driver runs")
    ap.add_argument(
        "--no-cold-compile", action="store_true", help="skip the fresh-cache compile timing"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="online", help="results file stem in bench/results/")
    return ap.parse_args(argv)


def _streams(args: argparse.Namespace, notes: list[str]) -> list[Stream]:
    """a9a (when its files are there), the synthetic sparse and dense streams."""
    streams: list[Stream] = []
    with stopwatch() as sw:
        a9a = load_a9a(shared_data_dir())
        if isinstance(a9a, str):
            notes.append(a9a)
            print(a9a, file=sys.stderr)
        else:
            streams.append(a9a)
        streams.append(synthetic_sparse(args.n, seed=args.seed))
        streams.append(synthetic_dense(args.dense_n, seed=args.seed + 1))
    print(
        f"streams built in {sw[0]:.1f}s (not timed): " + "; ".join(s.description for s in streams)
    )
    return streams


def _measure_stream(
    st: Stream, algos: Sequence[str], args: argparse.Namespace, tmpdir: Path, errors: list[str]
) -> dict[str, Any]:
    """Ours, then VW, then River on one stream."""
    print(f"-- {st.description}", flush=True)
    res: dict[str, Any] = {"description": st.description, "n": st.n,
                           "dim": st.X.dim, "nnz": st.X.nnz, "ours": {}}  # fmt: skip
    if st.name == "dense":
        todo = [("arow (diag)", "arow", {"covariance": "diagonal"}),
                ("arow (full)", "arow", {"covariance": "full"})]  # fmt: skip
        todo = [t for t in todo if t[1] in algos]
    else:
        todo = _runs(algos)
    for label, algo, params in todo:
        print(f"   ours {label}", flush=True)
        res["ours"][label] = _guard(
            f"{st.name}/{label}",
            errors,
            partial(bench_ours, st, algo, params, repeats=args.repeats, chunk_sizes=(1000, 100)),
        )
    print("   vowpal wabbit", flush=True)
    res["vw"] = _guard(
        f"{st.name}/vw",
        errors,
        partial(
            bench_vw,
            st,
            pool=args.vw_pool,
            repeats=args.repeats,
            tmpdir=tmpdir,
            native=not args.no_vw_native and st.name != "dense",
        ),
    )
    print("   river", flush=True)
    res["river"] = _guard(
        f"{st.name}/river",
        errors,
        partial(bench_river, st, n_max=args.river_n, repeats=args.repeats),
    )
    return res


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    errors: list[str] = []
    notes: list[str] = []
    try:
        from learners.linear import ALGORITHMS
    except ImportError as exc:
        ALGORITHMS = ()
        errors.append(f"learners.linear is not importable ({exc}); only peers are measured")
        print(errors[-1], file=sys.stderr)
    algos = tuple(args.algorithms.split(",")) if args.algorithms else tuple(ALGORITHMS)
    streams = _streams(args, notes)

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-online-") as td:
        cold: dict[str, float] = {}
        if algos and not args.no_cold_compile:
            todo = _runs(algos) + [("arow (full)", "arow", {"covariance": "full"})] * (
                "arow" in algos
            )
            print("cold numba compile in a fresh process ...", flush=True)
            with stopwatch() as sw:
                cold = _guard("cold compile", errors, partial(cold_compile, todo, Path(td)))
            cold.pop("error", None)
            print(f"   {sw[0]:.1f}s", flush=True)
        for st in streams:
            results[st.name] = _measure_stream(st, algos, args, Path(td), errors)

    rows, criteria = build_rows(results)
    print_report(results, rows, cold)
    path = write_results(
        args.out,
        {
            "config": vars(args) | {"vw_args": VW_ARGS},
            "cold_compile_s": cold,
            "streams": to_json(results),
            "criteria": criteria,
            "table": {"columns": list(COLUMNS.values()), "rows": rows},
            "notes": notes,
            "errors": errors,
        },
        extra_packages=("vowpalwabbit", "river"),
    )
    print(f"wrote {path}")
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
