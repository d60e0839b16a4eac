"""Issue 20, defect 10: what a hosted model holds in memory per entry applied settles.

Under steady load a worker's memory rose ~1.2 MB/min for tens of minutes over 60 models:
each model kept the "correct" count of its last 4096 entries in a dict of Python ints
(~475 KB a model once full, reached only after 4096 entries). Now a fixed ring
(``service.engine.recent_counts``): the memory a model holds does not grow with the
entries applied once its evaluation window is full. Measured with tracemalloc (bytes
allocated and still held), no timing."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from service.engine.model_handle import ModelHandle
from service.engine.recent_counts import RecentCounts
from service.models.linear import LinearAdapter
from service.settings import Settings
from tests.service.serving import ServerThread, dense_model


def _held_after(h: ModelHandle, payloads: list[bytes], start: int, n: int) -> int:
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for k in range(n):
        h.apply_entry(start + k, payloads[k % len(payloads)])
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before


def test_a_models_memory_does_not_grow_with_entries_applied() -> None:
    settings = Settings(eval_window=1)  # the window: one entry (its own test is elsewhere)
    body = {"algorithm": "arow", "features": {"kind": "dense", "dim": 3}}
    lin = LinearAdapter.create(LinearAdapter.normalize_config(body, settings))
    payloads = [
        lin.parse_update({"examples": [{"x": [1.0, float(k), 0.5], "y": y}]}, settings)[0]
        for k, y in enumerate("abab")
    ]
    h = ModelHandle("m", lin, settings)
    tracemalloc.start()
    try:
        _held_after(h, payloads, 1, 200)  # warm: labels, window, metric children
        held = _held_after(h, payloads, 201, 5000)
    finally:
        tracemalloc.stop()
    assert h.version == 5200
    # the answer's count of a recent entry is still there, an old one's is not
    assert h.correct_at.get(5200) in (0, 1) and h.correct_at.get(100) is None
    # before: ~116 bytes per entry (4096 of them kept: ~475 KB); now a ring of at most
    # 4096 slots of 12 bytes (48 KB)
    assert held < 60_000, held
    assert h.correct_at.nbytes == 4096 * 12


def test_recent_counts() -> None:
    rc = RecentCounts(8)
    for p in range(1, 30):
        rc.put(p, p * 10)
    assert [rc.get(p) for p in range(20, 30)] == [
        None,
        None,
        220,
        230,
        240,
        250,
        260,
        270,
        280,
        290,
    ]
    assert rc.get(-1) is None and rc.get(0) is None and rc.nbytes == 8 * 12
    # it grows as entries come: a model that learns little holds little
    small = RecentCounts(4096)
    assert small.nbytes == 16 * 12
    for p in range(1, 101):
        small.put(p, p % 7)
    assert small.nbytes == 128 * 12
    assert [small.get(p) for p in (1, 50, 100, 101)] == [1, 1, 2, None]


def test_nothing_of_a_dry_run_is_kept_once_a_request_is_answered(tmp_path: Path) -> None:
    """The dry run keeps its decoded entry for ``apply`` (by the bytes object); an
    entry that is not applied through that object (a replayed key, a refused append,
    an entry the apply loop took from the store first) must not stay there: before,
    up to 64 of them a model (~10 KB each) stayed until newer ones pushed them out."""
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/m", json=dense_model(3)).status_code == 201
        adapter = srv.app.state.engine.models["m"].adapter
        body = {"model": "m", "examples": [{"x": [1, 0, 0], "y": "a"}, {"x": [0, 1, 0], "y": "b"}]}
        assert c.post("/update", json=body).status_code == 200
        for _ in range(3):  # the first time, then two replays of the key
            r = c.post("/update", json=body, headers={"Idempotency-Key": "k1"})
            assert r.status_code == 200, r.text
        other = {"model": "m", "examples": [{"x": [0, 0, 1], "y": "a"}]}
        r = c.post("/update", json=other, headers={"Idempotency-Key": "k1"})
        assert r.status_code == 409, r.text  # the key with another body: refused
        assert c.post("/predict", json={"model": "m", "instances": [
            {"x": [1, 1, 0], "id": "i1"}]}).status_code == 200  # fmt: skip
        r = c.post("/update", json={"model": "m", "examples": [{"id": "i1", "y": "a"}]})
        assert r.status_code == 200, r.text
        assert len(adapter._checked) == 0, list(adapter._checked)
