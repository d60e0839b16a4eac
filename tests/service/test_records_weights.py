"""``GET /models/{name}/weights`` of a records model names the raw features behind each
weight (``age#3``, ``marital-status=Married-civ-spouse``), as ``/explain`` names them.

The names are recorded as hashed models' are (:mod:`service.models.feature_names`): the
worker parsing an update puts the names its copy does not know into the log entry, and
applying the entry records them, so they are a function of the log: the first ones in
log order, bounded by ``max_feature_names``, the same after a restart and in an export.
Adult's raw CSV rows (``adult-raw``), the first 3,000, through HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import learners
from learners.feature_keys import murmurhash3_32
from learners.io.records import read_csv_records
from learners.records import RecordEncoder
from service.settings import Settings
from tests.conftest import require_data
from tests.learners.test_records_quality import NUMERIC, adult_config
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import ok

N, BATCH = 3000, 500
CONFIG = adult_config("bins")
# The model's encoder has the stored config's fields, in sorted order: a record's names
# are made in that order, whatever the order of the body's fields.
SORTED = {**CONFIG, "fields": dict(sorted(CONFIG["fields"].items()))}


@pytest.fixture(scope="module")
def adult_head() -> tuple[list[dict[str, Any]], list[str]]:
    kw: dict[str, Any] = {"label": "class", "numeric": NUMERIC, "missing": "?"}
    recs, ys = read_csv_records(require_data("adult-raw", "adult.data"), **kw)
    return recs[:N], ys[:N]


def learn(c: httpx.Client, name: str, data: Any) -> None:
    assert c.put(f"/models/{name}", json={"algorithm": "arow", "features": CONFIG}).is_success
    recs, ys = data
    for s in range(0, N, BATCH):
        ex = [{"x": x, "y": y} for x, y in zip(recs[s : s + BATCH], ys[s : s + BATCH])]
        ok(c.post("/update", json={"model": name, "examples": ex}))


def recorded(c: httpx.Client, name: str) -> list[str]:
    r = c.get(f"/models/{name}/state")
    assert r.status_code == 200, r.text
    names = learners.load(r.content).feature_names_
    assert names is not None
    out: list[str] = names.names()
    return out


def test_weights_are_named_by_raw_features(adult_head: Any, tmp_path: Path) -> None:
    every = RecordEncoder(SORTED).names(adult_head[0])  # in the order the log makes them
    settings = Settings(data_dir=str(tmp_path))
    with ServerThread(settings) as srv, srv.client() as c:
        learn(c, "adult", adult_head)
        got = ok(c.get("/models/adult/weights", params={"top": 30}))
        assert got["feature_names"] == {"recorded": len(every), "limit": 100_000, "complete": True}
        entries = [e for cl in got["classes"] for e in cl["positive"] + cl["negative"]]
        assert len(entries) == 120  # 2 labels x 30 x 2 sides
        for e in entries:
            assert e["names"], e  # every weight learned comes from a named feature
            assert all(murmurhash3_32(n) & (2**20 - 1) == e["index"] for n in e["names"])
        (rich,) = [cl for cl in got["classes"] if cl["label"] == ">50K"]
        top = {n for e in rich["positive"] for n in e["names"]}
        assert "marital-status=Married-civ-spouse" in top  # Adult's best-known feature
        assert recorded(c, "adult") == every
        x = adult_head[0][0]
        explained = ok(c.post("/models/adult/explain", json={"x": x}))["explanations"][0]
        assert {f["name"] for f in explained["features"]} <= set(every)
        before = got
    with ServerThread(settings) as srv, srv.client() as c:  # restored: the same names
        assert ok(c.get("/models/adult/weights", params={"top": 30})) == before


def test_names_are_bounded_first_in_log_order(adult_head: Any, tmp_path: Path) -> None:
    every = RecordEncoder(SORTED).names(adult_head[0])
    with ServerThread(Settings(data_dir=str(tmp_path), max_feature_names=50)) as srv:
        with srv.client() as c:
            learn(c, "small", adult_head)
            got = ok(c.get("/models/small/weights", params={"top": 5}))
            assert got["feature_names"] == {"recorded": 50, "limit": 50, "complete": False}
            assert recorded(c, "small") == every[:50]
