"""``learnserve evaluate-policy``: off-policy estimates on a DSJSON file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from learners.decisions.dsjson import DecisionRecord, records_from, to_dsjson, write_dsjson
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


def _segments_log(tmp_path: Path, n: int = 2000) -> tuple[Path, list[float]]:
    """A uniform-random log of 4 actions over 4 segments: the segment's own action pays
    1 with probability 0.9, any other 0.1."""
    rng = np.random.default_rng(1)
    seg = rng.integers(0, 4, size=n).tolist()
    chosen = rng.integers(0, 4, size=n).tolist()
    rewards = [float(rng.random() < (0.9 if a == s else 0.1)) for a, s in zip(chosen, seg)]
    recs = records_from(
        [f"e{i}" for i in range(n)], [{"seg": f"s{s}"} for s in seg],
        [[{"_id": f"a{j}", "kind": f"k{j}"} for j in range(4)]] * n, chosen,
        [[0.25] * 4] * n, rewards,
    )  # fmt: skip
    path = tmp_path / "segments.dsjson"
    write_dsjson(path, recs)
    return path, rewards


def test_a_decision_models_own_policy_on_the_log(tmp_path: Path) -> None:
    """--model: the config's policy as a challenger of the logging policy would see it.
    Its ε-greedy(0.05) policy, which learns which action pays in each segment, is worth
    about 0.9·0.96 + 0.1·0.04 once learned; the uniform logging policy 0.3."""
    path, rewards = _segments_log(tmp_path)
    config = tmp_path / "challenger.json"
    config.write_text(json.dumps({
        "algorithm": "decision", "features": {"kind": "hashed", "bits": 12},
        "exploration": {"policy": "epsilon_greedy", "params": {"epsilon": 0.05}},
    }))  # fmt: skip
    res = CliRunner().invoke(app, ["evaluate-policy", str(path), "--model", str(config)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    model = out["model"]
    assert model["rows"] == len(rewards) and model["exploration"]["policy"] == "epsilon_greedy"
    pol = model["policies"]
    assert set(pol) == {"served", "learned", "first", "uniform", "challenger"}
    # the logging policy and the uniform one: the file's own figures (same formulas)
    for ours, base in (("served", "logged"), ("uniform", "uniform")):
        assert pol[ours]["ips"]["estimate"] == pytest.approx(
            out["policies"][base]["ips"]["estimate"], rel=1e-12
        )
    mine = pol["challenger"]
    for est in ("ips", "snips", "dr"):
        assert 0.75 < mine[est]["estimate"] < 0.9, (est, mine)
        assert mine[est]["lo"] > pol["uniform"][est]["hi"]  # clearly better than the log's
    assert pol["learned"]["dr"]["estimate"] > mine["dr"]["estimate"] - 0.05


def test_a_bad_model_config_names_the_field(tmp_path: Path) -> None:
    path, _ = _segments_log(tmp_path, 20)
    config = tmp_path / "bad.json"
    bad = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 8},
           "exploration": {"policy": "nope"}}  # fmt: skip
    config.write_text(json.dumps(bad))
    res = CliRunner().invoke(app, ["evaluate-policy", str(path), "--model", str(config)])
    assert res.exit_code == 2 and "exploration.policy" in res.output, res.output
    config.write_text("[1, 2]")
    res = CliRunner().invoke(app, ["evaluate-policy", str(path), "--model", str(config)])
    assert res.exit_code == 2 and "decision model's config" in res.output, res.output
    # a line the model cannot encode: named in the log
    config.write_text(json.dumps({**bad, "exploration": {"policy": "squarecb"}}))
    listed = DecisionRecord("e0", {"seg": ["s1"]}, [{"_id": "a0"}], 0, [1.0], 1.0)
    path.write_text(to_dsjson(listed) + "\n")
    res = CliRunner().invoke(app, ["evaluate-policy", str(path), "--model", str(config)])
    assert res.exit_code == 2 and f"{path}: lines[0]: context.seg" in res.output, res.output
