"""Kernels compiled when a model first needs them, in a process of their own; numba's
disk cache keyed on every module a kernel inlines.

- A service answers at once with no model, compiles nothing it does not need, and
  while a raw-records model's kernels compile (a real compile, in a copy of the tree
  whose records cache is emptied) ``/healthz`` and another model's ``/predict`` keep
  answering; the records model answers 503 + Retry-After naming what compiles.
- A kernel whose inlined helper (another module) changed is compiled afresh, never
  served from the stale cache.
- ``learnserve warmup`` run twice loads every family from the cache the second time,
  each in its own process with its CPU time and peak memory printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from service.models.warmup import families
from tests.service.procs import free_port, start_service, stop_process

REPO = Path(__file__).resolve().parents[2]


def _warmup(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "service.cli", "warmup", *args],
        capture_output=True, text=True, timeout=1800, cwd=cwd,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run.stderr


def test_warmup_twice_loads_every_family_from_the_cache_the_second_time() -> None:
    _warmup("--jobs", "2")  # compiles what is not cached yet (make test did it already)
    out = _warmup("--jobs", "2")
    n = len(families())
    for fam in families():
        assert f": {fam.name}: {fam.what} ..." in out, out
        line = re.search(rf"warmup \d+/{n}: {re.escape(fam.name)} (.*) in \d+\.\ds \((.*)\)", out)
        assert line is not None, out
        assert line.group(1) == "loaded from cache", (fam.name, out)
        assert re.fullmatch(r"CPU \d+\.\ds, peak \d+ MB", line.group(2)), out
    assert re.search(r"warmup done in \d+\.\ds \(CPU \d+\.\ds, largest process \d+ MB\)", out)


def test_warmup_refuses_an_unknown_family() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "service.cli", "warmup", "--family", "nope"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    assert "--family: unknown ['nope']" in run.stderr


def _tree_copy(dst: Path) -> Path:
    """learners/ and service/ with their caches, as a checkout moved elsewhere."""
    for pkg in ("learners", "service"):
        shutil.copytree(REPO / pkg, dst / pkg, ignore=shutil.ignore_patterns("*.pyc"))
    return dst


def test_a_kernel_is_compiled_again_when_a_module_it_inlines_changes(tmp_path: Path) -> None:
    tree = _tree_copy(tmp_path / "tree")
    (tree / "learners" / "_probe_helper.py").write_text(
        "from numba import njit\n\n\n@njit(cache=True, inline='always')\n"
        "def helper():\n    return 1\n"
    )
    (tree / "learners" / "_probe_kernel.py").write_text(
        textwrap.dedent(
            """\
            from numba import njit

            from learners._probe_helper import helper


            @njit(cache=True)
            def kernel():
                return helper() * 10
            """
        )
    )
    probe = "import learners._probe_kernel as k; print(k.kernel())"

    def run() -> str:
        out = subprocess.run(
            [sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run() == "10"
    assert list((tree / "learners" / "__pycache__").glob("_probe_kernel.kernel-*.nbi"))
    assert run() == "10"  # from the cache
    (tree / "learners" / "_probe_helper.py").write_text(
        "from numba import njit\n\n\n@njit(cache=True, inline='always')\n"
        "def helper():\n    return 2\n"
    )
    # numba alone keys _probe_kernel's cache on _probe_kernel.py, unchanged: it would
    # answer 10 from the stale machine code.
    assert run() == "20"


def _put(c: httpx.Client, name: str, body: dict, deadline: float) -> httpx.Response:
    """PUT, following 503 + Retry-After (kernels loading) until answered or ``deadline``."""
    while True:
        r = c.put(f"/models/{name}", json=body)
        if r.status_code != 503 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


RECORDS = {
    "algorithm": "arow",
    "features": {"kind": "records", "bits": 12, "fields": {
        "age": {"type": "numeric"}, "job": {"type": "categorical"},
        "note": {"type": "text", "words": {"ngrams": 2}}}},
}  # fmt: skip


def test_a_records_compile_stops_neither_healthz_nor_another_models_predict(
    tmp_path: Path,
) -> None:
    # The kernels every linear model runs are cached (in this tree, which make test
    # warmed; copied with it); the records encoder's are not, in the copy: compiled for
    # real when the records model is created.
    _warmup("--family", "linear", "--family", "payload", "--family", "drift")
    tree = _tree_copy(tmp_path / "tree")
    for f in (tree / "learners" / "records" / "__pycache__").glob("*.nb[ic]"):
        f.unlink()
    port = free_port()
    proc = start_service(
        # -P: not the working directory (this checkout) first on sys.path: the copy's code
        [sys.executable, "-P", "-m", "service.cli", "serve", "--port", str(port),
         "--data-dir", str(tmp_path / "data")],
        {"PYTHONPATH": str(tree), "LEARNSERVE_KERNEL_WAIT_SECONDS": "0"}, port,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            dense = {"algorithm": "pa", "features": {"kind": "dense", "dim": 2}}
            r = _put(c, "a", dense, time.monotonic() + 120)
            assert r.status_code in (200, 201), r.text
            upd = {"model": "a", "examples": [{"x": [1.0, 0.0], "y": "p"},
                                              {"x": [0.0, 1.0], "y": "n"}]}  # fmt: skip
            assert c.post("/update", json=upd).status_code == 200
            ask = {"model": "a", "instances": [{"x": [1.0, 0.0]}]}

            r = c.put("/models/r", json=RECORDS)  # waits for nothing (wait 0): a 503
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"].isdigit()
            detail = r.json()["detail"]
            assert detail["error"] == "kernels_compiling"
            assert "records (raw-record encoder" in detail["message"], detail
            # the compile runs in a child process of the server's
            children: list[str] = []
            until = time.monotonic() + 15.0
            while not children and time.monotonic() < until:
                children = subprocess.run(
                    ["pgrep", "-f", "-P", str(proc.pid), "service.models.kernel_compile records"],
                    capture_output=True, text=True,
                ).stdout.split()  # fmt: skip
                time.sleep(0.1)
            assert children, "no compile process for the records family"

            slowest = 0.0
            until = time.monotonic() + 8.0
            while time.monotonic() < until:
                for method, path, body in (("GET", "/healthz", None), ("POST", "/predict", ask)):
                    t0 = time.perf_counter()
                    answer = c.request(method, path, json=body)
                    slowest = max(slowest, time.perf_counter() - t0)
                    assert answer.status_code == 200, answer.text
                r = c.post("/update", json={"model": "r", "examples": [
                    {"x": {"age": 30, "job": "x", "note": "a b"}, "y": "p"}]})  # fmt: skip
                assert r.status_code == 503 and r.json()["detail"]["error"] == "kernels_compiling"
                time.sleep(0.05)
            ready = c.get("/readyz").json()
            if "r" in ready["pending_models"]:  # (a fast machine may have finished)
                assert "records" in ready["pending_models"]["r"]
            # A compile inside the server would hold its event loop (and the GIL) for
            # tens of seconds: every answer here came within a couple of seconds.
            assert slowest < 2.0, slowest
    finally:
        stop_process(proc)
    time.sleep(0.5)
    left = subprocess.run(
        ["pgrep", "-f", f"{sys.executable} -m service.models.kernel_compile records"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert not [p for p in left if p in children], "the compile outlived its server"

    # Restarted while the records kernels are still not compiled: the dense model is
    # restored and served at once, the records model waits (pending, 503) on its own.
    proc = start_service(
        [sys.executable, "-P", "-m", "service.cli", "serve", "--port", str(port),
         "--data-dir", str(tmp_path / "data")],
        {"PYTHONPATH": str(tree)}, port,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            deadline = time.monotonic() + 60
            while (ready := c.get("/readyz")).status_code != 200:
                assert time.monotonic() < deadline, ready.text
                time.sleep(0.2)
            assert "records" in ready.json()["pending_models"]["r"], ready.text
            assert c.post("/predict", json=ask).status_code == 200
            r = c.post("/predict", json={"model": "r", "instances": [{"x": {"age": 1}}]})
            assert r.status_code == 503 and r.json()["detail"]["error"] == "kernels_compiling"
    finally:
        stop_process(proc)


@pytest.mark.parametrize("config", [
    {"kind": "linear", "features": {"kind": "dense", "dim": 2}},
    {"kind": "linear", "features": {"kind": "records"}, "drift": {"detector": "adwin"}},
    {"kind": "ranksvm", "features": {"kind": "hashed", "bits": 4}},
    {"kind": "lambdamart"},
])  # fmt: skip
def test_a_model_asks_for_the_families_its_kind_runs(config: dict) -> None:
    from service.models.warmup import SCANNERS, families_for

    required, optional = families_for(config)
    names = {f.name for f in families()}
    assert set(required) <= names and set(optional) <= SCANNERS
    kind = config["kind"]
    if kind == "lambdamart":
        assert required == [] and optional == ["json-maps"]
        return
    assert kind in required and "payload" in required
    records = config["features"]["kind"] == "records"
    assert ("records" in required) == records and ("records-scan" in optional) == records
    assert ("drift" in required) == ("drift" in config)
