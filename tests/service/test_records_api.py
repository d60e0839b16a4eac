"""Raw records through HTTP (issue #22, first part): ``features.kind = "records"``.

A model created with a records config (``learners.records``) learns from raw JSON
records sent to ``/update`` and scores raw records at ``/predict``: UCI Adult's CSV rows
as they are (numbers binned, categories one-hot, an intercept) and SMS texts (words and
character n-grams). One pass through HTTP in batches equals the in-process figure (the
vectors depend on nothing but the record and the config), and reaches the issue's goals.
Statistics learned in log order (standardize, idf) are model state: the log keeps the
records, every worker encodes them at apply time with the statistics of the records
before them; two processes on one Redis and a third restored from checkpoint + log hold
the same statistics and weights (digest), which equal an in-process run.
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
        ({**RECORDS, "fields": {"t": {"type": "text", "idf": "yes"}}}, "features.fields.t.idf"),
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


STATEFUL = {
    "kind": "records",
    "bits": 18,
    "fields": {
        "age": {"type": "numeric", "transform": "standardize", "namespace": "n"},
        "hours": {"type": "numeric", "transform": "standardize", "namespace": "n"},
        "job": {"type": "categorical", "namespace": "c"},
        "note": {"type": "text", "idf": True, "chars": {"ngrams": [3, 4]}},
    },
    "interactions": [["c", "n"]],
}


def stateful_stream(n: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    words = ["late", "night", "shift", "remote", "senior", "junior", "sales", "paid"]
    out = []
    for _ in range(n):
        age, hours = float(rng.normal(40, 12)), float(rng.normal(38, 9))
        job = str(rng.choice(["clerk", "exec", "tech", "sales"]))
        note = " ".join(rng.choice(words, size=int(rng.integers(1, 6))).tolist())
        y = ">50K" if 0.05 * (age - 40) + 0.08 * (hours - 38) + (job == "exec") > 0.3 else "<=50K"
        out.append({"x": {"age": age, "hours": hours, "job": job, "note": note}, "y": y})
    return out


def in_process_digest(examples: list[dict[str, Any]], batch: int) -> str:
    """What the service's state_digest must be: AROW and the encoder, fed in log order."""
    import hashlib

    from learners.linear import make_classifier
    from learners.records import RecordEncoder

    enc = RecordEncoder(STATEFUL)
    clf = make_classifier("arow", enc.dim, {})
    for s in range(0, len(examples), batch):
        part = examples[s : s + batch]
        clf.update(enc.learn([e["x"] for e in part]), [e["y"] for e in part])
    return hashlib.sha256(f"{clf.state_digest()}:{enc.state_digest()}".encode()).hexdigest()


def test_statistics_are_model_state_in_log_order(tmp_path: Path) -> None:
    """standardize and idf: one entry of 100 records gives the state of 100 entries of one,
    and both equal the in-process encoder + learner fed in the same order."""
    examples = stateful_stream(100)
    want = in_process_digest(examples, 1)
    assert want == in_process_digest(examples, 100)  # a batch is only a transport
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        for name in ("one", "many"):
            r = c.put(f"/models/{name}", json={"algorithm": "arow", "features": STATEFUL})
            assert r.status_code == 201, r.text
        ok(c.post("/update", json={"model": "one", "examples": examples}))
        for e in examples:
            ok(c.post("/update", json={"model": "many", "examples": [e]}))
        assert info(c, "one")["state_digest"] == info(c, "many")["state_digest"] == want
        # a refused entry changes neither the weights nor the statistics
        bad = {"model": "one", "examples": [examples[0], {"x": {"age": "x"}, "y": "a"}]}
        assert c.post("/update", json=bad).status_code == 422
        assert info(c, "one")["state_digest"] == want
        # ids (delayed labels) keep features, not records: refused, naming the field
        r = c.post(
            "/predict", json={"model": "one", "instances": [{"x": examples[0]["x"], "id": "a"}]}
        )
        assert r.status_code == 422 and r.json()["detail"]["field"] == "instances[0].id", r.text


def test_statistics_on_two_processes_and_after_a_restart(redis_url: str, tmp_path: Path) -> None:
    import os

    from tests.service.procs import free_port, stop_process
    from tests.service.serving import start_learnserve, start_learnserve_all

    examples = stateful_stream(1200, seed=2)
    want = in_process_digest(examples, 50)
    env = {
        **os.environ,
        "LEARNSERVE_REDIS_URL": redis_url,
        "LEARNSERVE_DATA_DIR": str(tmp_path),
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "5",
        "LEARNSERVE_LOG_RETAIN_ENTRIES": "2",
    }
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    try:
        cs = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=60) for p in ports]
        assert (
            cs[0].put("/models/m", json={"algorithm": "arow", "features": STATEFUL}).status_code
            == 201
        )
        for k, s in enumerate(range(0, len(examples), 50)):
            ok(cs[k % 2].post("/update", json={"model": "m", "examples": examples[s : s + 50]}))
        wait = {"model": "m", "instances": [{"x": examples[0]["x"]}], "min_version": 24}
        seen = []
        for c in cs:
            ok(c.post("/predict", json=wait))
            seen.append(info(c, "m")["state_digest"])
        stop_process(procs.pop())
        port = free_port()
        procs.append(start_learnserve(port, env))
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as fresh:
            ok(fresh.post("/predict", json=wait))
            seen.append(info(fresh, "m")["state_digest"])
            assert info(fresh, "m")["last_checkpoint"]["position"] >= 20
    finally:
        for p in procs:
            stop_process(p)
    assert seen == [want] * 3


def test_sms_with_idf_through_http(sms: Any, tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        acc = one_pass_http(c, "sms", sms_config(chars={"ngrams": [3, 5]}, idf=True), sms)
    print(f"sms-spam, AROW words + chars 3-5 + idf, one pass through HTTP: {acc:.4f}")
    assert acc == pytest.approx(0.9874, abs=0.002)  # = in process, idf in log order


def test_export_import_keeps_the_statistics(tmp_path: Path) -> None:
    """GET /models/{name}/state of a records model with statistics, imported under another
    name: the same state_digest, the same predictions, and it learns on as the original."""
    examples = stateful_stream(300, seed=3)
    octets = {"content-type": "application/octet-stream"}
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert (
            c.put("/models/a", json={"algorithm": "scw1", "features": STATEFUL}).status_code == 201
        )
        ok(c.post("/update", json={"model": "a", "examples": examples[:200]}))
        blob = c.get("/models/a/state")
        assert blob.status_code == 200, blob.text
        r = c.put("/models/b", content=blob.content, headers=octets)
        assert r.status_code == 201, r.text
        assert info(c, "b")["state_digest"] == info(c, "a")["state_digest"]
        inst = {"instances": [{"x": e["x"]} for e in examples[200:220]]}
        pa = ok(c.post("/predict", json={"model": "a", **inst}))["predictions"]
        pb = ok(c.post("/predict", json={"model": "b", **inst}))["predictions"]
        assert pa == pb
        for name in ("a", "b"):
            ok(c.post("/update", json={"model": name, "examples": examples[200:]}))
        assert info(c, "b")["state_digest"] == info(c, "a")["state_digest"]


def test_the_client_sends_raw_records(tmp_path: Path) -> None:
    from service.client import Client

    examples = stateful_stream(200, seed=4)
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, Client(srv.url) as client:
        client.create_model("m", "arow", STATEFUL)
        summary = client.update("m", ((e["x"], e["y"]) for e in examples), batch_size=64)
        assert (summary.examples, summary.batches) == (200, 4)
        got = client.predict("m", [e["x"] for e in examples[:5]])
        assert len(got.predictions) == 5 and got.version == 4
        with srv.client() as c:
            assert info(c, "m")["state_digest"] == in_process_digest(examples, 64)


def test_a_deeply_nested_ignored_field_is_not_logged(tmp_path: Path) -> None:
    """Issue 32 item 7: a records model with standardize (its records go to the log) and
    an unknown field nested 300 deep: the encoder ignores it, so the log does not keep
    it (writing it was a 500, orjson's recursion limit)."""
    deep: Any = 1.0
    for _ in range(300):
        deep = {"a": deep}
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        assert (
            c.put("/models/m", json={"algorithm": "arow", "features": STATEFUL}).status_code == 201
        )
        ex = stateful_stream(3, seed=5)
        ex[1]["x"] = {**ex[1]["x"], "extra": deep}
        r = c.post("/update", json={"model": "m", "examples": ex})
        assert r.status_code == 200, r.text
        plain = stateful_stream(3, seed=5)
        assert (
            c.put("/models/p", json={"algorithm": "arow", "features": STATEFUL}).status_code == 201
        )
        assert c.post("/update", json={"model": "p", "examples": plain}).status_code == 200
        digests = [info(c, name)["state_digest"] for name in ("m", "p")]
    assert digests[0] == digests[1]


def test_a_records_config_cannot_take_more_features_than_the_service(tmp_path: Path) -> None:
    """Issue 32 item 9: max_features_per_record up to 1,000,000 let a record make 150,000
    features where a hashed model's example answers 413 above max_features_per_example."""
    settings = Settings(data_dir=str(tmp_path), max_features_per_example=1000)
    features = {"kind": "records", "bits": 12, "max_features_per_record": 150_000,
                "fields": {"c": {"type": "categorical"}}}  # fmt: skip
    with ServerThread(settings) as srv, srv.client() as c:
        r = c.put("/models/big", json={"algorithm": "arow", "features": features})
        assert r.status_code == 422, r.text
        assert r.json()["detail"]["field"] == "features.max_features_per_record"
        features["max_features_per_record"] = 1000
        assert (
            c.put("/models/big", json={"algorithm": "arow", "features": features}).status_code
            == 201
        )
        ex = [{"x": {"c": [f"v{i}" for i in range(1500)]}, "y": "a"}]
        r = c.post("/update", json={"model": "big", "examples": ex})
        assert 400 <= r.status_code < 500 and "examples[0].x" in r.text, r.text


def test_the_records_default_feature_limit_follows_the_services(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), max_features_per_example=500)
    features = {"kind": "records", "bits": 12, "fields": {"c": {"type": "categorical"}}}
    with ServerThread(settings) as srv, srv.client() as c:
        r = c.put("/models/m", json={"algorithm": "arow", "features": features})
        assert r.status_code == 201, r.text
        assert r.json()["config"]["features"]["max_features_per_record"] == 500


def test_an_idf_table_beyond_the_budget_is_refused(tmp_path: Path) -> None:
    """Issue 32 item 8: 100 idf fields at bits 24 (a 6.4 GB table) were accepted."""
    fields = {f"t{k}": {"type": "text", "idf": True} for k in range(100)}
    features = {"kind": "records", "bits": 24, "fields": fields}
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        r = c.put("/models/m", json={"algorithm": "arow", "features": features})
        assert r.status_code == 422 and r.json()["detail"]["field"] == "features.bits", r.text
        assert "MiB table" in r.json()["detail"]["message"], r.text
        small = {"kind": "records", "bits": 16, "fields": fields}
        assert c.put("/models/m", json={"algorithm": "arow", "features": small}).status_code == 201
