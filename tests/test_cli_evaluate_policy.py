"""``learnserve evaluate-policy``: off-policy estimates on a DSJSON file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from learners.decisions.dsjson import records_from, write_dsjson
from service.cli.main import app


def test_estimates_on_a_uniform_log(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n, k = 400, 3
    chosen = rng.integers(0, k, size=n).tolist()
    rewards = [float(a == 0) * 0.8 + float(rng.random() < 0.1) for a in chosen]
    recs = records_from(
        [f"e{i}" for i in range(n)], [{"u": i % 5} for i in range(n)],
        [[{"_id": f"a{j}"} for j in range(k)]] * n, chosen, [[1 / k] * k] * n, rewards,
    )  # fmt: skip
    path = tmp_path / "log.dsjson"
    write_dsjson(path, recs)
    res = CliRunner().invoke(app, ["evaluate-policy", str(path)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["rows"] == n and out["unrewarded"] == 0
    mean = sum(rewards) / n
    pol = out["policies"]
    assert abs(pol["logged"]["ips"]["estimate"] - mean) < 1e-12
    assert abs(pol["uniform"]["ips"]["estimate"] - mean) < 1e-12  # q/p = 1 everywhere
    first = sum(r * k for a, r in zip(chosen, rewards, strict=True) if a == 0) / n
    assert abs(pol["first"]["ips"]["estimate"] - first) < 1e-9
    assert pol["first"]["ips"]["lo"] < first < pol["first"]["ips"]["hi"]


def test_a_bad_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.dsjson"
    path.write_text("{not json\n")
    res = CliRunner().invoke(app, ["evaluate-policy", str(path)])
    assert res.exit_code == 2 and "error:" in res.output
