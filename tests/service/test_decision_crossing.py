"""``"crossing": "hash"`` rows (service.models.decision_crossing): the module's formula
written out naively, one action and one part at a time, gives the same batch; the
raw-record crossing (decision_records.crossed_rows) is the same function of the
context's columns; limits are refused naming the action."""

from __future__ import annotations

import numpy as np
import pytest

from learners.feature_keys import murmurhash3_32
from service.errors import ServiceError
from service.models import decision_features as df
from service.models.decision_crossing import FNV_PRIME, crossed_batch, hashed_context

BITS = 10  # small: collisions happen, and are summed


def naive(context, actions, dim, intercept):
    mask = dim - 1
    ctx = [(murmurhash3_32(n) & mask, v) for n, v in df.named_values(context, "context")]
    rows = []
    for a in actions:
        row: dict[int, float] = {}

        def put(col: int, v: float, row=row) -> None:
            row[col] = row.get(col, 0.0) + v

        h_id = murmurhash3_32(f"id={a['id']}")
        put(h_id & mask, 1.0)
        feats = df.named_values(a.get("features"), "f")
        for n, v in feats:
            put(murmurhash3_32("a:" + n) & mask, v)
        for c, x in ctx:
            put(((FNV_PRIME * c) ^ h_id) & mask, x)
            for n, v in feats:
                put(((FNV_PRIME * c) ^ murmurhash3_32("a:" + n)) & mask, x * v)
        if intercept:
            put(murmurhash3_32("^constant") & mask, 1.0)
        rows.append(row)
    return rows


def as_rows(batch):
    out = []
    for i in range(batch.n_rows):
        a, b = batch.indptr[i], batch.indptr[i + 1]
        ix = batch.indices[a:b].tolist()
        assert ix == sorted(set(ix))  # sorted, unique
        out.append(dict(zip(ix, batch.values[a:b].tolist(), strict=True)))
    return out


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("intercept", [True, False])
def test_the_rows_are_the_formula(seed: int, intercept: bool) -> None:
    rng = np.random.default_rng(seed)
    context = {f"c{j}": float(np.round(rng.normal(), 3)) for j in range(int(rng.integers(0, 30)))}
    context["device"] = "mobile"
    actions = []
    for i in range(int(rng.integers(1, 60))):
        feats = {f"f{j}": float(np.round(rng.random(), 3)) for j in range(int(rng.integers(0, 4)))}
        if i % 3 == 0:
            feats["topic"] = f"t{i % 5}"
        actions.append({"id": f"a{i}", "features": feats})
    dim = 2**BITS
    got = crossed_batch(dim, hashed_context(context), actions, 100_000, intercept)
    assert got.dim == dim and got.n_rows == len(actions)
    want = naive(context, actions, dim, intercept)
    for g, w in zip(as_rows(got), want, strict=True):
        assert g.keys() == w.keys()
        for col in g:  # (a collision's sum may add in another order)
            assert g[col] == pytest.approx(w[col], rel=1e-12, abs=1e-12)


def test_the_records_crossing_is_the_same_function_of_the_columns() -> None:
    from service.models.decision_records import crossed_rows
    from service.models.online_config import records_spec
    from service.settings import Settings

    features = {"kind": "records", "bits": BITS,
                "fields": {"age": {"type": "numeric", "transform": "log1p"},
                           "job": {"type": "categorical"}}}  # fmt: skip
    spec = records_spec(features, Settings(data_dir="/tmp/unused"))
    from service.models.decision_records import encode_context

    ctx = encode_context(spec, {"age": 37, "job": "clerk"})
    actions = [{"id": f"a{i}", "features": {"topic": f"t{i % 3}", "len": i / 10}}
               for i in range(40)]  # fmt: skip
    mine = crossed_batch(spec.dim, ctx, actions, 10_000, intercept=False)
    theirs = crossed_rows(spec, ctx, actions, 10_000)
    assert mine.indptr.tolist() == theirs.indptr.tolist()
    assert mine.indices.tolist() == theirs.indices.tolist()
    np.testing.assert_allclose(mine.values, theirs.values, rtol=1e-12, atol=1e-12)


def test_too_many_features_name_the_action() -> None:
    context = {f"c{j}": 1.0 for j in range(10)}
    actions = [{"id": "small", "features": {}}, {"id": "big", "features": {"a": 1, "b": 2}}]
    with pytest.raises(ServiceError) as e:
        crossed_batch(2**BITS, hashed_context(context), actions, 25, True)
    assert e.value.field == "actions[1].features" and "33 features" in e.value.message


def test_bad_values_are_refused_naming_them() -> None:
    with pytest.raises(ServiceError) as e:
        hashed_context({"x": float("nan")})
    assert e.value.field == "context.x"
    with pytest.raises(ServiceError) as e:
        crossed_batch(2**BITS, hashed_context({}), [{"id": "a", "features": {"y": [1]}}], 99, True)
    assert e.value.field == "actions[0].features.y"


def test_a_model_crosses_by_hash_unless_its_config_says_names() -> None:
    """New models cross by hash; ``"crossing": "names"``, and a stored config from before
    crossings existed (none), keep the names' rows; a records context takes only hash."""
    from service.models.decision import DecisionAdapter
    from service.settings import Settings

    settings = Settings(data_dir="/tmp/unused")
    body = {"algorithm": "decision", "features": {"kind": "hashed", "bits": BITS}}
    context = {"u": 3, "d": "m"}
    actions = [{"id": f"a{i}", "features": {"t": f"x{i % 2}", "n": i}} for i in range(5)]
    spec_rows = {}
    for crossing in ("hash", "names", None):
        config = DecisionAdapter.normalize_config(
            body if crossing is None else {**body, "crossing": crossing}, settings
        )
        if crossing is None:
            assert config["decision"]["crossing"] == "hash"
            del config["decision"]["crossing"]  # as stored before crossings existed
        model = DecisionAdapter.create(config)
        spec_rows[crossing] = model.encode_rank({"context": context, "actions": actions},
                                                settings).batch  # fmt: skip
    hashed = crossed_batch(2**BITS, hashed_context(context), actions, 10_000, True)
    spec = DecisionAdapter.create(DecisionAdapter.normalize_config(body, settings)).spec
    named = spec.encode(df.action_rows(df.named_values(context, "c"), actions, 10_000))
    for crossing, want in (("hash", hashed), ("names", named), (None, named)):
        got = spec_rows[crossing]
        assert got.indices.tolist() == want.indices.tolist(), crossing
        assert got.values.tolist() == want.values.tolist(), crossing
    assert hashed.indices.tolist() != named.indices.tolist()
    with pytest.raises(ServiceError) as e:
        DecisionAdapter.normalize_config({**body, "crossing": "words"}, settings)
    assert e.value.field == "crossing"
    records = {"algorithm": "decision", "crossing": "names",
               "features": {"kind": "records", "bits": BITS,
                            "fields": {"u": {"type": "numeric"}}}}  # fmt: skip
    with pytest.raises(ServiceError) as e:
        DecisionAdapter.normalize_config(records, settings)
    assert e.value.field == "crossing" and "raw-record" in e.value.message


def test_an_export_of_a_model_from_before_crossings_imports_crossing_by_names() -> None:
    """The body an import makes again from an exported config: a hashed config with no
    ``crossing`` (stored before crossings existed) keeps its names' rows."""
    from learners.regression import make_regressor
    from service.models.decision import DecisionAdapter
    from service.models.decision_state import import_body
    from service.settings import Settings

    settings = Settings(data_dir="/tmp/unused")
    body = {"algorithm": "decision", "features": {"kind": "hashed", "bits": BITS}}
    config = DecisionAdapter.normalize_config(body, settings)
    reg = make_regressor("arow", 2**BITS, config["params"])
    for stored, want in ((True, "hash"), (False, "names")):
        c = {**config, "decision": dict(config["decision"])}
        if not stored:
            del c["decision"]["crossing"]
        meta = {"decisions": {}, "service": {"config": c, "state_digest": "x"}}
        got, _ = import_body(meta, reg)
        assert DecisionAdapter.normalize_config(got, settings)["decision"]["crossing"] == want
