"""``GET /models/{name}/weights`` of hashed models: the names behind each weight.

Examples are a9a rows written as named features (``"f17": 1`` and, for a9a's first
five indices, the categorical ``"age": "b3"``, hashed as ``"age=b3"``). The names are
recorded by the worker that parses each update and travel in the log, so a second
service process on the same store shows the same names, and an export carries them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from learners.features import murmurhash3_32
from learners.io.svmlight import read_svmlight
from service.settings import Settings
from tests.conftest import require_data
from tests.service.serving import ServerThread, wait_ready
from tests.service.test_export_import import OCTETS, learn


def named(j: int) -> tuple[str, Any]:
    return ("age", f"b{j}") if j <= 5 else (f"f{j}", 1.0)


def name_of(key: str, value: Any) -> str:
    return f"{key}={value}" if isinstance(value, str) else key


@pytest.fixture(scope="module")
def rows() -> tuple[list[dict[str, Any]], list[int]]:
    data = read_svmlight(require_data("a9a", "a9a"), n_features=124, zero_based=True)
    X, out = data.X, []
    for i in range(1500):
        out.append(dict(named(j) for j in X.indices[X.indptr[i] : X.indptr[i + 1]].tolist()))
    return out, [int(y) for y in data.y[:1500]]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("weights")


@pytest.fixture(scope="module")
def service(data_dir: Path) -> Iterator[httpx.Client]:
    with ServerThread(Settings(data_dir=str(data_dir))) as srv, srv.client() as c:
        yield c


def create(c: httpx.Client, name: str, bits: int) -> None:
    body = {"algorithm": "arow", "params": {}, "features": {"kind": "hashed", "bits": bits}}
    assert c.put(f"/models/{name}", json=body).status_code == 201


def vocabulary(rows: list[dict[str, Any]]) -> set[str]:
    return {name_of(k, v) for r in rows for k, v in r.items()}


def test_names_of_the_largest_weights(
    service: httpx.Client, rows: tuple[list[Any], list[int]], data_dir: Path
) -> None:
    xs, ys = rows
    create(service, "named", 18)
    learn(service, "named", xs[:1400], ys[:1400])  # the fast scanner's path
    # an escaped key takes the general (orjson) path: its name is recorded too
    raw = b'{"examples": [{"x": {"caf\\u00e9": 2.0, "f40": 1}, "y": 1}]}'
    r = service.post(
        "/models/named/update", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200, r.text
    r = service.get("/models/named/weights", params={"top": 10, "label": "1"})
    assert r.status_code == 200, r.text
    got = r.json()
    vocab = vocabulary(xs[:1400]) | {"café"}
    assert got["feature_names"] == {"recorded": len(vocab), "limit": 100_000, "complete": True}
    (cls,) = got["classes"]
    entries = cls["positive"] + cls["negative"]
    assert len(cls["positive"]) == 10 and len(cls["negative"]) == 10
    for e in entries:
        assert e["names"] and set(e["names"]) <= vocab, e
        assert all(murmurhash3_32(n) & (2**18 - 1) == e["index"] for n in e["names"])
        assert e["collision"] == (len(e["names"]) > 1) and e["variance"] > 0
    assert any(n.startswith("age=") for e in entries for n in e["names"])
    idx = service.get("/models/named/weights", params={"top": 1000}).json()
    shown = {n for c in idx["classes"] for e in c["positive"] + c["negative"] for n in e["names"]}
    assert "café" in shown

    # another service process on the same store: the same names, from the log
    with ServerThread(Settings(data_dir=str(data_dir))) as srv, srv.client() as c2:
        wait_ready(srv.url)
        version = service.get("/models/named").json()["version"]
        for _ in range(200):
            if c2.get("/models/named").json()["version"] == version:
                break
            time.sleep(0.05)
        again = c2.get("/models/named/weights", params={"top": 10, "label": "1"}).json()
        assert again["classes"] == got["classes"]

    # the export carries the names: the imported model shows them
    blob = service.get("/models/named/state").content
    r = service.put("/models/named-copy", content=blob, headers=OCTETS)
    assert r.status_code == 201, r.text
    copy = service.get("/models/named-copy/weights", params={"top": 10, "label": "1"}).json()
    assert copy["classes"] == got["classes"] and copy["feature_names"] == got["feature_names"]


def test_collisions_with_few_bits(service: httpx.Client, rows: tuple[list[Any], list[int]]) -> None:
    xs, ys = rows
    create(service, "tiny", 4)  # 16 dimensions for ~100 names: every index collides
    learn(service, "tiny", xs[:500], ys[:500])
    got = service.get("/models/tiny/weights", params={"top": 16}).json()
    vocab = vocabulary(xs[:500])
    by_index: dict[int, set[str]] = {}
    for n in vocab:
        by_index.setdefault(murmurhash3_32(n) & 15, set()).add(n)
    seen = 0
    for cls in got["classes"]:
        for e in cls["positive"] + cls["negative"]:
            assert set(e["names"]) == by_index[e["index"]]  # every name at the index
            assert e["collision"] is (len(by_index[e["index"]]) > 1)
            seen += e["collision"]
    assert seen > 0


def test_names_are_bounded(tmp_path: Path, rows: tuple[list[Any], list[int]]) -> None:
    xs, ys = rows
    settings = Settings(data_dir=str(tmp_path), max_feature_names=5)
    with ServerThread(settings) as srv, srv.client() as c:
        create(c, "capped", 18)
        learn(c, "capped", xs[:300], ys[:300])
        info = c.get("/models/capped/weights", params={"top": 50}).json()["feature_names"]
        assert info == {"recorded": 5, "limit": 5, "complete": False}


def test_ranker_weights(service: httpx.Client) -> None:
    body = {"algorithm": "ranksvm", "params": {"pairs_per_group": None},
            "features": {"kind": "hashed", "bits": 10}}  # fmt: skip
    assert service.put("/models/rank", json=body).status_code == 201
    items = [{"x": {"good": 1.0}, "relevance": 2}, {"x": {"bad": 1.0}, "relevance": 0}]
    r = service.post("/models/rank/update", json={"queries": [{"qid": 1, "items": items}] * 5})
    assert r.status_code == 200, r.text
    (cls,) = service.get("/models/rank/weights", params={"top": 1}).json()["classes"]
    assert cls["label"] is None
    assert cls["positive"][0]["names"] == ["good"] and cls["negative"][0]["names"] == ["bad"]
    assert cls["positive"][0]["variance"] is None
    r = service.get("/models/rank/weights", params={"label": "1"})
    assert r.status_code == 422 and r.json()["detail"]["field"] == "label"
    blob = service.get("/models/rank/state").content
    r = service.put("/models/rank-copy", content=blob, headers=OCTETS)
    assert (
        r.status_code == 201
        and r.json()["state_digest"] == service.get("/models/rank").json()["state_digest"]
    )


def test_fast_scanner_hashes_are_the_names_hashes(rows: tuple[list[Any], list[int]]) -> None:
    """The scanner's full hashes (what the names map is checked against) are those of
    the names the general path records, in body order, string values included."""
    import orjson

    from learners.feature_names import names_of_rows
    from service.models.fast_json_maps import scan_hashed_examples, scan_map_examples

    xs, ys = rows
    raw = orjson.dumps({"model": "m", "examples": [{"x": x, "y": y} for x, y in zip(xs[:200], ys)]})
    got = scan_hashed_examples(raw, 1 << 10, 1000, 1000)
    assert got is not None
    want = [murmurhash3_32(n) for n in names_of_rows(xs[:200])]
    assert got[3].tolist() == want
    plain = scan_map_examples(raw, "hashed", 1 << 10, 1000, 1000)
    assert plain is not None and plain[1].indices.tolist() == got[1].indices.tolist()


def test_top_weights_order_and_ties() -> None:
    """Largest first, ties by lower index (also at the k-th place), zeros never listed."""
    import numpy as np

    from service.models.weights import _tops

    rng = np.random.default_rng(0)
    for n, k in ((50, 5), (50, 100), (1000, 20), (3, 1)):
        w = np.round(rng.normal(size=n), 1)  # many ties
        w[rng.integers(0, n, n // 3)] = 0.0
        pos, neg = _tops(w, k)
        want_pos = sorted((i for i in range(n) if w[i] > 0), key=lambda i: (-w[i], i))[:k]
        want_neg = sorted((i for i in range(n) if w[i] < 0), key=lambda i: (w[i], i))[:k]
        assert pos.tolist() == want_pos and neg.tolist() == want_neg, (n, k)
