"""Decision models against Vowpal Wabbit on the bake-off of issue 34
(Bietti, Agarwal & Langford 2021): multiclass data as a bandit, an action per class,
reward 1 for the true class, one pass, progressive. In process: the adapter the rank
and reward routes call, fed each decision's reward before the next rank
(test_decisions_api.py shows HTTP gives the same state; ``bench/decisions.py`` runs
this through HTTP on more rows). VW runs on the same rows in the same order.

The figures pinned here were measured at this commit; the whole-data ones through
HTTP are in bench/README.md ("Issue 34")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from service.models.decision import DecisionAdapter
from service.settings import Settings
from tests.conftest import shared_data_dir

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from bench import _decision_sets as sets  # noqa: E402
from bench import decisions as bench  # noqa: E402

pytest.importorskip("vowpalwabbit")


def progressive_reward(data: Any, body: dict[str, Any]) -> float:
    """The in-process bake-off's figure (``bench/_decisions_seeds.py``, which the
    benchmark's HTTP runs are checked equal to)."""
    from bench._decisions_seeds import inprocess_reward

    return inprocess_reward(data, body)


def vw_best(data: Any) -> float:
    ctx, y, k = data
    lines = sets.vw_lines(ctx, y)
    explorers = [a for name, a in bench.VW.items() if "oaa" not in name]
    return max(bench.run_vw(a.format(k=k), lines) for a in explorers)


def dataset(name: str, rows: int) -> Any:
    path = shared_data_dir() / ("a9a/a9a" if name == "a9a" else "mnist")
    if not path.exists():
        pytest.skip(f"{path} absent (see shared/data/PROVENANCE.md)")
    return sets.SETS[name](rows)


def default_model(bits: int, **extra: Any) -> dict[str, Any]:
    return {"algorithm": "decision", "features": {"kind": "hashed", "bits": bits}, **extra}


def test_mnist_default_beats_vw() -> None:
    """Dense inputs (pixels, 10 actions): the default (the auto reward model,
    unweighted, γ = 10·√(K·t)), AROW and SGD over VW's best explorer (ε-greedy 0.05:
    0.5225; SquareCB 0.5195)."""
    data = dataset("mnist", 2000)
    vw = vw_best(data)
    ours = progressive_reward(data, default_model(20))
    assert ours == pytest.approx(0.6375, abs=0.015)  # SGD serves a while on these rows
    assert ours >= vw
    arow = progressive_reward(
        data, default_model(20, reward_model={"algorithm": "arow_regression"})
    )
    assert arow == pytest.approx(0.6505, abs=0.015)  # γ = 10·√t: 0.65
    assert arow >= vw
    sgd = {"algorithm": "sgd_regression"}
    sgd_ips = progressive_reward(data, default_model(20, reward_model=sgd, weighting="ips"))
    assert sgd_ips == pytest.approx(0.57, abs=0.015)  # crossing by names: 0.5455
    assert sgd_ips >= vw


def test_a9a_sgd_and_the_default_reach_vw() -> None:
    """Sparse binary inputs (2 actions): SGD unweighted and the default (auto) at or
    over VW's best (SquareCB, 0.8347); AROW alone 0.8334 (γ = 10·√(K·t)) is short of it
    on these rows (over seeds on all rows: bench/README.md, issue 34)."""
    data = dataset("a9a", 10_000)
    vw = vw_best(data)
    sgd = progressive_reward(data, default_model(18, reward_model={"algorithm": "sgd_regression"}))
    assert sgd == pytest.approx(0.8372, abs=0.005)
    assert sgd >= vw
    ours = progressive_reward(data, default_model(18))
    assert ours == pytest.approx(0.8361, abs=0.005)
    assert ours >= vw


def test_the_defaults_and_a_policy_that_needs_a_variance() -> None:
    settings = Settings(data_dir="/tmp/unused")
    config = DecisionAdapter.normalize_config(default_model(12), settings)
    assert (config["algorithm"], config["decision"]["weighting"]) == ("arow_regression", "none")
    assert config["decision"]["reward_algorithm"] == "auto"  # AROW serves first
    assert config["decision"]["policy_params"] == {
        "gamma": 10.0, "gamma_exponent": 0.5, "gamma_action_exponent": 0.5
    }  # fmt: skip
    body = default_model(12, exploration={"policy": "ucb"},
                         reward_model={"algorithm": "sgd_regression"})  # fmt: skip
    with pytest.raises(Exception, match="needs a reward model with a variance"):
        DecisionAdapter.normalize_config(body, settings)


def test_vw_seeds_through_the_cbify_emulation() -> None:
    """cbify draws with a fixed seed (``uniform_hash("vw")`` + the example counter), so
    ``--random_seed`` leaves its figure as it is; ``bench/_vw_cbify.py`` does cbify's
    part over VW's ``--cb_explore_adf``: with seed 0 it equals ``--cbify`` exactly on
    a9a's first 3,000 rows (ε-greedy and SquareCB), with another seed it draws anew."""
    from bench import _decisions_seeds as seeds
    from bench._vw_cbify import cbify_reward

    ctx, y, k = data = dataset("a9a", 3000)
    lines = sets.vw_lines(ctx, y)
    for explore, figure in (("--epsilon 0.05", 0.8003), ("--squarecb", 0.8197)):
        real = seeds.run_vw(f"--cbify {k} --cb_explore_adf {explore}", lines, seed=0)
        assert real == pytest.approx(figure, abs=5e-5)
        assert seeds.run_vw(f"--cbify {k} --cb_explore_adf {explore}", lines, seed=7) == real
        assert cbify_reward(explore, ctx, y, k, 0) == real
    assert cbify_reward("--squarecb", ctx, y, k, 1) != real
    assert seeds.inprocess_reward(data, default_model(18, seed=1)) != seeds.inprocess_reward(
        data, default_model(18)
    )
