"""Batch models' sparse ``/predict`` bodies through the compiled scanner (issue 21):
``service.models.fast_json_instances`` gives the very batch the adapters encode (bit for
bit), refuses every other shape (the general path then answers, or words the 4xx), and
over real HTTP LambdaMART (1-based keys), LL-SVM and FastXML answer a body read by the
scanner exactly as the same instances read by the general path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from learners.features import FeatureSpec
from learners.ranking.lambdamart import LambdaMART
from service.models.fast_json_instances import scan_sparse_instances
from service.models.queries import encode_rows
from service.settings import Settings
from tests.learners.artifact_tools import valid_blobs
from tests.service.serving import ServerThread

DIM = 5
SETTINGS = Settings(max_batch_examples=500, max_features_per_example=50)


def random_rows(
    rng: np.random.Generator, n: int, dim: int, base: int, huge: bool = True
) -> list[dict[str, Any]]:
    """Sparse rows with keys in any order and values as clients write them: ints,
    rounded and full-precision floats, tiny and (``huge``) huge exponents, negative zero."""
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, dim + 1))
        keys = rng.choice(dim, size=k, replace=False) + base
        vals: list[Any] = []
        for _ in range(k):
            kind = int(rng.integers(0, 6))
            v = float(rng.normal())
            big = v * 1e250 if huge else v * 1e5
            vals.append([int(v * 100), round(v, 3), v, v * 1e-300, big, -0.0][kind])
        rows.append({str(int(key)): val for key, val in zip(keys, vals, strict=True)})
    return rows


def body(rows: list[dict[str, Any]], model: str = "m", **extra: Any) -> bytes:
    return orjson.dumps({"model": model, "instances": [{"x": r} for r in rows], **extra})


@pytest.mark.parametrize("base", [0, 1])
def test_scanner_gives_the_encoders_batch_bit_for_bit(base: int) -> None:
    rng = np.random.default_rng(base)
    for _ in range(30):
        rows = random_rows(rng, int(rng.integers(1, 40)), 40, base)
        raw = body(rows)
        got = scan_sparse_instances(raw, 40, base, 500, 50)
        assert got is not None and got[0] == "m"
        xs = [json.loads(raw)["instances"][i]["x"] for i in range(len(rows))]
        if base:  # LambdaMART's encoding: 1-based keys shifted
            want, _ = encode_rows(FeatureSpec.sparse(41), xs, SETTINGS, raw, str, index_base=1)
        else:  # BatchAdapter.instances (LL-SVM, FastXML)
            want = FeatureSpec.sparse(40).encode(xs, where="instances", field="x")
        b = got[1]
        assert b.dim == want.dim == 40
        for a, w in ((b.indptr, want.indptr), (b.indices, want.indices)):
            assert a.dtype == w.dtype and np.array_equal(a, w)
        assert b.values.dtype == np.float64
        assert b.values.tobytes() == want.values.tobytes()  # bit for bit (-0.0 too)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "instances": [{"x": {"1": 1}}], "k": 3}',
        b'{"model": "m", "instances": [{"x": {"1": 1}}], "min_version": 1}',
        b'{"model": "m", "queries": [{"items": [{"x": {"1": 1}}]}]}',
        b'{"model": "m", "instances": [{"x": {"1": 1}, "id": "a"}]}',
        b'{"model": "m", "instances": [{"x": [1, 2, 3, 4, 5]}]}',
        b'{"model": "m", "instances": [{"x": {}}]}',
        b'{"model": "m", "instances": []}',
        b'{"model": "m", "instances": [{"x": {"5": 1}}]}',  # out of [0, 5)
        b'{"model": "m", "instances": [{"x": {"01": 1}}]}',
        b'{"model": "m", "instances": [{"x": {"-1": 1}}]}',
        b'{"model": "m", "instances": [{"x": {" 1": 1}}]}',
        b'{"model": "m", "instances": [{"x": {"1": 1, "1": 2}}]}',
        b'{"model": "m", "instances": [{"x": {"1": true}}]}',
        b'{"model": "m", "instances": [{"x": {"1": null}}]}',
        b'{"model": "m", "instances": [{"x": {"1": "2"}}]}',
        b'{"model": "m", "instances": [{"x": {"1": 1e400}}]}',
        b'{"model": "m", "instances": [{"x": {"1": 1}}, 3]}',
        b'{"model": "m", "model": "n", "instances": [{"x": {"1": 1}}]}',
        b'{"model": "m", "instances": [{"x": {"1": 1}}], "instances": [{"x": {"1": 1}}]}',
        b'{"model": "m", "instances": [{"x": {"1": 1}}]} x',
        b'{"model": "m", "instances": [{"x": {"1": 1}}',
        b'{"instances": [{"x": {"1": 1}}]}',
    ],
)
def test_scanner_leaves_every_other_body_to_the_general_path(raw: bytes) -> None:
    assert scan_sparse_instances(raw, DIM, 0, 500, 50) is None


def test_scanner_limits_and_the_base() -> None:
    assert scan_sparse_instances(body([{"1": 1}] * 3), DIM, 0, 2, 50) is None  # rows
    assert scan_sparse_instances(body([{"0": 1, "1": 2, "2": 3}]), DIM, 0, 10, 2) is None
    assert scan_sparse_instances(body([{"0": 1}]), DIM, 1, 10, 10) is None  # below base
    got = scan_sparse_instances(body([{"5": 1, "1": 2}]), DIM, 1, 10, 10)
    assert got is not None and got[1].indices.tolist() == [0, 4] and got[1].dim == DIM


# ------------------------------------------------------------------ over real HTTP


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data_dir = tmp_path_factory.mktemp("batch-fast")
    settings = Settings(data_dir=str(data_dir), max_batch_examples=500)
    with ServerThread(settings) as srv, srv.client() as c:
        blobs = dict(valid_blobs())
        ranker = LambdaMART.from_bytes(blobs["lambdamart"])
        ranker.meta_["index_base"] = 1  # keys "1".."5", as trained from an SVMlight file
        blobs["lambdamart1"] = ranker.to_bytes()
        for name, blob in blobs.items():
            r = c.put(
                f"/models/{name}/artifact",
                content=blob,
                headers={"content-type": "application/octet-stream"},
            )
            assert r.status_code == 201, r.text
        yield c


@pytest.mark.parametrize(
    ("name", "base"), [("lambdamart", 0), ("lambdamart1", 1), ("llsvm", 0), ("fastxml", 0)]
)
def test_batch_models_answer_a_scanned_body_as_the_general_path(
    client: httpx.Client, name: str, base: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.engine import requests

    scanned: list[int] = []

    def counting(*args: Any) -> Any:
        out = scan_sparse_instances(*args)
        scanned.append(out is not None)
        return out

    monkeypatch.setattr(requests, "scan_sparse_instances", counting)  # the server's own
    rows = random_rows(np.random.default_rng(7), 120, DIM, base, huge=False)
    raw = body(rows, name)
    assert len(raw) > 4096 and scan_sparse_instances(raw, DIM, base, 500, 50) is not None
    # min_version (at the deployed version: no wait) sends the same rows the general way
    general = body(rows, name, min_version=1)
    assert scan_sparse_instances(general, DIM, base, 500, 50) is None
    headers = {"content-type": "application/json"}
    fast = client.post("/predict", content=raw, headers=headers)
    slow = client.post("/predict", content=general, headers=headers)
    assert fast.status_code == slow.status_code == 200, (fast.text, slow.text)
    assert fast.json() == slow.json()
    on_path = client.post(f"/models/{name}/predict", content=raw, headers=headers)
    assert on_path.json() == fast.json()
    assert scanned == [True, False, True]  # read by the scanner; the other refused by it


def test_a_bad_body_is_still_refused_naming_the_field(client: httpx.Client) -> None:
    rows = random_rows(np.random.default_rng(8), 120, DIM, 1)
    rows[7] = {"0": 1.0}  # below LambdaMART's 1-based keys
    r = client.post("/predict", content=body(rows, "lambdamart1"),
                    headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 422, r.text
    assert r.json()["detail"]["field"] == 'instances[7].x["0"]'
