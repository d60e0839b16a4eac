"""A refused update never changes anything, over real HTTP.

A batch of finite values that would make the weights non-finite (1e200 features on
PA, 1e308 on RankSVM) is refused *before* it is appended (``check_update``, a dry run
on the batch's support), naming ``examples[i].x`` / ``queries[q].items[j].x``: the
version, the update log (``store.last_position``) and ``state_digest`` stay as they
were. (The old service appended it, moved the version, kept a dead log entry and
named ``labels[0]``.) A score that would not be finite is a 422 naming the instance,
never a JSON ``null``. The property test drives every online kind and every feature
kind with extreme finite values and checks those rules after every request.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.settings import Settings
from service.store import SQLITE_FILENAME
from service.store.sqlite import SQLiteStore
from tests.service.serving import ServerThread


class Service:
    """The app in a uvicorn thread, its SQLite log read directly, its models in-process."""

    def __init__(self, srv: ServerThread, db: Path) -> None:
        self.srv = srv
        self.c = srv.client()
        self.loop = asyncio.new_event_loop()
        self.store = SQLiteStore(db)
        self.loop.run_until_complete(self.store.open())

    def close(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.loop.close()
        self.c.close()

    def observed(self, name: str) -> tuple[int, str, int]:
        """(version, state_digest, log length) of a model."""
        d = self.c.get(f"/models/{name}").json()
        last = self.loop.run_until_complete(self.store.last_position(name))
        return d["version"], d["state_digest"], last

    def weights(self, name: str) -> list[np.ndarray]:
        model = self.srv.app.state.engine.models[name].adapter.model
        if hasattr(model, "v_"):  # RankSVM: w = s * v, and ||w||^2
            return [model.v_, model.state_]
        st = model.state()
        return [st.mu] + ([] if st.sigma is None else [st.sigma])


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    settings = Settings(data_dir=str(tmp_path), max_features_per_example=400)
    with ServerThread(settings) as srv:
        s = Service(srv, tmp_path / SQLITE_FILENAME)
        try:
            yield s
        finally:
            s.close()


def detail(r: httpx.Response) -> dict[str, Any]:
    d: dict[str, Any] = r.json()["detail"]
    return d


def create(s: Service, name: str, algorithm: str, features: dict[str, Any], **params: Any) -> None:
    body = {"algorithm": algorithm, "params": params, "features": features}
    r = s.c.put(f"/models/{name}", json=body)
    assert r.status_code == 201, r.text


def test_overflowing_batch_is_refused_before_the_log(service: Service) -> None:
    s = service
    create(s, "pa", "pa", {"kind": "dense", "dim": 4})
    good = {"model": "pa", "examples": [{"x": [1.0, 0.0, -1.0, 0.5], "y": "a"}]}
    assert s.c.post("/update", json=good).status_code == 200
    before = s.observed("pa")
    assert before[0] == before[2] == 1
    bad = {"model": "pa", "examples": [good["examples"][0], {"x": [1e200] * 4, "y": "b"}]}
    r = s.c.post("/update", json=bad)
    assert r.status_code == 422, r.text
    assert detail(r)["field"] == "examples[1].x"
    assert detail(r)["message"].startswith("examples[1].x: ")
    assert "non-finite" in detail(r)["message"] and "labels[" not in detail(r)["message"]
    assert s.observed("pa") == before
    # the same on a sparse model (the dry run copies only the batch's coordinates)
    create(s, "arow", "arow", {"kind": "sparse", "dim": 2**20})
    huge = {"model": "arow", "examples": [{"x": {"7": 1.0}, "y": 1}, {"x": {"9": 1e300}, "y": 2}]}
    before = s.observed("arow")
    r = s.c.post("/update", json=huge)
    assert r.status_code == 422 and detail(r)["field"] == "examples[1].x", r.text
    assert s.observed("arow") == before


def test_ranksvm_overflow_names_the_query_item(service: Service) -> None:
    s = service
    create(s, "rank", "ranksvm", {"kind": "sparse", "dim": 8})
    items = [{"x": {"0": 1.0}, "relevance": 1}, {"x": {"1": 1e308}, "relevance": 0}]
    ok = {"x": {"2": 1.0}, "relevance": 0}
    body = {"model": "rank", "queries": [{"items": [ok, ok]}, {"items": items}]}
    r = s.c.post("/update", json=body)
    assert r.status_code == 422, r.text
    assert detail(r)["field"] == "queries[1].items[1].x"
    assert s.observed("rank") == (0, s.observed("rank")[1], 0)


def test_nonfinite_scores_are_a_422_not_null(service: Service) -> None:
    s = service
    create(s, "lin", "pa", {"kind": "dense", "dim": 3})
    # PA's step is x / ||x||^2: small features give weights in the hundreds
    train = [{"x": [1e-3, 2e-3, 3e-3], "y": "a"}, {"x": [-1e-3, -2e-3, -3e-3], "y": "b"}]
    assert s.c.post("/update", json={"model": "lin", "examples": train}).status_code == 200
    inst = [{"x": [1.0, 1.0, 1.0]}, {"x": [1e308, 1e308, 1e308]}]
    r = s.c.post("/predict", json={"model": "lin", "instances": inst})
    assert r.status_code == 422, r.text
    assert detail(r)["field"] == "instances[1].x"
    create(s, "rk", "ranksvm", {"kind": "dense", "dim": 2})
    items = [{"x": [1.0, 0.0], "relevance": 2}, {"x": [0.0, 1.0], "relevance": 0}]
    assert s.c.post("/update", json={"model": "rk", "queries": [{"items": items}]}).is_success
    q = [{"items": [{"x": [1.0, 0.0]}]}, {"items": [{"x": [1.0, 1.0]}, {"x": [1e308, -1e308]}]}]
    r = s.c.post("/predict", json={"model": "rk", "queries": q})
    assert r.status_code == 422 and detail(r)["field"] == "queries[1].items[1].x", r.text
    r = s.c.post("/predict", json={"model": "rk", "instances": [{"x": [1e308, -1e308]}]})
    assert r.status_code == 422 and detail(r)["field"] == "instances[0].x", r.text


# ---------------------------------------------------------------------------- property

KINDS: list[tuple[str, dict[str, Any]]] = [
    ("pa", {}), ("pa1", {}), ("pa2", {}), ("cw", {}), ("arow", {}), ("scw1", {}),
    ("scw2", {}), ("ranksvm", {"pairs_per_group": 4}),
]  # fmt: skip
FEATURES: list[dict[str, Any]] = [
    {"kind": "dense", "dim": 5},
    {"kind": "sparse", "dim": 40},
    {"kind": "hashed", "bits": 5},
]
STEPS = 14  # requests per model: 8 kinds x 3 feature kinds (+ a full-covariance one)


REGIMES = ("plain", "tiny", "extreme")  # drawn per request


def value(rng: np.random.Generator, regime: str) -> float:
    """A finite number, mixed signs: moderate (1e-5..1e5), tiny (down to 1e-300, next
    to 1s) or from anywhere in float64's range (up to 1e308)."""
    if regime == "plain":
        mag = 10.0 ** rng.uniform(-5, 5)
    elif regime == "tiny":
        mag = 10.0 ** rng.uniform(-300, -100) if rng.random() < 0.5 else 1.0
    else:
        lo, hi = [(0, 0), (-300, -100), (100, 308), (-5, 5), (150, 308)][rng.integers(0, 5)]
        mag = 10.0 ** rng.uniform(lo, hi)
    return float(rng.choice([-1.0, 1.0]) * mag * rng.uniform(0.5, 1.0))


def row(rng: np.random.Generator, features: dict[str, Any], regime: str) -> Any:
    if features["kind"] == "dense":
        return [value(rng, regime) if rng.random() < 0.7 else 0.0 for _ in range(features["dim"])]
    many = rng.random() < 0.2  # a huge count of features (up to the 400 allowed)
    n = int(rng.integers(100, 400) if many else rng.integers(1, 6))
    if features["kind"] == "sparse":
        keys = rng.choice(features["dim"], size=min(n, features["dim"]), replace=False)
        return {str(int(k)): value(rng, regime) for k in keys}
    return {f"f{int(k)}": value(rng, regime) for k in rng.choice(10_000, size=n, replace=False)}


def update_body(rng: np.random.Generator, name: str, kind: str, f: dict[str, Any]) -> Any:
    regime = str(rng.choice(REGIMES))
    if kind == "ranksvm":
        queries = []
        for _ in range(int(rng.integers(1, 3))):
            items = [
                {
                    "x": row(rng, f, regime),
                    "relevance": value(rng, regime) if rng.random() < 0.5 else 1,
                }
                for _ in range(int(rng.integers(2, 5)))
            ]
            queries.append({"items": items})
        return {"model": name, "queries": queries}
    labels = ["a", "b"] if rng.random() < 0.5 else ["a", "b", "c", 7]  # multiclass too
    n = int(rng.integers(1, 5))
    return {"model": name, "examples": [
        {"x": row(rng, f, regime), "y": labels[int(rng.integers(0, len(labels)))]}
        for _ in range(n)
    ]}  # fmt: skip


def predict_body(rng: np.random.Generator, name: str, kind: str, f: dict[str, Any]) -> Any:
    regime = str(rng.choice(REGIMES, p=[0.3, 0.2, 0.5]))
    instances = [{"x": row(rng, f, regime)} for _ in range(int(rng.integers(1, 4)))]
    if kind == "ranksvm" and rng.random() < 0.5:
        return {"model": name, "queries": [{"items": instances}]}
    return {"model": name, "instances": instances}


def all_finite(predictions: list[dict[str, Any]]) -> bool:
    """Every score is a finite number (a JSON null would be None here)."""

    def ok(v: Any) -> bool:
        return isinstance(v, int | float) and math.isfinite(v)

    for p in predictions:
        scores = p.get("scores", [])
        values = list(scores.values()) if isinstance(scores, dict) else scores
        if not all(ok(v) for v in values) or ("score" in p and not ok(p["score"])):
            return False
        if p.get("confidence") is not None and not ok(p["confidence"]):
            return False
    return True


def test_property_a_4xx_never_changes_a_model(service: Service) -> None:
    s = service
    rng = np.random.default_rng(20261123)
    models = [(kind, params, f) for kind, params in KINDS for f in FEATURES]
    models.append(("arow", {"covariance": "full"}, {"kind": "dense", "dim": 5}))
    counts = {"refused": 0, "learned": 0, "scored": 0, "score_refused": 0}
    for m, (kind, params, f) in enumerate(models):
        name = f"p{m}-{kind}-{f['kind']}"
        create(s, name, kind, f, **params)
        for step in range(STEPS):
            before = s.observed(name)
            if rng.random() < 0.7:
                body = update_body(rng, name, kind, f)
                r = s.c.post("/update", json=body)
                assert r.status_code < 500, r.text
                after = s.observed(name)
                if r.is_success:
                    counts["learned"] += 1
                    assert after[0] == after[2] == before[0] + 1, (name, step)
                else:
                    counts["refused"] += 1
                    assert r.status_code in (413, 422), r.text
                    assert after == before, (name, step, r.text)
                    field = detail(r)["field"] or ""
                    assert field.startswith(("examples[", "queries[")), r.text
                for w in s.weights(name):
                    assert np.isfinite(w).all(), (name, step)
            else:
                r = s.c.post("/predict", json=predict_body(rng, name, kind, f))
                assert r.status_code < 500, r.text
                if r.is_success:
                    counts["scored"] += 1
                    assert all_finite(r.json()["predictions"]), r.text
                else:
                    counts["score_refused"] += 1  # also 409: a classifier not fitted yet
                    assert r.status_code in (409, 413, 422), r.text
                assert s.observed(name) == before
    print("property outcomes:", counts)  # shown with -s
    # every outcome was exercised, a few hundred requests in all
    assert min(counts.values()) >= 5, counts
    assert sum(counts.values()) == len(models) * STEPS >= 300


def test_an_entry_that_overflows_at_apply_time_is_skipped_whole() -> None:
    """Another worker's dry run may have seen an older state: at apply time the entry
    is refused whole (every replica alike), named by example, the state unchanged."""
    from service.engine.model_handle import ModelHandle
    from service.models.linear import LinearAdapter
    from service.models.ranksvm import RankSVMAdapter

    settings = Settings()
    body = {"algorithm": "pa", "features": {"kind": "dense", "dim": 2}}
    lin = LinearAdapter.create(LinearAdapter.normalize_config(body, settings))
    ok, _ = lin.parse_update({"examples": [{"x": [1.0, 2.0], "y": "a"}]}, settings)
    bad, _ = lin.parse_update(
        {"examples": [{"x": [1.0, 2.0], "y": "a"}, {"x": [1e200, 1e200], "y": "b"}]}, settings
    )
    h = ModelHandle("m", lin, settings)
    h.apply_entry(1, ok)
    digest = lin.state_digest()
    h.apply_entry(2, bad)  # the dry run is skipped here, as if it had passed elsewhere
    assert (h.version, h.entries_skipped, lin.state_digest()) == (2, 1, digest)
    assert h.failed[2].startswith("examples[1].x: ")
    rbody = {"algorithm": "ranksvm", "features": {"kind": "sparse", "dim": 4}}
    rank = RankSVMAdapter.create(RankSVMAdapter.normalize_config(rbody, settings))
    items = [{"x": {"0": 1.0}, "relevance": 0.5}, {"x": {"1": 1e308}, "relevance": -3}]
    payload, _ = rank.parse_update({"queries": [{"items": items}]}, settings)
    digest = rank.state_digest()
    with pytest.raises(ValueError, match=r"^queries\[0\]\.items\[1\]\.x: "):
        rank.apply(payload)
    assert rank.state_digest() == digest
