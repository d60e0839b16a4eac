"""River's synthetic drifting streams through HTTP: the model's detections are River's.

Two streams of ``tests.learners.drift_streams`` (fixed seeds, 20,000 examples, a change
every 5,000): River's SEA through its four thresholds (dense features), learned by AROW,
and River's Agrawal through functions 4, 0, 5 and 8 (hashed features), learned by
SCW-I; both joined by ``river.datasets.synth.ConceptDriftStream``. Sent in ``/update``
batches of 100; the model's ADWIN (the default) reads its progressive errors in log
order. River's ``drift.ADWIN`` fed the errors of the same learner on the same batches
in process must detect at the same examples, nothing before the first change; the
delay of the first detection after each change is printed
(``python -m pytest tests/service/test_drift_streams.py -s``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from learners.features import FeatureSpec
from service.settings import Settings
from tests.learners.drift_reaction import run
from tests.learners.drift_streams import LabelledStream, agrawal_stream, sea_stream
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import info
from tests.service.test_drift_api import BATCH, river_detections, send

CASES: dict[str, tuple[Callable[[], LabelledStream], str]] = {
    "sea": (sea_stream, "arow"),
    "agrawal": (agrawal_stream, "scw1"),
}


def delays(changes: tuple[int, ...], detections: list[int]) -> list[int | None]:
    """Examples from each change to the first detection after it (before the next one)."""
    out: list[int | None] = []
    for k, c in enumerate(changes):
        end = changes[k + 1] if k + 1 < len(changes) else float("inf")
        after = [i for i in detections if c < i <= end]
        out.append(after[0] - c if after else None)
    return out


def by_batch(detections: list[int]) -> list[tuple[int, int]]:
    """(examples sent when the count rose, the count then): what ``send`` observes."""
    ends: dict[int, int] = {}
    for i in detections:
        end = -(-i // BATCH) * BATCH
        ends[end] = ends.get(end, 0) + 1
    out, total = [], 0
    for end, n in ends.items():
        total += n
        out.append((end, total))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_detections_on_rivers_drifting_streams_are_rivers(name: str, tmp_path: Path) -> None:
    make, algorithm = CASES[name]
    s = make()
    ours = run(s, algorithm, None, batch=BATCH)  # in process, the service's batches
    expected = river_detections(ours.errors)
    assert ours.detections == expected  # learners' ADWIN in process, as a bonus
    assert len(expected) >= 2 and min(expected) > s.changes[0], expected  # quiet before
    print(f"\n{name} ({algorithm}): changes at {list(s.changes)}, River's ADWIN detects at "
          f"{expected}; delay after each change {delays(s.changes, expected)}")  # fmt: skip

    body = {"algorithm": algorithm, "features": s.features}
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/m", json=body).status_code == 201
        seen = send(c, "m", s.rows, s.labels)
        d = info(c, "m")["drift"]
    assert seen == by_batch(expected)
    assert d["detections"] == len(expected) and d["last_detection_example"] == expected[-1]
    assert d["values_seen"] == len(s.rows) and d["reactions"] == 0
    assert d["last_detection_version"] == -(-expected[-1] // BATCH)  # one entry per batch
    assert FeatureSpec.from_config(s.features).to_config() == s.features
