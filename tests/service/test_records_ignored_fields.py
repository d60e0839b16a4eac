"""Issue 31 item 2 (raw records): fields a model does not read are never learned silently.

Under ``"unknown_fields": "ignore"`` (the default) the ``/update`` answer lists the fields
left out and ``learnserve_ignored_fields_total`` counts them per model; a record none of
whose fields the model reads (every name a typo: ``Age``, ``sexx``) is refused with a 422
naming ``examples[i].x`` (``instances[i].x`` on ``/predict``), the model unchanged. The
compiled scanner hands every body with an unknown field to the general path, so both
paths answer alike; what is learned is what the same records without those fields teach.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import info, ok

FIELDS = {"age": {"type": "numeric", "transform": "log1p"}, "job": {"type": "categorical"}}


def _model(c: httpx.Client, name: str, **extra: Any) -> None:
    features = {"kind": "records", "bits": 12, "fields": FIELDS, **extra}
    r = c.put(f"/models/{name}", json={"algorithm": "arow", "features": features})
    assert r.status_code == 201, r.text


def _ignored_metric(c: httpx.Client, name: str) -> float:
    for line in c.get("/metrics").text.splitlines():
        if line.startswith(f'learnserve_ignored_fields_total{{model="{name}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_ignored_fields_are_listed_counted_and_not_learned(tmp_path: Path) -> None:
    rows = [({"age": 39, "job": "clerk"}, "a"), ({"age": 50, "job": "exec"}, "b")] * 3
    typo = [{**x, "sexx": "M", "id": k} if k % 2 else x for k, (x, _) in enumerate(rows)]
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        _model(c, "plain")
        _model(c, "typo")
        clean = [{"x": x, "y": y} for x, y in rows]
        answer = ok(c.post("/update", json={"model": "plain", "examples": clean}))
        assert "ignored_fields" not in answer  # (the compiled scanner's body)
        extra = [{"x": x, "y": y} for x, (_, y) in zip(typo, rows, strict=True)]
        answer = ok(c.post("/update", json={"model": "typo", "examples": extra}))
        assert answer["applied"] == 6 and answer["ignored_fields"] == ["sexx", "id"]
        assert _ignored_metric(c, "typo") == 6  # 3 examples x 2 fields
        assert _ignored_metric(c, "plain") == 0
        assert info(c, "typo")["state_digest"] == info(c, "plain")["state_digest"]


@pytest.mark.parametrize("route", ["update", "predict"])
def test_a_record_of_nothing_but_unknown_fields_is_refused(tmp_path: Path, route: str) -> None:
    # (a name of its own: the counters are the test process's, shared by its servers)
    m = f"refused-{route}"
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        _model(c, m)
        ok(c.post("/update", json={"model": m, "examples": [{"x": {"age": 30}, "y": "a"}]}))
        before = info(c, m)
        items = [{"x": {"age": 41, "job": "tech"}}, {"x": {"Age": 41, "sexx": "M"}}]
        if route == "update":
            body = {"model": m, "examples": [{**i, "y": "b"} for i in items]}
        else:
            body = {"model": m, "instances": items}
        r = c.post(f"/{route}", json=body)
        assert r.status_code == 422, r.text
        where = "examples" if route == "update" else "instances"
        detail = r.json()["detail"]
        assert detail["field"] == f"{where}[1].x", detail
        assert "'Age'" in detail["message"] and "age" in detail["message"], detail
        after = info(c, m)
        assert (after["version"], after["state_digest"]) == (
            before["version"],
            before["state_digest"],
        )
        assert _ignored_metric(c, m) == 0
        # an empty record is the client's explicit "nothing known": the intercept alone
        ok(c.post("/update", json={"model": m, "examples": [{"x": {}, "y": "a"}]}))


def test_refuse_mode_still_names_the_unknown_field(tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        _model(c, "m", unknown_fields="refuse")
        ex = [{"x": {"age": 3, "sexx": "M"}, "y": "a"}]
        r = c.post("/update", json={"model": "m", "examples": ex})
        assert r.status_code == 422 and r.json()["detail"]["field"] == "examples[0].x.sexx"
