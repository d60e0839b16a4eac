"""``features.intercept`` (dense, sparse, hashed): every row gets the constant feature
1.0, whichever parser reads the body (the compiled scanners and the general path give
the same log entry), on /update, /predict and the v2 tensor path alike; the service
learns what the in-process learner learns; configs without it keep their meaning."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest

from learners.features import FeatureSpec
from learners.intercept import INTERCEPT_NAME
from learners.io.svmlight import read_svmlight
from learners.linear import make_classifier
from learners.records import INTERCEPT_NAME as RECORDS_INTERCEPT
from service.errors import ServiceError
from service.models.linear import LinearAdapter
from service.models.payload import decode_payload, dense_batch
from service.models.ranksvm import RankSVMAdapter
from service.settings import Settings
from tests.conftest import require_data
from tests.service.serving import ServerThread
from tests.service.test_update_fast_path import body, named_body, sparse_body

SETTINGS = Settings(max_labels=4)
JSON = {"content-type": "application/json"}


def adapter(features: dict[str, Any], algorithm: str = "arow") -> LinearAdapter:
    config = LinearAdapter.normalize_config(
        {"algorithm": algorithm, "features": features}, SETTINGS
    )
    return LinearAdapter.create(config)


def test_the_name_is_the_records_kinds() -> None:
    assert INTERCEPT_NAME == RECORDS_INTERCEPT == "^constant"


@pytest.mark.parametrize("labels", [["+1", "-1"], [1, -1]])
def test_both_parsers_write_the_same_entry_with_the_constant(labels: list[Any]) -> None:
    rng = np.random.default_rng(5)
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"kind": "dense", "dim": 28}, lambda n: body(rng, n, 28, 0.5, labels)),
        ({"kind": "sparse", "dim": 1000}, lambda n: sparse_body(rng, n, 1000, labels)),
        ({"kind": "sparse", "dim": 1000, "index_base": 1},
         lambda n: sparse_body(rng, n, 1000, labels).replace(b'"0"', b'"1000"')),
        ({"kind": "hashed", "bits": 20}, lambda n: named_body(rng, n, labels)),
        ({"kind": "hashed", "bits": 3}, lambda n: named_body(rng, n, labels)),  # collisions
    ]  # fmt: skip
    for features, make in cases:
        a = adapter({**features, "intercept": True})
        column = a.spec.intercept_column
        for n in (1, 100):
            raw = make(n)
            fast = a.parse_update_raw(raw, SETTINGS)
            assert fast is not None, features
            slow, count = a.parse_update(orjson.loads(raw), SETTINGS, raw)
            assert (fast.n, fast.payload) == (count, slow), features
            batch, _ = decode_payload(slow, a.spec.dim)
            plain = adapter(features).parse_update(orjson.loads(raw), SETTINGS, raw)[0]
            without, _ = decode_payload(plain, adapter(features).spec.dim)
            # every row holds the column; the rest is the row without the intercept
            rows = np.repeat(np.arange(n), np.diff(batch.indptr))
            assert set(rows[batch.indices == column].tolist()) == set(range(n))
            dense_with = _dense(batch)
            dense_with[:, column] -= 1.0
            # (exact but where a hashed feature shares the column: (v + 1) - 1)
            assert np.allclose(dense_with[:, : without.dim], _dense(without), rtol=0, atol=1e-12)
            a.apply(slow)
        assert a.model.dim == a.spec.dim


def _dense(batch: Any) -> np.ndarray:
    X = np.zeros((batch.n_rows, batch.dim))
    for i in range(batch.n_rows):
        sl = slice(batch.indptr[i], batch.indptr[i + 1])
        X[i, batch.indices[sl]] = batch.values[sl]
    return X


def test_config_is_checked_and_kept_only_when_on() -> None:
    on = LinearAdapter.normalize_config(
        {"algorithm": "pa1", "features": {"kind": "sparse", "dim": 5, "intercept": True}},
        SETTINGS,
    )
    assert on["features"] == {"kind": "sparse", "dim": 5, "intercept": True}
    assert LinearAdapter.create(on).model.dim == 6
    for off in ({"kind": "sparse", "dim": 5}, {"kind": "sparse", "dim": 5, "intercept": False}):
        config = LinearAdapter.normalize_config({"algorithm": "pa1", "features": off}, SETTINGS)
        assert config["features"] == {"kind": "sparse", "dim": 5}  # as before: same digest
    hashed = FeatureSpec.from_config({"kind": "hashed", "bits": 4, "intercept": True})
    assert hashed.dim == 16 and hashed.to_config()["intercept"] is True
    for bad in (1, "true", None):
        with pytest.raises(ServiceError) as e:
            LinearAdapter.normalize_config(
                {"algorithm": "pa1", "features": {"kind": "dense", "dim": 2, "intercept": bad}},
                SETTINGS,
            )
        assert e.value.field == "features.intercept", bad
    with pytest.raises(ServiceError) as e:
        RankSVMAdapter.normalize_config(
            {"algorithm": "ranksvm", "features": {"kind": "dense", "dim": 2, "intercept": True}},
            SETTINGS,
        )
    assert e.value.field == "features.intercept"


def test_predict_and_the_tensor_path_add_it_too() -> None:
    ex = [{"x": [0.0, 0.0], "y": "a"}, {"x": [1.0, 0.0], "y": "b"}, {"x": [0.0, 0.0], "y": "a"}]
    raw = json.dumps({"examples": ex}).encode()
    a, plain = (
        adapter({"kind": "dense", "dim": 2, "intercept": on}, "pa1") for on in (1 > 0, 0 > 1)
    )
    for m in (a, plain):
        m.apply(m.parse_update({"examples": ex}, SETTINGS, raw)[0])
    zero = {"instances": [{"x": [0.0, 0.0]}]}
    # the zero row scores 0 without an intercept, the intercept's weight with it (PA-I by hand:
    # "a" on the constant alone, then "b" on [1, 0, 1] with step 1, then "a" with step 1)
    assert plain.predict(zero, SETTINGS)[0]["score"] == 0.0
    assert a.predict(zero, SETTINGS)[0]["score"] == 1.0
    inst = [{"x": [0.0, 0.0]}, {"x": [1.0, 0.5]}]
    raw = json.dumps({"instances": inst}).encode()
    general = a.predict({"instances": inst}, SETTINGS, raw)
    assert general[0]["score"] != 0.0  # the intercept's weight
    tensor = a.predict_batch(dense_batch(np.array([[0.0, 0.0], [1.0, 0.5]])))
    assert tensor == general
    assert a.tensor_width() == 2 and a.zero_features() == [0.0, 0.0]


def test_the_service_learns_what_the_learner_learns(tmp_path: Any) -> None:
    """The first 3,000 rows of a9a, 1-based sparse keys as in the file, in bodies of 500:
    the service's state digest is the in-process PA-I's with the intercept."""
    data = read_svmlight(require_data("a9a", "a9a"), n_features=123)
    X, y = data.X, data.y.astype(np.int64)
    n = 3000
    rows = [
        {str(j + 1): v for j, v in zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(),
                                        X.values[X.indptr[i] : X.indptr[i + 1]].tolist(),
                                        strict=True)}
        for i in range(n)
    ]  # fmt: skip
    features = {"kind": "sparse", "dim": 123, "index_base": 1, "intercept": True}
    spec = FeatureSpec.from_config(features)
    clf = make_classifier("pa1", spec.dim, {"C": 1.0})
    clf.update(spec.encode(rows), y[:n])
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        model = {"algorithm": "pa1", "params": {"C": 1.0}, "features": features}
        assert c.put("/models/m", json=model).status_code == 201
        for s in range(0, n, 500):
            ex = [{"x": rows[i], "y": int(y[i])} for i in range(s, s + 500)]
            r = c.post("/update", content=orjson.dumps({"model": "m", "examples": ex}),
                       headers=JSON)  # fmt: skip
            assert r.status_code == 200, r.text
        got = c.get("/models/m").json()
    assert got["examples_learned"] == n
    assert got["state_digest"] == clf.state_digest()


def test_a_hashed_models_weights_name_the_constant() -> None:
    a = adapter({"kind": "hashed", "bits": 12, "intercept": True}, "pa1")
    ex = [{"x": {"w": 1.0}, "y": "a"}, {"x": {}, "y": "b"}, {"x": {}, "y": "b"}]
    a.apply(a.parse_update({"examples": ex}, SETTINGS)[0])
    entries = [e for c in a.weights(10, None)["classes"] for e in c["positive"] + c["negative"]]
    named = {n for e in entries for n in e.get("names", [])}
    assert {"w", INTERCEPT_NAME} <= named


def test_a_hashed_models_prediction_counts_the_constant_once() -> None:
    """/predict of a hashed model with an intercept scores what the learner scores: the
    parser adds the constant, and the read path must not add it again (a hashed spec's
    width is its dim, so "a row without the intercept" cannot be told by its width)."""
    a = adapter({"kind": "hashed", "bits": 12, "intercept": True}, "pa1")
    rows = [{"a": 1.0, "b": -2.0}, {"c": 0.5}, {"a": -1.0}]
    examples = [{"x": x, "y": y} for x, y in zip(rows, ["+1", "-1", "-1"], strict=True)]
    payload, _ = a.parse_update({"examples": examples}, SETTINGS)
    a.apply(payload)
    served = a.predict({"instances": [{"x": x} for x in rows]}, SETTINGS)
    own = a.model.decision_function(a.spec.encode(rows))
    assert [p["scores"]["+1"] for p in served] == np.asarray(own)[:, 0].tolist()
