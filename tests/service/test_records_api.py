"""Raw records through HTTP (issue #22, first part): ``features.kind = "records"``.

A model created with a records config (``learners.records``) learns from raw JSON
records sent to ``/update`` and scores raw records at ``/predict``: UCI Adult's CSV rows
as they are (numbers binned, categories one-hot, an intercept) and SMS texts (words and
character n-grams). One pass through HTTP in batches equals the in-process figure (the
vectors depend on nothing but the record and the config), and reaches the issue's goals.
Statistics learned in log order (standardize, idf) are refused for now, naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.settings import Settings
from tests.learners.test_records_quality import adult_config, sms_config
from tests.service.serving import ServerThread
from tests.service.test_delayed_labels import info, ok

pytest_plugins = ["tests.learners.test_records_quality"]  # the adult and sms fixtures
BATCH = 1000


def one_pass_http(c: httpx.Client, name: str, features: dict[str, Any], data: Any) -> float:
    tr, ytr, te, yte = data
    body = {"algorithm": "arow", "features": features}
    r = c.put(f"/models/{name}", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["config"]["features"]["kind"] == "records"
    for s in range(0, len(tr), BATCH):
        ex = [{"x": x, "y": v} for x, v in zip(tr[s : s + BATCH], ytr[s : s + BATCH], strict=True)]
        ok(c.post("/update", json={"model": name, "examples": ex}))
    right = 0
    for s in range(0, len(te), BATCH):
        inst = [{"x": x} for x in te[s : s + BATCH]]
        preds = ok(c.post("/predict", json={"model": name, "instances": inst}))["predictions"]
        right += sum(p["label"] == v for p, v in zip(preds, yte[s : s + BATCH], strict=True))
    return right / len(te)


def test_adult_raw_records_one_pass(adult: Any, tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        acc = one_pass_http(c, "adult", adult_config("bins"), adult)
        assert info(c, "adult")["examples_learned"] == 32561
    print(f"adult-raw, AROW one pass through HTTP: {acc:.4f}")
    assert acc == pytest.approx(0.8612, abs=0.002)  # = in process (test_records_quality)
    assert acc >= 0.850  # the goal (VW one pass 0.846-0.850)


def test_sms_text_one_pass(sms: Any, tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        acc = one_pass_http(c, "sms", sms_config(chars={"ngrams": [3, 5]}), sms)
    print(f"sms-spam, AROW words + chars 3-5, one pass through HTTP: {acc:.4f}")
    assert acc == pytest.approx(0.9874, abs=0.002)
    assert acc >= 0.985  # the goal (VW one pass 0.978)


RECORDS = {
    "kind": "records",
    "bits": 16,
    "fields": {
        "age": {"type": "numeric", "transform": "log1p"},
        "job": {"type": "categorical"},
        "text": {"type": "text", "chars": {"ngrams": [3, 4]}},
    },
}


@pytest.mark.parametrize(
    ("x", "field"),
    [
        ({"age": "old"}, "examples[1].x.age"),
        ({"age": "__INF__"}, "examples[1].x.age"),  # a number over the float range
        ({"job": 3}, "examples[1].x.job"),
        ({"text": ["a"]}, "examples[1].x.text"),
    ],
)
def test_bad_records_change_nothing(tmp_path: Path, x: dict[str, Any], field: str) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert (
            c.put("/models/m", json={"algorithm": "arow", "features": RECORDS}).status_code == 201
        )
        good = {"age": 30, "job": "clerk", "text": "hello there"}
        ok(c.post("/update", json={"model": "m", "examples": [{"x": good, "y": "a"}]}))
        before = info(c, "m")
        body = {"model": "m", "examples": [{"x": good, "y": "b"}, {"x": x, "y": "a"}]}
        content = httpx.Request("POST", "/", json=body).content.replace(b'"__INF__"', b"1e999")
        r = c.post("/update", content=content, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == field, r.text
        after = info(c, "m")
        assert (after["version"], after["state_digest"]) == (
            before["version"],
            before["state_digest"],
        )


@pytest.mark.parametrize(
    ("features", "field"),
    [
        ({**RECORDS, "bits": 40}, "features.bits"),
        (
            {**RECORDS, "fields": {"age": {"type": "numeric", "transform": "standardize"}}},
            "features.fields.age.transform",
        ),
        ({**RECORDS, "fields": {"t": {"type": "text", "idf": True}}}, "features.fields.t.idf"),
        ({**RECORDS, "fields": {"age": {"type": "numbers"}}}, "features.fields.age.type"),
    ],
)
def test_bad_records_configs_are_refused(tmp_path: Path, features: Any, field: str) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        r = c.put("/models/m", json={"algorithm": "arow", "features": features})
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == field, r.text


def test_records_model_survives_a_restart(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ex = [{"x": {"age": float(rng.integers(18, 90)), "job": str(rng.choice(["a", "b", "c"])),
                 "text": "word " * int(rng.integers(1, 5))}, "y": str(rng.choice(["p", "n"]))}
          for _ in range(300)]  # fmt: skip
    settings = Settings(data_dir=str(tmp_path))
    with ServerThread(settings) as srv, srv.client() as c:
        assert (
            c.put("/models/m", json={"algorithm": "scw1", "features": RECORDS}).status_code == 201
        )
        ok(c.post("/update", json={"model": "m", "examples": ex}))
        digest = info(c, "m")["state_digest"]
        pred = ok(c.post("/predict", json={"model": "m", "instances": [{"x": ex[0]["x"]}]}))
    with ServerThread(settings) as srv, srv.client() as c:
        assert info(c, "m")["state_digest"] == digest
        again = ok(c.post("/predict", json={"model": "m", "instances": [{"x": ex[0]["x"]}]}))
        assert again["predictions"] == pred["predictions"]
