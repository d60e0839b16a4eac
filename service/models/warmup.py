"""Compile (or load from numba's disk cache) the kernels the service runs, family by family.

A cold checkout compiles each family once (15-45 s each on a loaded machine); numba then
keeps the machine code on disk (``cache=True``, ``NUMBA_CACHE_DIR`` if set) and later runs
load it in well under a second. ``learnserve warmup`` runs this with visible progress
(``make serve`` and the Docker image run it before serving); the service runs it again at
start-up, off the event loop, and says in ``/readyz`` and its 503s which family it is on.

Batch kinds (LambdaMART, LL-SVM, FastXML) are not warmed here: their kernels compile
when their first artifact is loaded, inside the deploy request, off the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    what: str  # what gets compiled, for the progress line
    run: Callable[[], None]


def _json() -> None:
    from service.models import fast_json, fast_json_dense_instances

    fast_json.warmup()
    fast_json_dense_instances.warmup()


def _json_maps() -> None:
    from service.models import fast_json_maps

    fast_json_maps.warmup()


def _payload() -> None:
    from service.models import payload

    payload.warmup()


def _kind(kind: str) -> Callable[[], None]:
    def run() -> None:
        from service.models.kinds import adapter_class

        adapter_class(kind).warmup()

    return run


def _drift() -> None:
    import numpy as np

    from learners.drift.adwin import ADWIN
    from learners.drift.page_hinkley import PageHinkley

    for detector in (ADWIN(), PageHinkley()):
        detector.update_many(np.r_[np.zeros(40), np.ones(40)])


def _records() -> None:
    from learners.records import RecordEncoder

    enc = RecordEncoder({"kind": "records", "bits": 10, "interactions": [["a", "c"]], "fields": {
        "a": {"type": "numeric", "transform": "standardize"}, "c": {"type": "categorical"},
        "b": {"type": "numeric", "transform": {"bins": [1.0, 2.0]}},
        "t": {"type": "text", "idf": True, "words": {"ngrams": 2}, "chars": {"ngrams": [2, 3]}},
        "u": {"type": "text", "chars": {"ngrams": [2, 3], "across_words": True}}}})  # fmt: skip
    rows = [{"a": 1.0, "b": 1.5, "c": "x", "t": "hello world", "u": "é ab"},
            {"a": 2.0, "c": ["y", "z"], "t": "héllo", "u": "cd"}]  # fmt: skip
    enc.learn(rows)
    enc.encode(rows)
    enc.encode_named(rows)
    enc.explain(rows[0])


def _records_scan() -> None:
    from service.models import fast_json_records  # records bodies' compiled scanner

    fast_json_records.warmup_scanner()


def families(at_start: bool = False) -> list[Family]:
    """The kernel families, in the order they are warmed: every one for ``learnserve
    warmup`` (which fills numba's cache), those every online model needs at a service's
    start (``at_start``; a records model loads its encoder's kernels from the cache, ~0.4 s,
    at its first request)."""
    from learners.linear import ALGORITHMS

    # The costliest first, so a parallel warm-up starts them first.
    out = [
        Family("json", "JSON request scanners (dense examples and instances)", _json),
        Family("json-maps", "JSON request scanner (sparse, named and hashed features)", _json_maps),
        Family("linear", "linear learners: " + ", ".join(ALGORITHMS), _kind("linear")),
        Family("ranksvm", "RankSVM (all pairs and sampled pairs)", _kind("ranksvm")),
        Family("payload", "log-entry decoding (dense->CSR)", _payload),
        Family("drift", "drift detectors (ADWIN, Page-Hinkley)", _drift),
    ]
    if not at_start:  # (the scanner alone takes longest: the two compile side by side)
        out[:0] = [
            Family("records-scan", "raw-record request scanner", _records_scan),
            Family("records", "raw-record encoder (fields, text n-grams)", _records),
        ]
    return out


def _run_family(name: str) -> float:
    """In a worker process: warm one family by name; its seconds."""
    fam = next(f for f in families() if f.name == name)
    t0 = time.perf_counter()
    fam.run()
    return time.perf_counter() - t0


def warm_parallel(
    jobs: int,
    before: Callable[[int, int, Family], None] | None = None,
    after: Callable[[int, int, Family, float], None] | None = None,
) -> float:
    """Warm the families in ``jobs`` fresh processes at once (numba compiles on one core
    per process; each family's cache files are its own). Returns the wall seconds."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    fams = families()
    t_all = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that imported numba
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {}
        for i, fam in enumerate(fams, 1):
            if before is not None:
                before(i, len(fams), fam)
            futures[pool.submit(_run_family, fam.name)] = (i, fam)
        for future in as_completed(futures):
            i, fam = futures[future]
            seconds = future.result()  # a family that fails to compile fails the warm-up
            if after is not None:
                after(i, len(fams), fam, seconds)
    return time.perf_counter() - t_all


def warm_all(
    before: Callable[[int, int, Family], None] | None = None,
    after: Callable[[int, int, Family, float], None] | None = None,
    at_start: bool = False,
) -> float:
    """Warm every family; ``before(i, n, family)`` / ``after(i, n, family, seconds)``
    report progress (1-based ``i``). Returns the total seconds."""
    fams = families(at_start)
    t_all = time.perf_counter()
    for i, fam in enumerate(fams, 1):
        if before is not None:
            before(i, len(fams), fam)
        t0 = time.perf_counter()
        fam.run()
        if after is not None:
            after(i, len(fams), fam, time.perf_counter() - t0)
    return time.perf_counter() - t_all
