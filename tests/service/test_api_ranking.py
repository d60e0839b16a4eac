"""Learning to rank over real HTTP: RankSVM (online) and LambdaMART (deployed artifacts).

RankSVM: create / update / predict with ``queries``, bit-identical to the library fed
the same groups, every input error named, progressive NDCG@10 in GET /models/{name}
and /metrics. LambdaMART: predict with ``queries`` and ``instances`` (1-based sparse
keys when the artifact says ``index_base`` 1), deploy v2, ``POST .../rollback``, bad
uploads refused with the serving version unchanged, no failed request while deploying.
"""

from __future__ import annotations

import doctest
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import service.models.queries
from learners.features import FeatureSpec
from learners.ranking.lambdamart import LambdaMART
from learners.ranking.ranksvm import make_ranker
from service.models.queries import sparse_rows
from service.settings import Settings
from tests.service.serving import ServerThread

DIM = 12
MAX_ITEMS = 50
PARAMS = {"lam": 0.01, "pairs_per_group": 6, "seed": 3}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("ranking-api"))


def settings(data_dir: str, **kw: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        max_batch_examples=MAX_ITEMS,
        max_features_per_example=20,
        catalog_poll_seconds=0.05,
        **kw,
    )


@pytest.fixture(scope="module")
def client(data_dir: str) -> Iterator[httpx.Client]:
    with ServerThread(settings(data_dir)) as srv, srv.client() as c:
        yield c


def flat(rows: Iterator[list[float]]) -> list[float]:
    return [v for row in rows for v in row]


def err(r: httpx.Response) -> dict[str, Any]:
    d: dict[str, Any] = r.json()["detail"]
    return d


def synthetic_queries(
    rng: np.random.Generator, n_queries: int, dense: bool
) -> tuple[list[dict[str, Any]], list[Any], list[int], list[int]]:
    """Queries whose relevance follows a hidden linear score (so NDCG can rise)."""
    w = np.linspace(1.0, -0.5, DIM)
    queries: list[dict[str, Any]] = []
    xs: list[Any] = []
    rel: list[int] = []
    sizes: list[int] = []
    for q in range(n_queries):
        n = int(rng.integers(3, 8))
        X = rng.normal(size=(n, DIM)) * (rng.random((n, DIM)) < 0.5)
        r = np.clip(np.round(X @ w + 1.5), 0, 4).astype(int).tolist()
        rows: list[Any] = (
            X.tolist() if dense else [{str(j): v for j, v in enumerate(x) if v} for x in X.tolist()]
        )
        rows = [row if row else {"0": 0.0} for row in rows] if not dense else rows
        queries.append(
            {"qid": f"q{q}", "items": [{"x": a, "relevance": b} for a, b in zip(rows, r)]}
        )
        xs += rows
        rel += r
        sizes.append(n)
    return queries, xs, rel, sizes


def ranksvm_body(kind: str, **params: Any) -> dict[str, Any]:
    return {"algorithm": "ranksvm", "params": params, "features": {"kind": kind, "dim": DIM}}


def test_query_helpers_doctest() -> None:
    result = doctest.testmod(service.models.queries)
    assert result.attempted > 0 and result.failed == 0


def test_sparse_fast_path_is_spec_encode_bit_for_bit() -> None:
    spec = FeatureSpec.sparse(DIM)
    rows_sets: list[list[Any]] = [
        [{"3": 1.0, "1": 2}, {"0": -0.0, "11": 5e-324}, {"2": 1}],  # unsorted keys
        [{"1": 1.0, 1: 2.0, "5": 3}, {"4": 1.5}],  # "1" and 1 (from Python): summed
        [{"0": 1.0, "1": 2.0}, {"0": 3.0}, {"7": 1.0, "9": 0.0}],  # sorted: no re-sort
    ]
    for rows in rows_sets:
        fast = sparse_rows(spec, rows, 20)
        ref = spec.encode(rows)
        assert fast is not None
        for a, b in ((fast.indptr, ref.indptr), (fast.indices, ref.indices)):
            assert a.tolist() == b.tolist()
        assert fast.values.view(np.uint64).tolist() == ref.values.view(np.uint64).tolist()
    odd: list[Any]
    for odd in ([{"1": True}], [{"1": "2"}], [{"12": 1.0}], [{"-1": 1.0}], [{"a": 1}], [{}],
                [[1.0]], [{"1": None}], [{"01": 1.0}], [{" 1": 1.0}]):  # fmt: skip
        assert sparse_rows(spec, odd, 20) is None  # the checked path names the problem
    assert sparse_rows(spec, [{str(j): 1.0 for j in range(5)}], 4) is None  # too many


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_ranksvm_learns_like_the_library(client: httpx.Client, kind: str) -> None:
    name = f"rank-{kind}"
    r = client.put(f"/models/{name}", json=ranksvm_body(kind, **PARAMS))
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "ranksvm"
    assert client.put(f"/models/{name}", json=ranksvm_body(kind, **PARAMS)).status_code == 200
    other = ranksvm_body(kind, **{**PARAMS, "lam": 0.1})
    assert client.put(f"/models/{name}", json=other).status_code == 409

    ref = make_ranker(DIM, PARAMS)
    spec = FeatureSpec.from_config({"kind": kind, "dim": DIM})
    rng = np.random.default_rng(7)
    metric = groups = 0.0
    items = 0
    for version in range(1, 7):
        queries, xs, rel, sizes = synthetic_queries(rng, 4, dense=kind == "dense")
        r = client.post("/update", json={"model": name, "queries": queries})
        assert r.status_code == 200, r.text
        assert r.json() == {"model": name, "applied": len(xs), "version": version, "correct": None}
        res = ref.update(spec.encode(xs), rel, groups=sizes)
        metric += res.metric_sum
        items += res.applied
        groups += res.n_groups
    info = client.get(f"/models/{name}").json()
    assert info["state_digest"] == ref.state_digest()
    assert info["version"] == 6 and info["examples_learned"] == items
    om = info["online_metrics"]
    assert om["ndcg_at_10"] == pytest.approx(metric / groups, rel=1e-12)
    assert 0.0 < om["ndcg_at_10"] <= 1.0
    assert om["accuracy"] is None and om["loss"] is None  # a ranker reports NDCG only
    text = client.get("/metrics").text
    m = re.search(rf'learnserve_online_ndcg_at_10{{model="{name}"}} (\S+)', text)
    assert m is not None and float(m.group(1)) == pytest.approx(metric / groups, rel=1e-12)

    # predict: a score per item in the order sent, the order best first
    queries, xs, _, sizes = synthetic_queries(np.random.default_rng(8), 3, dense=kind == "dense")
    for q in queries:
        for it in q["items"]:
            del it["relevance"]
    queries[1]["items"].append(queries[1]["items"][0])  # a tie: the earlier item comes first
    xs = [it["x"] for q in queries for it in q["items"]]
    sizes[1] += 1
    r = client.post("/predict", json={"model": name, "queries": queries})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["version"] == 6
    expect = ref.decision_function(spec.encode(xs))
    start = 0
    for q, p, n in zip(queries, got["predictions"], sizes, strict=True):
        s = expect[start : start + n]
        assert p["qid"] == q["qid"] and p["scores"] == s.tolist()
        assert p["order"] == np.argsort(-s, kind="stable").tolist()
        start += n
    tied = got["predictions"][1]["order"]
    assert tied.index(0) < tied.index(sizes[1] - 1)
    inst = [{"x": x} for x in xs]
    r = client.post("/predict", json={"model": name, "instances": inst})
    assert [p["score"] for p in r.json()["predictions"]] == expect.tolist()


def test_ranksvm_input_errors_are_named(client: httpx.Client) -> None:
    name = "rank-errors"
    assert client.put(f"/models/{name}", json=ranksvm_body("sparse")).status_code == 201
    ok_item = {"x": {"1": 0.5}, "relevance": 1}

    def q(*items: Any, qid: Any = "q") -> dict[str, Any]:
        return {"qid": qid, "items": list(items)}

    bad_rel = [ok_item] * 3 + [{"x": {"1": 1.0}, "relevance": "high"}]
    cases: list[tuple[Any, int, str, str]] = [
        ([q(*bad_rel)], 422, "queries[0].items[3].relevance", "must be a finite number"),
        ([q({"x": {"1": 1}, "relevance": "2"})], 422, "queries[0].items[0].relevance", "finite"),
        ([q({"x": {"1": 1}, "relevance": True})], 422, "queries[0].items[0].relevance", "finite"),
        ([q({"x": {"1": 1}, "relevance": [1]})], 422, "queries[0].items[0].relevance", "finite"),
        # any finite real is a relevance for RankSVM (only the order within a query counts)
        ([q({"x": {"1": 1}, "relevance": -1}, {"x": {"2": 1}, "relevance": 1.5})], 200, "", ""),
        ([q({"x": {"1": 1}, "relevance": 346}, {"x": {"2": 1}, "relevance": 31})], 200, "", ""),
        ([q({"x": {"1": 1}, "relevance": 10**30}, {"x": {"2": 1}, "relevance": 0})], 200, "", ""),
        ([q({"x": {"1": 1}})], 422, "queries[0].items[0].relevance", "field required"),
        ([q({"relevance": 1})], 422, "queries[0].items[0].x", "field required"),
        ([q(ok_item), q({"x": {"17": 1.0}, "relevance": 0})], 422,
         'queries[1].items[0].x["17"]', "outside [0, 12)"),
        ([q(ok_item), q(ok_item, {"x": {"a": 1.0}, "relevance": 0})], 422,
         'queries[1].items[1].x["a"]', "not an integer"),
        ([q(ok_item), q(ok_item, {"x": {"01": 1.0}, "relevance": 0})], 422,
         'queries[1].items[1].x["01"]', "canonical decimal"),
        ([], 422, "queries", "must not be empty"),
        ([q()], 422, "queries[0].items", "must not be empty"),
        ([q(ok_item), {"qid": "b"}], 422, "queries[1].items", "field required"),
        ([q(ok_item), {"items": 3}], 422, "queries[1].items", "must be an array"),
        (["q"], 422, "queries[0]", "must be an object"),
        ([q(ok_item, 5)], 422, "queries[0].items[1]", "must be an object"),
        ([q(ok_item, qid=True)], 422, "queries[0].qid", "string or an integer"),
        ({"q": 1}, 422, "queries", "must be an array"),
        ([q(*[ok_item] * 30), q(*[ok_item] * 21)], 413, "queries", "limit of 50"),
        ([q(ok_item)] * 51, 413, "queries", "limit of 50"),
        ([q({"x": {str(j): 1.0 for j in range(12)} | {"0": 1}, "relevance": 0})], 200, "", ""),
    ]  # fmt: skip
    for queries, status, field, words in cases:
        r = client.post("/update", json={"model": name, "queries": queries})
        assert r.status_code == status, (queries, r.text)
        if status != 200:
            assert err(r)["field"] == field, (queries, r.text)
            assert words in err(r)["message"], (queries, r.text)
            assert err(r)["message"].startswith(field), r.text
    # dense: strings and too many values are named too; 21 features is over the limit
    assert client.put("/models/rank-dense-errors", json=ranksvm_body("dense")).status_code == 201
    row = [0.0] * DIM
    for items, field, words in [
        ([{"x": row, "relevance": 0}, {"x": [*row[:-1], "3"], "relevance": 1}],
         "queries[0].items[1].x[11]", "must be a number"),
        ([{"x": row, "relevance": 0}, {"x": row[:-1], "relevance": 1}],
         "queries[0].items[1].x", "expected 12"),
    ]:  # fmt: skip
        r = client.post("/update", json={"model": "rank-dense-errors", "queries": [q(*items)]})
        assert r.status_code == 422 and err(r)["field"] == field and words in err(r)["message"]
    wide = {"algorithm": "ranksvm", "features": {"kind": "hashed", "bits": 8}}
    assert client.put("/models/rank-wide", json=wide).status_code == 201
    many = {"x": {f"f{j}": 1.0 for j in range(21)}, "relevance": 0}
    r = client.post("/update", json={"model": "rank-wide", "queries": [q(many)]})
    assert r.status_code == 413 and err(r)["field"] == "queries[0].items[0].x", r.text
    # a value that is not a number is named with its query, item and key
    raw = (
        b'{"model": "rank-errors", "queries": [{"items": [{"x": {"1": 1}, "relevance": 1}]},'
        b' {"items": [{"x": {"7": "high", "1": 2}, "relevance": 0}]}]}'
    )
    r = client.post("/update", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and err(r)["field"] == 'queries[1].items[0].x["7"]', r.text
    assert "must be a number" in err(r)["message"]
    # NaN / Infinity tokens and overflowing numbers: read leniently, refused by field
    for token in (b"NaN", b"Infinity", b"1e400"):
        r = client.post(
            "/update",
            content=raw.replace(b'"high"', token),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 422 and err(r)["field"] == 'queries[1].items[0].x["7"]', r.text
        assert "value is" in err(r)["message"], r.text
    # a classifier body, and bad params, name the field
    r = client.post("/update", json={"model": name, "examples": [{"x": {"1": 1}, "y": 1}]})
    assert r.status_code == 422 and err(r)["field"] == "queries"
    r = client.put("/models/rank-bad", json=ranksvm_body("sparse", lam=-1))
    assert r.status_code == 422 and err(r)["field"] == "params.lam", r.text
    r = client.put("/models/rank-bad", json=ranksvm_body("sparse", alpha=1))
    assert r.status_code == 422 and err(r)["field"] == "params.alpha", r.text
    # predict: queries or instances, not both, not neither
    body = {"model": name, "queries": [q({"x": {"1": 1}})], "instances": [{"x": {"1": 1}}]}
    assert err(client.post("/predict", json=body))["field"] == "queries"
    assert err(client.post("/predict", json={"model": name}))["field"] == "queries"
    r = client.post("/predict", json={"model": name, "queries": [q({"y": 1})]})
    assert r.status_code == 422 and err(r)["field"] == "queries[0].items[0].x"
    # nothing above reached the log except the good batches (three of real relevance)
    assert client.get(f"/models/{name}").json()["version"] == 4


# ---------------------------------------------------------------------------- LambdaMART


def lambdamart_models() -> tuple[LambdaMART, LambdaMART]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 6))
    y = np.clip((X[:, 0] * 2 + X[:, 1] + 2).round(), 0, 4).astype(int)
    groups = [20] * 12
    a = LambdaMART(n_estimators=5, num_leaves=4, min_data_in_leaf=5).fit(X, y, groups)
    b = LambdaMART(n_estimators=12, num_leaves=8, min_data_in_leaf=5).fit(X, y, groups)
    for m in (a, b):
        m.meta_["index_base"] = 1  # as trained from a 1-based SVMlight file by the CLI
    return a, b


def put_artifact(c: httpx.Client, name: str, blob: bytes) -> httpx.Response:
    return c.put(
        f"/models/{name}/artifact",
        content=blob,
        headers={"content-type": "application/octet-stream"},
    )


def ranked_scores(c: httpx.Client, name: str, X: np.ndarray, sizes: list[int]) -> dict[str, Any]:
    """POST /predict with queries whose sparse keys are 1-based (feature j+1 = column j)."""
    queries, start = [], 0
    for i, n in enumerate(sizes):
        items = [{"x": {str(j + 1): v for j, v in enumerate(x)}} for x in X[start : start + n]]
        queries.append({"qid": i, "items": items})
        start += n
    r = c.post("/predict", json={"model": name, "queries": queries})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_lambdamart_deploy_rollback_and_bad_uploads(client: httpx.Client) -> None:
    a, b = lambdamart_models()
    Xt = np.random.default_rng(5).normal(size=(9, 6)).round(6)
    Xt[3] = Xt[1]  # tied scores
    sizes = [4, 5]
    name = "lm"
    r = put_artifact(client, name, a.to_bytes())
    assert r.status_code == 201 and r.json()["version"] == 1, r.text
    info = client.get(f"/models/{name}").json()
    assert info["n_features"] == 6 and info["index_base"] == 1

    got = ranked_scores(client, name, Xt, sizes)
    sa = a.predict(Xt)
    assert got["version"] == 1
    assert [p["qid"] for p in got["predictions"]] == [0, 1]
    assert flat(p["scores"] for p in got["predictions"]) == sa.tolist()
    assert [p["order"] for p in got["predictions"]] == [o.tolist() for o in a.rank(Xt, sizes)]
    inst = client.post(
        "/predict", json={"model": name, "instances": [{"x": x} for x in Xt.tolist()]}
    )
    assert [p["score"] for p in inst.json()["predictions"]] == sa.tolist()  # dense: 6 values
    # sparse keys are the file's: 1..6 valid, 0 and 7 are not
    for key, words in [("0", "outside [1, 6]"), ("7", "outside [1, 6]")]:
        body = {"model": name, "instances": [{"x": {"1": 1.0}}, {"x": {"2": 1.0, key: 1.0}}]}
        r = client.post("/predict", json=body)
        assert r.status_code == 422 and err(r)["field"] == f'instances[1].x["{key}"]', r.text
        assert words in err(r)["message"]
    one = client.post("/predict", json={"model": name, "instances": [{"x": {"6": 2.0}}]})
    assert one.json()["predictions"][0]["score"] == a.predict(np.eye(6)[[5]] * 2.0)[0]

    assert put_artifact(client, name, b.to_bytes()).json()["version"] == 2
    got = ranked_scores(client, name, Xt, sizes)
    assert flat(p["scores"] for p in got["predictions"]) == b.predict(Xt).tolist()
    versions = client.get(f"/models/{name}/versions").json()
    assert versions["active"] == 2 and [v["version"] for v in versions["versions"]] == [1, 2]

    # bad uploads: 422, and version 2 keeps serving
    blob = b.to_bytes()
    corrupt = bytearray(blob)
    corrupt[len(blob) // 2] ^= 0xFF
    for bad in (bytes(corrupt), blob[: len(blob) - 7], blob[:20]):
        r = put_artifact(client, name, bad)
        assert r.status_code == 422 and err(r)["field"] == "artifact", r.text
    assert client.get(f"/models/{name}").json()["version"] == 2
    assert client.get(f"/models/{name}/versions").json()["active"] == 2
    got = ranked_scores(client, name, Xt, sizes)
    assert got["version"] == 2
    assert flat(p["scores"] for p in got["predictions"]) == b.predict(Xt).tolist()

    r = client.post(f"/models/{name}/rollback")
    assert r.status_code == 200 and r.json()["version"] == 1 and r.json()["previous"] == 2
    got = ranked_scores(client, name, Xt, sizes)
    assert got["version"] == 1
    assert flat(p["scores"] for p in got["predictions"]) == sa.tolist()
    assert client.get(f"/models/{name}/versions").json()["active"] == 1
    r = client.post(f"/models/{name}/rollback")  # nothing before version 1
    assert r.status_code == 409 and err(r)["error"] == "no_previous_version"
    assert client.post("/models/nope/rollback").status_code == 404
    assert client.post("/models/rank-sparse/rollback").status_code in (404, 409)
    text = client.get("/metrics").text
    assert f'learnserve_deploys_total{{model="{name}"}} 2.0' in text
    assert f'learnserve_rollbacks_total{{model="{name}"}} 1.0' in text


def test_rollback_reaches_another_worker(client: httpx.Client, data_dir: str) -> None:
    """A second service on the same store follows deploys and rollbacks (catalog epoch)."""
    a, b = lambdamart_models()
    X = np.random.default_rng(9).normal(size=(5, 6))
    inst = [{"x": x} for x in X.tolist()]
    put_artifact(client, "lm-shared", a.to_bytes())
    with ServerThread(settings(data_dir)) as srv2, srv2.client() as c2:
        put_artifact(client, "lm-shared", b.to_bytes())

        def version_on_2() -> int:
            r = c2.post("/predict", json={"model": "lm-shared", "instances": inst})
            assert r.status_code == 200
            return int(r.json()["version"])

        deadline = time.monotonic() + 10
        while version_on_2() != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert version_on_2() == 2
        assert client.post("/models/lm-shared/rollback").json()["version"] == 1
        deadline = time.monotonic() + 10
        while version_on_2() != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        r = c2.post("/predict", json={"model": "lm-shared", "instances": inst}).json()
        assert r["version"] == 1
        assert [p["score"] for p in r["predictions"]] == a.predict(X).tolist()


def test_no_failed_request_while_deploying(client: httpx.Client, data_dir: str) -> None:
    a, b = lambdamart_models()
    X = np.random.default_rng(11).normal(size=(40, 6))
    expect = {"a": a.predict(X).tolist(), "b": b.predict(X).tolist()}
    put_artifact(client, "hot", a.to_bytes())
    by_version = {1: "a"}
    body = {"model": "hot", "instances": [{"x": x} for x in X.tolist()]}
    seen: list[tuple[int, int, list[float]]] = []
    stop = threading.Event()

    def hammer() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=30) as c:
            while not stop.is_set():
                r = c.post("/predict", json=body)
                ok = r.status_code == 200
                seen.append(
                    (r.status_code, r.json()["version"] if ok else -1,
                     [p["score"] for p in r.json()["predictions"]] if ok else [])
                )  # fmt: skip

    t = threading.Thread(target=hammer)
    t.start()
    try:
        # Until version 1 has answered (the thread's client can take a while to start on a
        # loaded machine), then a little more.
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        for v, m in ((2, b), (3, a), (4, b)):
            r = put_artifact(client, "hot", m.to_bytes())
            assert r.status_code == 201 and r.json()["version"] == v
            by_version[v] = "b" if m is b else "a"
            time.sleep(0.15)
        deadline = time.monotonic() + 10  # until the last version has answered at least once
        while not any(v == 4 for _, v, _ in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(30)
    assert len(seen) > 10
    assert [s for s, _, _ in seen if s != 200] == []
    for _, version, scores in seen:
        assert scores == expect[by_version[version]], version
    assert {v for _, v, _ in seen} >= {1, 4}


def test_ranksvm_on_redis(redis_url: str, tmp_path: Any) -> None:
    """The same end to end on the production store, and a restart restores the state."""
    rng = np.random.default_rng(2)
    ref = make_ranker(DIM, PARAMS)
    spec = FeatureSpec.sparse(DIM)
    with ServerThread(settings(str(tmp_path), redis_url=redis_url)) as srv, srv.client() as c:
        assert c.put("/models/rr", json=ranksvm_body("sparse", **PARAMS)).status_code == 201
        for _ in range(3):
            queries, xs, rel, sizes = synthetic_queries(rng, 3, dense=False)
            assert c.post("/update", json={"model": "rr", "queries": queries}).status_code == 200
            ref.update(spec.encode(xs), rel, groups=sizes)
        assert c.get("/models/rr").json()["state_digest"] == ref.state_digest()
    with ServerThread(settings(str(tmp_path), redis_url=redis_url)) as srv, srv.client() as c:
        info = c.get("/models/rr").json()
        assert info["state_digest"] == ref.state_digest() and info["version"] == 3
        assert info["online_metrics"]["ndcg_at_10"] is not None
