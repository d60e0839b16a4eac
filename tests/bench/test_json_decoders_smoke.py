"""``bench/json_decoders.py`` (issue 30) runs end to end with ``--quick`` and writes its JSON.

No timed assertions: what is checked is that every shape, endpoint and size was read by
each reader (the script asserts the readers' arrays equal before timing, so a zero exit
means msgspec and the orjson path read every body as the scanner does) and that the
compile and import costs are in the file. Skipped without msgspec (not a dependency).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("msgspec")

REPO = Path(__file__).resolve().parents[2]
SHAPES = {"dense", "sparse", "hashed", "adult", "sms"}
MODULES = {"fast_json", "fast_json_dense_instances", "fast_json_maps", "fast_json_instances",
           "fast_json_records", "msgspec"}  # fmt: skip


def test_json_decoders_bench_reads_every_body(tmp_path: Path) -> None:
    args = [sys.executable, str(REPO / "bench" / "json_decoders.py"), "--quick",
            "--rows", "1,10", "--compile", "cache", "--out-dir", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    doc = json.loads((tmp_path / "json_decoders.json").read_text())
    assert json.loads(run.stdout)["cases"] == doc["cases"]

    seen = {(c["shape"], c["endpoint"], c["rows"]) for c in doc["cases"]}
    assert seen == {(s, e, n) for s in SHAPES for e in ("update", "predict") for n in (1, 10)}
    for c in doc["cases"]:
        readers = {"orjson", "msgspec", "build"} | ({"scan"} if "msgspec/scan" in c else set())
        assert set(c["us_per_body"]) == readers and min(c["us_per_body"].values()) > 0
    assert {(c["shape"], c["endpoint"]) for c in doc["cases"] if "msgspec/scan" not in c} == {
        ("hashed", "predict")  # the one body shape without a scanner
    }
    assert set(doc["compile"]) == MODULES | {"mode"}
    for name in MODULES:
        cost = doc["compile"][name]["cached"]
        assert cost["peak_rss_mb"] >= cost["rss_numba_mb"] > 0 and cost["first_call_cpu_s"] >= 0
