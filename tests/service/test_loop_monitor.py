"""service.observability.loop_monitor: event-loop lag observed into
learnserve_event_loop_lag_seconds.

Timing assertions only go the way a slow machine cannot break: a loop blocked for
50 ms must show a lag of at least ~45 ms (load only makes it later). The arithmetic
(oversleep = elapsed - interval, never negative) is checked with a fake clock.
"""

from __future__ import annotations

import asyncio
import doctest
import time
import types
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest

from service.observability import loop_monitor
from service.observability import metrics as M
from service.observability.loop_monitor import start_loop_monitor, stop_loop_monitor
from service.settings import Settings


def _hist() -> dict[str, float]:
    """Cumulative bucket counts by ``le``, plus ``count`` and ``sum``."""
    out: dict[str, float] = {}
    for metric in M.EVENT_LOOP_LAG.collect():
        for s in metric.samples:
            if s.name.endswith("_bucket"):
                out[s.labels["le"]] = s.value
            elif s.name.endswith("_count"):
                out["count"] = s.value
            elif s.name.endswith("_sum"):
                out["sum"] = s.value
    return out


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after}


def test_a_blocked_loop_is_recorded() -> None:
    async def scenario() -> asyncio.Task[None]:
        task = start_loop_monitor(Settings(loop_lag_interval_seconds=0.005))
        await asyncio.sleep(0.02)  # the monitor runs and is asleep
        time.sleep(0.05)  # block the loop: the monitor wakes >= 45 ms late
        await asyncio.sleep(0.02)  # let it observe
        await stop_loop_monitor(task)
        return task

    before = _hist()
    task = asyncio.run(scenario())
    d = _delta(before, _hist())
    assert task.cancelled()
    assert d["count"] >= 1
    assert d["sum"] >= 0.04
    assert d["count"] - d["0.025"] >= 1  # at least one sample above the 25 ms bucket


def test_a_quiet_loop_samples_every_interval() -> None:
    async def scenario() -> None:
        task = start_loop_monitor(Settings(loop_lag_interval_seconds=0.005))
        await asyncio.sleep(0.1)  # the monitor's 5 ms timers fire before this one
        assert not task.done()
        await stop_loop_monitor(task)

    before = _hist()
    asyncio.run(scenario())
    assert _delta(before, _hist())["count"] >= 1


class _FakeClock:
    def __init__(self, steps: list[float]) -> None:
        self.t = 100.0
        self.steps = steps  # alternately: before a sleep (+0), after it (+step)
        self.calls = 0

    def perf_counter(self) -> float:
        if self.calls % 2:
            self.t += self.steps[self.calls // 2]
        self.calls += 1
        return self.t


@pytest.mark.parametrize(
    ("elapsed", "observed"),
    [(0.013, 0.003), (0.010, 0.0), (0.009, 0.0), (0.210, 0.2)],  # early wake-ups count 0
)
def test_the_lag_is_the_oversleep(
    monkeypatch: pytest.MonkeyPatch, elapsed: float, observed: float
) -> None:
    clock = _FakeClock([elapsed] * 3)
    monkeypatch.setattr(
        loop_monitor, "time", types.SimpleNamespace(perf_counter=clock.perf_counter)
    )

    async def scenario() -> None:
        task = asyncio.get_running_loop().create_task(loop_monitor.monitor_loop_lag(0.010))
        while clock.calls < 6:  # three observations
            await asyncio.sleep(0.001)
        await stop_loop_monitor(task)

    before = _hist()
    asyncio.run(scenario())
    d = _delta(before, _hist())
    assert d["count"] == 3
    assert d["sum"] == pytest.approx(3 * observed)
    bound = next(b for b in ("0.001", "0.005", "0.25") if observed <= float(b))
    assert d[bound] == 3


def test_exported_and_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    text = generate_latest(REGISTRY).decode()
    assert 'learnserve_event_loop_lag_seconds_bucket{le="0.01"}' in text
    assert Settings().loop_lag_interval_seconds == 0.025
    monkeypatch.setenv("LEARNSERVE_LOOP_LAG_INTERVAL_SECONDS", "0.001")
    assert Settings().loop_lag_interval_seconds == 0.001
    for bad in ("0", "-1"):
        monkeypatch.setenv("LEARNSERVE_LOOP_LAG_INTERVAL_SECONDS", bad)
        with pytest.raises(ValueError, match="loop_lag_interval_seconds"):
            Settings()


def test_doctest() -> None:
    result: Any = doctest.testmod(loop_monitor)
    assert result.attempted > 0 and result.failed == 0
