"""A replica applies the entries it reads from the store as runs (issue 21): the
gauges and counters are written once per run, and its own entries are applied from
its own copies. Both must leave exactly what one entry at a time leaves."""

from __future__ import annotations

import asyncio
import types
from typing import Any

from bench.update_path import DENSE, bodies
from service.engine import log_application
from service.engine.model_handle import ModelHandle
from service.models.linear import LinearAdapter
from service.observability import metrics as M
from service.settings import Settings
from service.store.base import chain_head, payload_digest
from service.store.redis import RedisStore

SETTINGS = Settings()
# Page-Hinkley with a low threshold: detections happen, so their gauges move too.
CONFIG = {**DENSE, "drift": {"detector": "page_hinkley", "threshold": 2}}


def _payloads(count: int) -> list[bytes]:
    ad = LinearAdapter.create(LinearAdapter.normalize_config(CONFIG, SETTINGS))
    out = []
    for b in bodies("dense", 50, count, seed=3):
        fast = ad.parse_update_raw(b, SETTINGS)
        assert fast is not None
        out.append(bytes(fast.payload))
    return out


def _handle(name: str) -> ModelHandle:
    M.forget_model(name)
    ad = LinearAdapter.create(LinearAdapter.normalize_config(CONFIG, SETTINGS))
    return ModelHandle(name, ad, SETTINGS)


def _shown(name: str) -> dict[str, Any]:
    """What /metrics shows of the model."""
    return {
        "version": M.MODEL_VERSION.labels(name)._value.get(),
        "learned": M.EXAMPLES_LEARNED.labels(name)._value.get(),
        "applied": M.LOG_ENTRIES_APPLIED.labels(name, "owner")._value.get(),
        "accuracy": M.ONLINE_ACCURACY.labels(name)._value.get(),
        "loss": M.ONLINE_LOSS.labels(name)._value.get(),
        "log_loss": M.ONLINE_LOG_LOSS.labels(name)._value.get(),
        "drift_detections": M.DRIFT_DETECTIONS.labels(name)._value.get(),
        "drift_estimate": M.DRIFT_ESTIMATE.labels(name)._value.get(),
        "drift_last": M.DRIFT_LAST_VERSION.labels(name)._value.get(),
    }


def _state(h: ModelHandle) -> dict[str, Any]:
    assert h.drift is not None
    return {
        "version": h.version,
        "head": h.head,
        "digest": h.adapter.state_digest(),
        "metrics": h.online_metrics(),
        "window": h.window.to_json(),
        "drift": h.drift.digest(),
        "examples_learned": h.examples_learned,
    }


def test_a_run_published_once_shows_what_entries_one_by_one_show() -> None:
    payloads = _payloads(40)
    one, run = _handle("runs-one-by-one"), _handle("runs-in-runs")
    head = ""
    for i, p in enumerate(payloads, 1):
        head = chain_head(head, p)
        one.apply_entry(i, p, head)
        run.apply_entry(i, p, head, publish=False)
        if i % 7 == 0 or i == len(payloads):
            assert _shown(run.name)["version"] < i  # nothing shown within the run
            run.publish()
            assert _shown(run.name) == _shown(one.name)
    assert _state(run) == _state(one)
    assert run.drift is not None and run.drift.detections > 0  # the drift gauges moved
    assert _shown(one.name)["applied"] == len(payloads)
    assert _shown(one.name)["learned"] == 50 * len(payloads)


class _Spy(RedisStore):
    """The real store, recording what the catch-up asks it for."""

    reads: list[tuple[int, int]]

    async def read_log(self, name: str, after: int, limit: int = 1000) -> Any:
        self.reads.append((after, limit))
        return await super().read_log(name, after, limit)


def test_catch_up_applies_own_entries_from_their_copies(redis_url: str) -> None:
    """Entries 1-3 of another worker, then ours at 4 and 6 (its dry run's decode kept
    by the adapter) around another's at 5: the store is read for 1-3 and 5 only, ours
    are applied from our copies, and the model is the one applying all from the log."""
    payloads = _payloads(6)

    async def main() -> None:
        store = _Spy(redis_url)
        store.reads = []
        await store.open()
        try:
            await store.create_model("m", {"kind": "linear"})
            h = _handle("runs-own-copies")
            appended = [await store.append_entry("m", p) for p in payloads]
            for pos in (4, 6):
                p = payloads[pos - 1]
                h.adapter.check_update(p)  # the dry run, as /update makes it
                h.local[pos] = (p, appended[pos - 1][1], payload_digest(p))
            registry = types.SimpleNamespace(store=store)
            h.name = "m"
            await log_application.catch_up_locked(registry, h, 6)  # type: ignore[arg-type]
            assert h.version == 6 and h.local == {}
            assert store.reads == [(0, 3), (4, 1)]  # never ours
            # our copies' checks were used (and so let go), not kept for entries
            # that came back from the store
            assert not h.adapter._checked  # type: ignore[attr-defined]
            ref = _handle("runs-from-log")
            ref.name = "m"
            await log_application.catch_up_locked(registry, ref)  # type: ignore[arg-type]
            assert _state(ref) == _state(h)
        finally:
            await store.close()

    asyncio.run(main())
