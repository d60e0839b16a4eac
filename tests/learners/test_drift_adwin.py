"""ADWIN against River's ``drift.ADWIN`` (the oracle): identical detection points, and
the window statistics equal bit for bit at every step; plus state round trips."""

from __future__ import annotations

import doctest
import importlib
import itertools
import json
from typing import Any

import numpy as np
import pytest

from learners.drift import ADWIN
from tests.learners.drift_streams import (
    SEA_DRIFTS,
    bernoulli_shift,
    losses_with_shifts,
    river_run,
    sea_errors,
)

drift = pytest.importorskip("river.drift")

CONFIGS: list[dict[str, Any]] = [
    {},  # River's defaults: delta=0.002, clock=32, max_buckets=5, ...
    {"clock": 1},
    {"delta": 0.05, "clock": 3, "max_buckets": 2, "min_window_length": 1, "grace_period": 0},
    {"delta": 1e-5, "clock": 7, "max_buckets": 9, "min_window_length": 12, "grace_period": 40},
]


def _ours(values: np.ndarray, **params: Any) -> list[int]:
    return np.flatnonzero(ADWIN(**params).update_many(values)).tolist()


@pytest.mark.parametrize("params", [{}, {"clock": 1}, {"delta": 0.01}])
def test_sea_concept_drift_errors_of_arow(params: dict) -> None:
    errors = sea_errors()
    expected = river_run(drift.ADWIN(**params), errors)
    assert _ours(errors, **params) == expected
    # the test has teeth: River sees each of the two concept changes, soon after it
    assert len(expected) == 2
    assert SEA_DRIFTS[0] < expected[0] < SEA_DRIFTS[0] + 600
    assert SEA_DRIFTS[1] < expected[1] < SEA_DRIFTS[1] + 600


@pytest.mark.parametrize("seed", range(5))
def test_bernoulli_mean_shift(seed: int) -> None:
    values = bernoulli_shift(seed)
    for params in CONFIGS:
        expected = river_run(drift.ADWIN(**params), values)
        assert _ours(values, **params) == expected, params
        assert any(3000 <= i < 3400 for i in expected), params


@pytest.mark.parametrize("seed", range(4))
def test_real_valued_losses_step_by_step(seed: int) -> None:
    """Every step: same signal, and width, sum, squared deviations and mean equal."""
    values = losses_with_shifts(seed)
    for params in CONFIGS:
        ours, ref = ADWIN(**params), drift.ADWIN(**params)
        found = []
        for i, x in enumerate(values.tolist()):
            signal = ours.update(x)
            ref.update(x)
            assert signal == ref.drift_detected == ours.drift_detected, (params, i)
            assert ours.width == ref.width, (params, i)
            assert ours.total == ref.total, (params, i)
            assert ours.variance == ref.variance, (params, i)
            assert ours.estimation == ref.estimation, (params, i)
            if signal:
                found.append(i)
        assert len(found) >= 2, params  # the three mean changes are seen
        assert ours.n_detections == len(found)


def test_stationary_streams_signal_nothing() -> None:
    """20,000 values of a fixed distribution: River's ADWIN signals nothing, nor ours."""
    rng = np.random.default_rng(100)
    flags = (rng.random(20_000) < 0.3).astype(np.float64)
    losses = rng.random(20_000)
    for values in (flags, losses):
        assert river_run(drift.ADWIN(), values) == []
        detector = ADWIN()
        assert not detector.update_many(values).any()
        assert detector.n_detections == 0
        assert detector.width == 20_000  # nothing was ever dropped
        assert detector.estimation == pytest.approx(values.mean(), abs=1e-12)


def test_batches_of_any_size_match_single_updates() -> None:
    values = bernoulli_shift(7)
    one_by_one = ADWIN()
    singles = [one_by_one.update(x) for x in values.tolist()]
    chunked = ADWIN()
    bounds = [0, 1, 33, 500, 3001, 3002, 4500, len(values)]
    parts = [chunked.update_many(values[a:b]) for a, b in itertools.pairwise(bounds)]
    assert np.concatenate(parts).tolist() == singles
    assert chunked.to_state() == one_by_one.to_state()


@pytest.mark.parametrize("seed", range(6))
def test_state_round_trip_continues_exactly(seed: int) -> None:
    """Split at a random point, save as JSON, restore, continue: the same detections
    and the same final state as an uninterrupted run."""
    rng = np.random.default_rng(seed)
    values = losses_with_shifts(seed) if seed % 2 else bernoulli_shift(seed)
    params = CONFIGS[seed % len(CONFIGS)]
    whole = ADWIN(**params)
    expected = whole.update_many(values)
    split = int(rng.integers(1, len(values)))
    if seed == 0:  # right after a detection: the restored window must restart
        split = int(np.flatnonzero(expected)[0]) + 1
    first = ADWIN(**params)
    head = first.update_many(values[:split])
    saved = json.loads(json.dumps(first.to_state()))
    restored = ADWIN.from_state(first.params, saved)
    assert restored.to_state() == first.to_state()
    assert restored.drift_detected == first.drift_detected
    tail = restored.update_many(values[split:])
    assert np.concatenate([head, tail]).tolist() == expected.tolist()
    assert restored.to_state() == whole.to_state()
    assert (restored.width, restored.total, restored.variance) == (
        whole.width,
        whole.total,
        whole.variance,
    )


def test_state_floats_are_exact_hex() -> None:
    detector = ADWIN()
    detector.update_many([0.1, 0.7, 1 / 3, 0.0, 1.0] * 40)
    state = detector.to_state()
    assert float.fromhex(state["total"]) == detector.total
    assert float.fromhex(state["variance"]) == detector.variance
    sizes = [len(level) << lv for lv, level in enumerate(state["buckets"])]
    assert sum(sizes) == detector.width == 200


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"delta": 0.0}, "params.delta"),
        ({"delta": 1.5}, "params.delta"),
        ({"delta": "x"}, "params.delta"),
        ({"clock": 0}, "params.clock"),
        ({"clock": 2.0}, "params.clock"),
        ({"max_buckets": 1}, "params.max_buckets"),
        ({"min_window_length": 0}, "params.min_window_length"),
        ({"grace_period": -1}, "params.grace_period"),
        ({"grace_period": True}, "params.grace_period"),
    ],
)
def test_invalid_params_name_the_parameter(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ADWIN(**params)


def test_invalid_inputs_and_states_are_refused() -> None:
    detector = ADWIN()
    with pytest.raises(ValueError, match="values\\[2\\]"):
        detector.update_many([0.0, 1.0, float("nan")])
    with pytest.raises(ValueError, match="x: must be finite"):
        detector.update(float("inf"))
    assert detector.width == 0  # nothing was fed
    detector.update_many(bernoulli_shift(1)[:500])
    good = detector.to_state()
    with pytest.raises(ValueError, match="params: unknown"):
        ADWIN.from_state({"delta": 0.002, "alpha": 1}, good)
    broken = [
        ({**good, "format": "page_hinkley/1"}, "state.format"),
        ({**good, "total": 1.5}, "state.total"),
        ({**good, "variance": "nan"}, "state.variance"),
        ({**good, "tick": -(2**40)}, "state.tick"),
        ({**good, "drift_detected": 0}, "state.drift_detected"),
        ({**good, "buckets": []}, "state.buckets"),
        ({**good, "buckets": [*good["buckets"], []]}, "state.buckets\\[\\d+\\]"),
        ({**good, "buckets": [[["0x1p0"]], *good["buckets"][1:]]}, "state.buckets\\[0\\]\\[0\\]"),
        ({k: v for k, v in good.items() if k != "n_detections"}, "state.n_detections"),
    ]
    for state, message in broken:
        with pytest.raises(ValueError, match=message):
            ADWIN.from_state(detector.params, state)


def test_docstring_examples() -> None:
    module = importlib.import_module("learners.drift.adwin")
    result = doctest.testmod(module, verbose=False)
    assert result.attempted > 0 and result.failed == 0
