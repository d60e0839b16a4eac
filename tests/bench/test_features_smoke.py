"""``bench/features.py`` (issue 22) runs end to end on tiny inputs and writes its JSON.

No timed assertions: the figures of a 200-row run mean nothing; what is checked is that
every measurement the README's table quotes is in the file, for every stream, and that
the runs saw the rows they were given (a bench that silently measured nothing would
print plausible numbers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import require_data

REPO = Path(__file__).resolve().parents[2]
ROWS = 200


def test_features_bench_writes_every_figure(tmp_path: Path) -> None:
    for parts in (("adult-raw", "adult.data"), ("sms-spam", "SMSSpamCollection"), ("a9a", "a9a")):
        require_data(*parts)
    args = [sys.executable, str(REPO / "bench" / "features.py"), "--limit", str(ROWS),
            "--rounds", "1", "--repeats", "1", "--inproc-rounds", "2",
            "--out-dir", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    doc = json.loads((tmp_path / "features.json").read_text())

    assert doc["machine"]["load_average"] is not None
    best = doc["http"]["best"]
    assert set(best) == {"adult-raw", "sms", "a9a"}
    for b in best.values():
        assert (b["examples"], b["requests"]) == (ROWS, ROWS // 100)
        assert b["server_cpu_us_per_example"] >= 0 and b["wall_us_per_example"] > 0
    assert set(doc["http_ratios"]) == {"adult-raw / a9a", "sms / a9a"}

    ext = doc["extraction"]
    assert set(ext) == {"adult-raw", "sms", "sms words 1-2"}
    for r in ext.values():
        assert r["nnz_per_record"] > 1 and r["rounds"] == 2
        for k in ("bytes -> batch", "encode", "learn", "json + encode"):
            assert r[k]["n_items"] == ROWS and r[k]["rate_cpu"] > 0
        vw = r["vw"]
        assert "skipped" in vw or (
            vw["records"] >= ROWS
            and "--noop" in vw["args"]
            and vw["parse_one_core"]["n_items"] == vw["records"]
        )
    assert "--ngram t2" in ext["sms"]["vw"].get("args", "--ngram t2")
