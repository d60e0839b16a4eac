"""The kernel families the service runs, and which a model needs.

A family is compiled once per machine and code (seconds to minutes each); numba then
keeps the machine code on disk (``cache=True``, ``NUMBA_CACHE_DIR`` if set) and later
processes load it in about a second. The service brings a family in when the first
model that runs it is created or restored (:func:`families_for`,
:mod:`service.models.kernel_loader`: compiled in a process of its own, never on the event
loop); ``learnserve warmup`` (:func:`warm_parallel`) compiles them all ahead, as
``make test`` and the Docker image do.

Batch kinds (LambdaMART, LL-SVM, FastXML) are not warmed here: their kernels compile
when their first artifact is loaded, inside the deploy request, off the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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


def families() -> list[Family]:
    """Every kernel family, the costliest first (a parallel warm-up starts them first)."""
    from learners.linear import ALGORITHMS

    return [
        Family("records-scan", "raw-record request scanner", _records_scan),
        Family("records", "raw-record encoder (fields, text n-grams)", _records),
        Family("json", "JSON request scanners (dense examples and instances)", _json),
        Family("json-maps", "JSON request scanner (sparse, named and hashed features)", _json_maps),
        Family("linear", "linear learners: " + ", ".join(ALGORITHMS), _kind("linear")),
        Family("ranksvm", "RankSVM (all pairs and sampled pairs)", _kind("ranksvm")),
        Family("regression", "linear regressors: PA, PA-I, PA-II, AROW, SGD", _kind("regression")),
        Family("payload", "log-entry decoding (dense->CSR)", _payload),
        Family("drift", "drift detectors (ADWIN, Page-Hinkley)", _drift),
    ]


def family(name: str) -> Family:
    """The family called ``name`` (a ``KeyError`` for no such family)."""
    for fam in families():
        if fam.name == name:
            return fam
    raise KeyError(name)


# The scanners are optional: a body they have not been compiled for is parsed by the
# orjson path, to the same batch. The rest a model cannot run without.
SCANNERS = {"json", "json-maps", "records-scan"}


def families_for(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(required, optional)``: the families a model with this stored config runs;
    required before it can be loaded, optional (scanners) used once ready."""
    kind = config.get("kind", "linear")
    if kind == "decision":  # a regressor's kernels
        kind = "regression"
    if kind not in (
        "linear",
        "ranksvm",
        "regression",
    ):  # batch kinds compile in their load, off the loop
        return [], ["json-maps"]  # (its sparse /predict scanner)
    required, optional = [kind, "payload"], ["json", "json-maps"]
    features = config.get("features")
    if isinstance(features, dict) and features.get("kind") == "records":
        required.append("records")
        optional.append("records-scan")
    if config.get("drift"):
        required.append("drift")
    return required, optional


def warm_parallel(
    jobs: int,
    before: Callable[[int, int, Family], None] | None = None,
    after: Callable[[int, int, Family, dict[str, Any]], None] | None = None,
    names: list[str] | None = None,
) -> float:
    """Compile (or load) the families, each in a fresh process of its own
    (``service.models.kernel_families``: its CPU and peak memory are its own, its marker
    is left for the service), ``jobs`` at a time. ``after`` gets the child's figures.
    Returns the wall seconds; a family that fails raises ``RuntimeError``."""
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from service.models.kernel_families import child_command

    fams = [f for f in families() if names is None or f.name in names]

    def run(fam: Family) -> dict[str, Any]:
        done = subprocess.run(child_command(fam.name), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"warmup of {fam.name} failed:\n{done.stderr[-4000:]}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures

    t_all = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {}
        for i, fam in enumerate(fams, 1):
            if before is not None:
                before(i, len(fams), fam)
            futures[pool.submit(run, fam)] = (i, fam)
        for future in as_completed(futures):
            i, fam = futures[future]
            figures = future.result()
            if after is not None:
                after(i, len(fams), fam, figures)
    return time.perf_counter() - t_all
