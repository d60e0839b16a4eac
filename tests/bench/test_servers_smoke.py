"""``bench/servers.py`` (issue 30) runs end to end with ``--quick`` and writes its JSON.

No timed assertions: what is checked is that every scenario was measured on every server
and app (requests answered, CPU counted), and that the correctness checks ran and found
granian and uvicorn alike: the same ``/update`` + ``/predict`` answers byte for byte, the
same 413 and 408, and an in-flight request answered through SIGTERM on both. Skipped
without granian (not a dependency: the ``bench`` extra), wrk or redis-server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.procs import find_redis_server

pytest.importorskip("granian")
if shutil.which("wrk") is None or find_redis_server() is None:
    pytest.skip("needs wrk and redis-server", allow_module_level=True)
if len(os.sched_getaffinity(0)) < 2:
    pytest.skip("pins wrk and the servers to two cores", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = {"GET /healthz", "POST /predict (1)", "POST /update (1)", "POST /update (100)"}


def test_servers_bench_measures_every_server_and_app(tmp_path: Path) -> None:
    args = [
        sys.executable,
        str(REPO / "bench" / "servers.py"),
        "--quick",
        "--out-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    doc = json.loads((tmp_path / "servers.json").read_text())
    assert json.loads(run.stdout)["scenarios"] == doc["scenarios"]

    seen = {(r["scenario"], r["server"], r["app"]) for r in doc["scenarios"]}
    assert seen == {
        (s, server, app)
        for s in SCENARIOS
        for server in ("uvicorn", "granian")
        for app in ("bare", "learnserve")
    }
    for r in doc["scenarios"]:
        assert r["req_per_s"] > 0 and r["errors"] == 0 and r["server_cpu_us_min"] > 0
    checks = doc["checks"]
    assert checks["update_predict_bytes_equal"], checks["first_differing"]
    for what, status in (("413_declared", 413), ("413_chunked", 413), ("408_stalled", 408)):
        assert checks[what]["uvicorn"]["status"] == status, checks[what]
        assert checks[what]["granian"]["status"] == status, checks[what]
    for name, got in checks["shutdown"].items():
        assert got["in_flight_answered"], (name, got)
