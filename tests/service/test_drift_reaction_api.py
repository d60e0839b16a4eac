"""The reaction to a drift detection through HTTP (issue #23): ``drift.on_detection``.

``{"reopen_confidence": a}``: after an applied entry in which the detector found a
change, the model moves its covariance a fraction ``a`` back to its prior. The model
served is the one ``tests.learners.drift_reaction.run`` builds in process with the
same batches (same state digest, same detections), on every replica and after a
restart from checkpoint + log; bad reactions are 422s naming the field; a stored
config without ``on_detection`` (an older learnserve's) means ``"none"``.
"""

from __future__ import annotations

import doctest
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.models import drift_monitor
from service.models.config_compare import difference
from service.models.linear import LinearAdapter
from service.settings import Settings
from tests.learners.drift_reaction import run
from tests.learners.drift_streams import LabelledStream, a9a_flipping, agrawal_stream
from tests.service.procs import free_port, stop_process
from tests.service.serving import ServerThread, start_learnserve, start_learnserve_all
from tests.service.test_delayed_labels import SPARSE, info, ok
from tests.service.test_drift_api import BATCH, send


def reacting(algorithm: str, s: LabelledStream, amount: float) -> dict[str, Any]:
    on = {"reopen_confidence": amount}
    return {"algorithm": algorithm, "features": s.features,
            "drift": {"detector": "adwin", "on_detection": on}}  # fmt: skip


def entries_with_detections(detections: list[int]) -> int:
    return len({-(-i // BATCH) for i in detections})


@pytest.mark.parametrize(
    ("make", "algorithm", "amount"), [(a9a_flipping, "arow", 1.0), (agrawal_stream, "cw", 0.5)]
)
def test_the_served_model_is_the_in_process_run(
    make: Any, algorithm: str, amount: float, tmp_path: Path
) -> None:
    s: LabelledStream = make(3000) if make is a9a_flipping else make()
    expected = run(s, algorithm, amount)
    plain = run(s, algorithm, None)
    assert expected.detections and expected.state_digest != plain.state_digest
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/m", json=reacting(algorithm, s, amount)).status_code == 201
        send(c, "m", s.rows, s.labels)
        got = info(c, "m")
    d = got["drift"]
    assert got["config"]["drift"]["on_detection"] == {"reopen_confidence": amount}
    assert d["on_detection"] == {"reopen_confidence": amount}
    assert "on_detection" not in d["params"]
    assert d["detections"] == len(expected.detections)
    assert d["last_detection_example"] == expected.detections[-1]
    assert d["reactions"] == entries_with_detections(expected.detections)
    assert got["state_digest"] == expected.state_digest


def test_replicas_and_a_restart_hold_the_same_reacted_model(redis_url: str, tmp_path: Path) -> None:
    """Two processes on one Redis, each sending half the batches, then a third started
    fresh (checkpoint every 7 entries + the log after it): the same learner and detector
    everywhere, and the in-process run's."""
    s = a9a_flipping(3000)
    expected = run(s, "arow", 1.0)
    env = {**os.environ, "LEARNSERVE_REDIS_URL": redis_url, "LEARNSERVE_DATA_DIR": str(tmp_path),
           "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "7"}  # fmt: skip
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    version = len(s.rows) // BATCH
    wait = {"model": "m", "instances": [{"x": s.rows[0]}], "min_version": version}
    try:
        cs = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for p in ports]
        assert cs[0].put("/models/m", json=reacting("arow", s, 1.0)).status_code == 201
        for k, a in enumerate(range(0, len(s.rows), BATCH)):
            part = zip(s.rows[a : a + BATCH], s.labels[a : a + BATCH], strict=True)
            ex = [{"x": x, "y": y} for x, y in part]
            ok(cs[k % 2].post("/update", json={"model": "m", "examples": ex}))
        for c in cs:
            ok(c.post("/predict", json=wait))
        got = [info(c, "m") for c in cs]
        stop_process(procs.pop())
        port = free_port()
        procs.append(start_learnserve(port, env))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as fresh:
            ok(fresh.post("/predict", json=wait))
            got.append(info(fresh, "m"))
    finally:
        for p in procs:
            stop_process(p)
    assert {g["state_digest"] for g in got} == {expected.state_digest}
    assert len({g["drift"]["digest"] for g in got}) == 1
    assert got[0]["drift"]["reactions"] == entries_with_detections(expected.detections) >= 2


NONE = {"detector": "none"}
ADWIN = {"detector": "adwin"}
ON = "drift.on_detection"
AMOUNT = "drift.on_detection.reopen_confidence"


def reopen(amount: Any, detector: dict[str, Any] = ADWIN) -> dict[str, Any]:
    return {**detector, "on_detection": {"reopen_confidence": amount}}


@pytest.mark.parametrize(
    ("algorithm", "drift", "field"),
    [
        ("arow", {**ADWIN, "on_detection": "reopen"}, ON),
        ("arow", {**ADWIN, "on_detection": None}, ON),
        ("arow", {**ADWIN, "on_detection": {"reopen": 1}}, ON),
        ("arow", {**ADWIN, "on_detection": {"reopen_confidence": 1, "x": 1}}, ON),
        ("cw", reopen(0), AMOUNT),
        ("scw1", reopen(1.5), AMOUNT),
        ("scw2", reopen(True), AMOUNT),
        ("arow", reopen("1"), AMOUNT),
        ("arow", reopen(1, NONE), ON),  # no detector, nothing to react to
        ("pa", reopen(1), ON),  # no covariance
        ("pa1", reopen(1, {"detector": "page_hinkley"}), ON),
        ("ranksvm", reopen(1), ON),
    ],
)
def test_bad_reactions_are_refused(tmp_path: Path, algorithm: str, drift: Any, field: str) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        r = c.put("/models/m", json={**SPARSE, "algorithm": algorithm, "drift": drift})
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == field, r.text
        assert field in r.json()["detail"]["message"]
        assert c.get("/models/m").status_code == 404


def test_same_body_same_model_other_reaction_conflicts(tmp_path: Path) -> None:
    body = {**SPARSE, "drift": reopen(0.5)}
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert c.put("/models/m", json=body).status_code == 201
        assert c.put("/models/m", json=body).status_code == 200
        r = c.put("/models/m", json={**SPARSE, "drift": reopen(1)})
        assert r.status_code == 409, r.text
        assert r.json()["detail"]["field"] == AMOUNT
        r = c.put("/models/m", json=SPARSE)  # the default: no reaction
        assert r.status_code == 409 and r.json()["detail"]["field"] == ON
        assert c.put("/models/n", json={**SPARSE, "drift": NONE}).status_code == 201
        assert info(c, "n")["config"]["drift"] == {"detector": "none", "on_detection": "none"}
        assert info(c, "m")["config"]["drift"]["on_detection"] == {"reopen_confidence": 0.5}


def test_a_config_stored_before_reactions_means_none() -> None:
    settings = Settings()
    new = LinearAdapter.normalize_config(SPARSE, settings)
    assert new["drift"]["on_detection"] == "none"
    old = {**new, "drift": {k: v for k, v in new["drift"].items() if k != "on_detection"}}
    assert difference(old, new) is None
    assert drift_monitor.drift_monitor(old).reopen is None  # type: ignore[union-attr]
    asked = LinearAdapter.normalize_config({**SPARSE, "drift": reopen(1)}, settings)
    assert difference(old, asked) == (ON, "none", {"reopen_confidence": 1.0})


def test_docstring_examples_run() -> None:
    result = doctest.testmod(drift_monitor, verbose=False)
    assert result.attempted > 0 and result.failed == 0
