"""What a decision model learned, by name, through real HTTP
(:mod:`service.models.decision_names`): ``GET /models/{name}/weights`` names every kind
of column (the action bias, action features, the context crossed with the action id and
features, for a hashed and a raw-record context), each name at the column the rows use;
a small model shows collisions; ``POST /models/{name}/explain`` takes an action's score
apart (the sum is the score ``rank`` gives); refused bodies are 4xx naming the field.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from learners.feature_keys import murmurhash3_32
from learners.features import FeatureSpec
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.models.decision_crossing import FNV_PRIME
from service.settings import Settings
from tests.service.serving import ServerThread
from tests.service.test_decisions_api import ok, refused

FIELDS = {
    "age": {"type": "numeric", "transform": {"bins": [25, 40, 60]}},
    "country": {"type": "categorical"},
    "query": {"type": "text"},
}
RECORDS = {"kind": "records", "bits": 16, "fields": FIELDS}
HASHED = {"kind": "hashed", "bits": 16}
ACTIONS = [{"id": f"a{i}", "features": {"topic": f"t{i % 2}", "len": 0.5 + i / 4}}
           for i in range(3)]  # fmt: skip


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("decision-names")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def context(i: int, records: bool) -> dict[str, Any]:
    if records:
        return {"age": 20 + 7 * i, "country": f"c{i % 3}", "query": "red shoes"}
    return {"age": (20 + 7 * i) / 100, "country": f"c{i % 3}"}


def learn(c: httpx.Client, name: str, features: dict[str, Any], n: int = 30, **extra: Any) -> None:
    body = {"algorithm": "decision", "features": features, **extra}
    r = c.put(f"/models/{name}", json=body)
    for _ in range(600):  # a kind's kernels compile on first use: 503 + Retry-After
        if r.status_code != 503:
            break
        time.sleep(float(r.headers.get("retry-after", 1)))
        r = c.put(f"/models/{name}", json=body)
    assert r.status_code in (200, 201), r.text
    records = features["kind"] == "records"
    for i in range(n):
        ctx = context(i, records)
        a = ok(c.post(f"/models/{name}/rank",
                      json={"context": ctx, "actions": ACTIONS, "event_id": f"e{i}"}))  # fmt: skip
        reward = float(a["action"] == f"a{i % 3}")
        ok(c.post(f"/models/{name}/reward", json={"event_id": f"e{i}", "reward": reward}))


def named_columns(c: httpx.Client, name: str) -> tuple[dict[str, int], dict[str, Any]]:
    """Every name /weights lists, at its index; and the answer."""
    w = ok(c.get(f"/models/{name}/weights", params={"top": 1000}))
    (cls,) = w["classes"]
    out: dict[str, int] = {}
    for e in cls["positive"] + cls["negative"]:
        assert e["collision"] == (len(e["names"]) > 1)
        assert len(set(e["names"])) == len(e["names"]), e  # (the constant once)
        for n in e["names"]:
            out[n] = e["index"]
    return out, w


def spec_of(c: httpx.Client, name: str) -> FeatureSpec:
    return FeatureSpec.from_config(ok(c.get(f"/models/{name}"))["config"]["features"])


@pytest.mark.parametrize("crossing", ["hash", "names"])
def test_weights_name_every_column_of_a_hashed_context(
    service: httpx.Client, crossing: str
) -> None:
    name = f"dn-hashed-{crossing}"
    learn(service, name, HASHED, crossing=crossing)
    names, w = named_columns(service, name)
    assert w["kind"] == "decision" and w["feature_names"]["recorded"] > 0
    # every kind of column (which (context, action) pairs were learned is the draw's)
    kinds = [r"id=a\d", r"a:topic=t\d", "a:len", r"c:age\|id=a\d", r"c:country=c\d\|id=a\d",
             r"c:age\|a:len", r"c:country=c\d\|a:topic=t\d", r"\^constant"]  # fmt: skip
    for k in kinds:
        assert any(re.fullmatch(k, n) for n in names), (k, sorted(names)[:20])
    mask = spec_of(service, name).dim - 1
    for n, col in names.items():  # the column the rows use
        if crossing == "hash" and n.startswith("c:"):  # crossed from the two hashes
            cname, own = n[2:].split("|")
            want = ((FNV_PRIME * (murmurhash3_32(cname) & mask)) ^ murmurhash3_32(own)) & mask
        else:  # the name's own hash
            want = murmurhash3_32(n) & mask
        assert want == col, n


def test_weights_name_the_crossed_columns_of_a_records_context(service: httpx.Client) -> None:
    learn(service, "dn-records", RECORDS)
    names, w = named_columns(service, "dn-records")
    assert w["feature_names"]["recorded"] > 0
    spec = spec_of(service, "dn-records")
    mask = spec.dim - 1
    ctx_cols = {n: col for n, col, _ in spec.encoder.explain(context(1, True))}
    assert {"^constant", "country=c1", "query^red", "age#1"} <= set(ctx_cols)
    kinds = [r"id=a\d", r"a:topic=t\d", "a:len", r"c:\^constant\|id=a\d",
             r"c:country=c\d\|id=a\d", r"c:query\^red\|a:len", r"c:age#\d\|a:topic=t\d",
             r"c:query\^shoes\|a:topic=t\d"]  # fmt: skip
    for k in kinds:  # (which actions a context was learned with is the policy's draw)
        assert any(re.fullmatch(k, n) for n in names), (k, sorted(names))
    for n, col in names.items():
        if not n.startswith("c:"):
            assert murmurhash3_32(n) & mask == col, n
            continue
        cname, action_part = n[2:].rsplit("|", 1)
        if cname in ctx_cols:  # the documented cross: ((FNV * c) ^ h(action part)) & mask
            assert ((16777619 * ctx_cols[cname]) ^ murmurhash3_32(action_part)) & mask == col


def test_a_small_model_shows_collisions(service: httpx.Client) -> None:
    learn(service, "dn-small", {**RECORDS, "bits": 3}, n=10)
    _, w = named_columns(service, "dn-small")
    (cls,) = w["classes"]
    entries = cls["positive"] + cls["negative"]
    assert any(e["collision"] and len(e["names"]) > 1 for e in entries)


@pytest.mark.parametrize("features", [HASHED, RECORDS], ids=["hashed", "records"])
def test_explain_sums_to_the_score_rank_gives(service: httpx.Client, features: Any) -> None:
    name = f"dn-explain-{features['kind']}"
    learn(service, name, features)
    records = features["kind"] == "records"
    body = {"context": context(4, records), "actions": ACTIONS}
    ranked = ok(service.post(f"/models/{name}/rank", json={**body, "event_id": "probe"}))
    scores = {r["id"]: r["score"] for r in ranked["ranking"]}
    ex = ok(service.post(f"/models/{name}/explain", json=body))
    serving = ok(service.get(f"/models/{name}"))["reward_models"]["serving"]  # (auto)
    assert ex["version"] == ranked["version"] and ex["reward_model"] == serving
    assert [a["id"] for a in ex["actions"]] == ["a0", "a1", "a2"]
    for a in ex["actions"]:
        total = ex["baseline"] + sum(f["contribution"] for f in a["features"])
        assert a["score"] == pytest.approx(scores[a["id"]], rel=1e-12, abs=1e-12)
        assert total == pytest.approx(a["score"], rel=1e-9, abs=1e-12) and not a["clipped"]
        names = {n for f in a["features"] for n in f["names"]}
        assert f"id={a['id']}" in names and "a:len" in names
        assert all(f["names"] for f in a["features"])  # every column named
        assert any(n.startswith("c:country=c1|") for n in names)
        for f in a["features"]:
            assert f["contribution"] == pytest.approx(f["value"] * f["weight"])


def test_refused_bodies_are_4xx_naming_the_problem(service: httpx.Client) -> None:
    learn(service, "dn-refused", RECORDS, n=2)
    url = "/models/dn-refused/explain"
    r = refused(service.post(url, json={"x": {"age": 30}}), 422, "x")
    assert "rank body" in r["message"]
    refused(service.post(url, json={"instances": [{"x": {}}]}), 422, "instances")
    refused(service.post(url, json={"context": {}, "actions": ACTIONS, "k": 1}), 422, "k")
    refused(service.post(url, json={"context": {}}), 422, "actions")
    refused(service.post(url, json={"context": {"age": "old"}, "actions": ACTIONS}), 422,
            "context.age")  # fmt: skip
    refused(service.post(url, json={"context": {}, "actions": []}), 422, "actions")
    refused(service.get("/models/dn-refused/weights", params={"label": "a0"}), 422, "label")
    assert service.post("/models/dn-missing/explain", json={"actions": ACTIONS}).status_code == 404


def test_names_are_bounded_by_max_feature_names() -> None:
    settings = Settings(data_dir="/tmp/unused", max_feature_names=7)
    body = {"algorithm": "decision", "features": RECORDS}
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(body, settings))
    for i in range(5):
        q = {"context": context(i, True), "actions": ACTIONS}
        _, record = model.rank(q, settings, f"e{i}", 0)
        model.apply(df.reward_entry([df.decode_event(record, model.spec.dim)], [1.0]))
    names = model.model.feature_names_
    assert model.config["decision"]["max_feature_names"] == 7
    assert len(names) == 7 and names.names()[0].startswith("id=")  # the first ones kept
    # and kept by a checkpoint, still bounded
    again = DecisionAdapter.from_checkpoint(model.config, bytes(model.snapshot()()))
    assert again.model.feature_names_.names() == names.names()
    assert again.model.feature_names_.full
