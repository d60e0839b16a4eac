"""service/models/fast_json_dense_instances.py: the numba scanner of dense /predict bodies
agrees bit for bit with orjson + numpy whenever it answers, answers for the common
bodies, and answers None for every other shape; through HTTP a scanned body gets the
answers the general path gives."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from service.models.fast_json_dense_instances import scan_dense_instances, warmup
from service.models.linear import LinearAdapter
from service.settings import Settings
from tests.service.serving import ServerThread, dense_model
from tests.service.test_fast_json import MODELS, WS, _common_number, fmt_number


def reference(raw: bytes, dim: int, max_rows: int) -> tuple[str | None, np.ndarray]:
    """What the general path reads, asserting the body has exactly the supported shape
    (the model may be left out: the path's)."""
    body = orjson.loads(raw)
    assert type(body) is dict and set(body) in ({"model", "instances"}, {"instances"})
    assert type(body.get("model", "")) is str
    rows = body["instances"]
    assert type(rows) is list and 1 <= len(rows) <= max_rows
    for r in rows:
        assert type(r) is dict and set(r) == {"x"}
        assert type(r["x"]) is list and len(r["x"]) == dim
        assert all(type(v) in (int, float) for v in r["x"])
    X = np.array([r["x"] for r in rows], dtype=np.float64).reshape(len(rows), dim)
    assert np.isfinite(X).all()
    return body.get("model"), X


def assert_same(got: tuple[str | None, np.ndarray], raw: bytes, dim: int, max_rows: int) -> None:
    model, X = reference(raw, dim, max_rows)
    assert got[0] == model and type(got[0]) is str
    assert got[1].dtype == np.float64 and got[1].flags.c_contiguous
    assert got[1].shape == X.shape
    assert np.array_equal(got[1].view(np.uint64), X.view(np.uint64)), raw


def build(rng: random.Random, dim: int, n: int, number: Any = fmt_number) -> bytes:
    def ws() -> str:
        return rng.choice(WS)

    rows = []
    for _ in range(n):
        x = "[" + ",".join(f"{ws()}{number(rng)}{ws()}" for _ in range(dim)) + "]"
        rows.append("{" + f'{ws()}"x"{ws()}:{ws()}{x}{ws()}' + "}")
    members = [
        f'{ws()}"model"{ws()}:{ws()}{json.dumps(rng.choice(MODELS), ensure_ascii=False)}',
        f'{ws()}"instances"{ws()}:{ws()}[' + ",".join(ws() + r + ws() for r in rows) + "]",
    ]
    rng.shuffle(members)
    return (ws() + "{" + ",".join(members) + "}" + ws()).encode()


def test_warmup_and_doc_example() -> None:
    warmup()
    got = scan_dense_instances(b'{"model":"m","instances":[{"x":[1.5,-2]},{"x":[0,3]}]}', 2, 10)
    assert got is not None and got[0] == "m" and got[1].tolist() == [[1.5, -2.0], [0.0, 3.0]]


@pytest.mark.parametrize("seed", range(3))
def test_random_bodies_match_orjson(seed: int) -> None:
    rng = random.Random(seed)
    accepted = 0
    for _ in range(800):
        dim = rng.choice([1, 2, 3, 5, 28])
        n = rng.choice([1, 1, 2, 3, 10])
        raw = build(rng, dim, n)
        got = scan_dense_instances(raw, dim, 10)
        if got is not None:
            accepted += 1
            assert_same(got, raw, dim, 10)
        else:
            reference(raw, dim, 10)  # the generator only writes bodies of the right shape
    assert accepted > 50


@pytest.mark.parametrize("seed", range(3))
def test_mutated_bodies_never_accepted_differently(seed: int) -> None:
    """Flip, drop or insert one byte of valid bodies: whatever the scanner still accepts
    must be read identically by orjson (and have the supported shape)."""
    rng = random.Random(100 + seed)
    alphabet = b' \t\n\r{}[]:,"\\-+.eE0123456789xyabmodelinstancesnutrf\x00\x1f\xc3\xa9\xff'
    for _ in range(1500):
        dim = rng.choice([1, 2, 3])
        raw = bytearray(build(rng, dim, rng.choice([1, 2, 3]), number=_common_number))
        for _ in range(rng.randint(1, 2)):
            pos = rng.randrange(len(raw) + 1)
            op = rng.randrange(3)
            b = alphabet[rng.randrange(len(alphabet))]
            if op == 0 and pos < len(raw):
                raw[pos] = b
            elif op == 1 and pos < len(raw):
                del raw[pos]
            else:
                raw.insert(pos, b)
        data = bytes(raw)
        got = scan_dense_instances(data, dim, 3)
        if got is not None:
            assert_same(got, data, dim, 3)


def test_common_bodies_take_the_fast_path() -> None:
    rng = random.Random(7)
    for _ in range(300):
        dim = rng.choice([1, 4, 28])
        n = rng.randint(1, 50)
        raw = build(rng, dim, n, number=_common_number)
        got = scan_dense_instances(raw, dim, 50)
        assert got is not None, raw
        assert_same(got, raw, dim, 50)


@pytest.mark.parametrize(
    "body",
    [
        '{"model": "m", "instances": [{"x": [1, 2]}], "min_version": 3}',
        '{"model": "m", "instances": [{"x": [1, 2]}], "k": 3}',
        '{"model": "m", "instances": [{"x": [1, 2], "id": "r1"}]}',
        '{"model": "m", "instances": [{"id": "r1", "x": [1, 2]}]}',
        '{"model": "m", "queries": [{"x": [1, 2]}]}',
        '{"model": "m", "instances": [{"x": [1, 2]}], "instances": [{"x": [1, 2]}]}',
        '{"model": "m", "model": "m", "instances": [{"x": [1, 2]}]}',
        '{"model": "m", "instances": []}',
        '{"model": "m", "instances": [{"x": [1, 2, 3]}]}',
        '{"model": "m", "instances": [{"x": [1]}]}',
        '{"model": "m", "instances": [{"x": [1, true]}]}',
        '{"model": "m", "instances": [{"x": [1, null]}]}',
        '{"model": "m", "instances": [{"x": [1, "2"]}]}',
        '{"model": "m", "instances": [{"x": [1, NaN]}]}',
        '{"model": "m", "instances": [{"x": [1, 1e400]}]}',
        '{"model": "m", "instances": [{"x": {"0": 1}}]}',
        '{"model": "m\\u0041", "instances": [{"x": [1, 2]}]}',
        '{"model": 1, "instances": [{"x": [1, 2]}]}',
        '{"model": "m", "instances": [{"x": [1, 2]}]',
        '{"model": "m", "instances": [{"x": [1, 2]}]} x',
        '[{"model": "m", "instances": [{"x": [1, 2]}]}]',
    ],
)
def test_other_shapes_are_left_to_the_general_path(body: str) -> None:
    assert scan_dense_instances(body.encode(), 2, 10) is None


def test_the_model_may_be_left_out_for_the_path_to_name() -> None:
    got = scan_dense_instances(b'{"instances": [{"x": [1, 2]}]}', 2, 10)
    assert got is not None and got[0] is None and got[1].tolist() == [[1.0, 2.0]]
    got = scan_dense_instances(b'{"model": "", "instances": [{"x": [1, 2]}]}', 2, 10)
    assert got is not None and got[0] == ""


def test_the_row_limit() -> None:
    raw = b'{"model": "m", "instances": [{"x": [1, 2]}, {"x": [3, 4]}, {"x": [5, 6]}]}'
    assert scan_dense_instances(raw, 2, 2) is None  # the general path refuses it (413/422)
    assert scan_dense_instances(raw, 2, 3) is not None


def test_http_answers_equal_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body the scanner takes and the same rows with ``min_version`` (which the scanner
    leaves to the general path) get the same answers, for a binary and a multiclass
    model, with an intercept, by body and by path."""
    answered: list[bool] = []  # whether each predict_raw call answered (the fast path)
    plain = LinearAdapter.predict_raw

    def counted(self: LinearAdapter, raw: bytes, settings: Settings) -> Any:
        out = plain(self, raw, settings)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(LinearAdapter, "predict_raw", counted)
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(300, 5)), 6)
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        for name, labels, extra in (
            ("bin", ["s", "b"], {}),
            ("multi", [0, 1, 2], {}),
            ("icpt", ["s", "b"], {"intercept": True}),
        ):
            model = dense_model(5, "arow")
            model["features"].update(extra)
            assert c.put(f"/models/{name}", json=model).status_code == 201
            y = [labels[k % len(labels)] for k in np.argmax(X[:, :3], axis=1).tolist()]
            examples = [{"x": x, "y": t} for x, t in zip(X.tolist(), y, strict=True)]
            assert c.post("/update", json={"model": name, "examples": examples}).status_code == 200
            probe = [{"x": x} for x in X[:7].tolist()]
            fast = c.post("/predict", json={"model": name, "instances": probe}).json()
            general = c.post(
                "/predict", json={"model": name, "instances": probe, "min_version": 0}
            ).json()
            by_path = c.post(f"/models/{name}/predict", json={"instances": probe}).json()
            assert fast == general, name
            assert by_path["predictions"] == general["predictions"]
            assert orjson.dumps(fast["predictions"]) == orjson.dumps(general["predictions"])
        assert answered == [True, False, True] * 3  # by body, with min_version, by path
        bad = c.post("/predict", json={"model": "bin", "instances": [{"x": [1.0, 2.0]}]})
        assert bad.status_code == 422 and bad.json()["detail"]["field"] == "instances[0].x"
        other = c.post("/predict", json={"model": "multi", "instances": [{"x": [0.0] * 5}]})
        assert other.status_code == 200 and other.json()["model"] == "multi"
        clash = c.post("/models/bin/predict", json={"model": "multi", "instances": probe})
        assert clash.status_code == 422 and clash.json()["detail"]["field"] == "model"
        nobody = c.post("/predict", json={"instances": probe})
        assert nobody.status_code == 422 and nobody.json()["detail"]["field"] == "model"
