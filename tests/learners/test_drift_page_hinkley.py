"""Page-Hinkley against River's ``drift.PageHinkley`` (the oracle): identical detection
points and running mean at every step; plus state round trips."""

from __future__ import annotations

import doctest
import importlib
import itertools
import json
from typing import Any

import numpy as np
import pytest

from learners.drift import PageHinkley
from tests.learners.drift_streams import (
    SEA_DRIFTS,
    bernoulli_shift,
    losses_with_shifts,
    river_run,
    sea_errors,
)

drift = pytest.importorskip("river.drift")

CONFIGS: list[dict[str, Any]] = [
    {},  # River's defaults: min_instances=30, delta=0.005, threshold=50, alpha=1-1e-4
    {"mode": "up"},
    {"mode": "down", "threshold": 8.0, "min_instances": 5},
    {"alpha": 0.99, "delta": 0.0, "threshold": 3.0},
]


def _ours(values: np.ndarray, **params: Any) -> list[int]:
    return np.flatnonzero(PageHinkley(**params).update_many(values)).tolist()


@pytest.mark.parametrize("params", [{}, {"threshold": 20.0}, {"mode": "up"}])
def test_sea_concept_drift_errors_of_arow(params: dict[str, Any]) -> None:
    errors = sea_errors()
    expected = river_run(drift.PageHinkley(**params), errors)
    assert _ours(errors, **params) == expected
    assert len(expected) >= 2
    if not params:  # defaults: one signal after each concept change, and no other
        assert len(expected) == 2
        assert SEA_DRIFTS[0] < expected[0] < SEA_DRIFTS[0] + 600
        assert SEA_DRIFTS[1] < expected[1] < SEA_DRIFTS[1] + 600


@pytest.mark.parametrize("seed", range(5))
def test_bernoulli_mean_shift(seed: int) -> None:
    values = bernoulli_shift(seed)
    for params in CONFIGS:
        expected = river_run(drift.PageHinkley(**params), values)
        assert _ours(values, **params) == expected, params
        assert expected, params


@pytest.mark.parametrize("seed", range(4))
def test_real_valued_losses_step_by_step(seed: int) -> None:
    values = losses_with_shifts(seed)
    for params in CONFIGS:
        ours, ref = PageHinkley(**params), drift.PageHinkley(**params)
        found = []
        for i, x in enumerate(values.tolist()):
            signal = ours.update(x)
            ref.update(x)
            assert signal == ref.drift_detected == ours.drift_detected, (params, i)
            assert ours.estimation == ref._x_mean.get(), (params, i)
            assert ours.n_seen == ref._x_mean.n, (params, i)
            if signal:
                found.append(i)
        if "mode" not in params:  # a one-sided test may see none of these changes
            assert found, params
        assert ours.n_detections == len(found)


def test_stationary_streams() -> None:
    """Uniform losses (variance 1/12), 20,000 of them: River's PageHinkley signals
    nothing, nor ours. On 0/1 flags of rate 0.3 (variance 0.21) River's defaults do
    raise false alarms on so long a stream (threshold 50 against a random walk of
    standard deviation ~65 after 20,000 steps): ours raises the very same ones."""
    rng = np.random.default_rng(100)
    flags = (rng.random(20_000) < 0.3).astype(np.float64)
    losses = np.random.default_rng(102).random(20_000)
    assert river_run(drift.PageHinkley(), losses) == []
    detector = PageHinkley()
    assert not detector.update_many(losses).any()
    assert detector.n_detections == 0 and detector.n_seen == 20_000
    false_alarms = river_run(drift.PageHinkley(), flags)
    assert false_alarms == [2113, 9051]
    assert _ours(flags) == false_alarms


def test_batches_of_any_size_match_single_updates() -> None:
    values = losses_with_shifts(9)
    one_by_one = PageHinkley(threshold=5.0)
    singles = [one_by_one.update(x) for x in values.tolist()]
    assert sum(singles) >= 3
    chunked = PageHinkley(threshold=5.0)
    bounds = [0, 1, 29, 30, 31, 2500, 7999, len(values)]
    parts = [chunked.update_many(values[a:b]) for a, b in itertools.pairwise(bounds)]
    assert np.concatenate(parts).tolist() == singles
    assert chunked.to_state() == one_by_one.to_state()


@pytest.mark.parametrize("seed", range(6))
def test_state_round_trip_continues_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = losses_with_shifts(seed) if seed % 2 else bernoulli_shift(seed)
    params = CONFIGS[seed % len(CONFIGS)]
    whole = PageHinkley(**params)
    expected = whole.update_many(values)
    split = int(rng.integers(1, len(values)))
    if seed == 0:  # right after a detection: the restored detector must restart
        split = int(np.flatnonzero(expected)[0]) + 1
    if seed == 2:  # before the first value of a fresh start: min_increase is +inf
        split = 0
    first = PageHinkley(**params)
    head = first.update_many(values[:split])
    saved = json.loads(json.dumps(first.to_state()))
    restored = PageHinkley.from_state(first.params, saved)
    assert restored.to_state() == first.to_state()
    tail = restored.update_many(values[split:])
    assert np.concatenate([head, tail]).tolist() == expected.tolist()
    assert restored.to_state() == whole.to_state()
    assert restored.n_detections == whole.n_detections == int(expected.sum())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"min_instances": 0}, "params.min_instances"),
        ({"delta": -0.1}, "params.delta"),
        ({"threshold": 0.0}, "params.threshold"),
        ({"threshold": float("inf")}, "params.threshold"),
        ({"alpha": 0.0}, "params.alpha"),
        ({"alpha": 1.01}, "params.alpha"),
        ({"mode": "sideways"}, "params.mode"),
    ],
)
def test_invalid_params_name_the_parameter(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PageHinkley(**params)


def test_invalid_inputs_and_states_are_refused() -> None:
    detector = PageHinkley()
    with pytest.raises(ValueError, match="values\\[1\\]"):
        detector.update_many([0.5, float("inf")])
    with pytest.raises(ValueError, match="x: must be a real number"):
        detector.update("0.5")  # type: ignore[arg-type]
    assert detector.n_seen == 0
    detector.update_many(bernoulli_shift(3)[:100])
    good = detector.to_state()
    broken = [
        ({**good, "format": "adwin/1"}, "state.format"),
        ({**good, "mean": "0x1.0p+0x"}, "state.mean"),
        ({**good, "max_decrease": "inf"}, "state.max_decrease"),
        ({**good, "n_seen": -1}, "state.n_seen"),
        ({k: v for k, v in good.items() if k != "sum_increase"}, "state.sum_increase"),
    ]
    for state, message in broken:
        with pytest.raises(ValueError, match=message):
            PageHinkley.from_state(detector.params, state)


def test_docstring_examples() -> None:
    module = importlib.import_module("learners.drift.page_hinkley")
    result = doctest.testmod(module, verbose=False)
    assert result.attempted > 0 and result.failed == 0
