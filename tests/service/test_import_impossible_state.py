"""Model import refuses a state the learners cannot reach (issue #20, defect 8).

Each artifact here is crafted with ``learners.artifact`` (so its checksum is valid):
a negative variance, a feature-name table whose hashes are not those of its names, a
state changed after the export (the recorded ``meta.service.state_digest`` no longer
matches). Each is a 422 naming the array (or the field), and creates nothing. A zero
variance is reachable by the learners themselves (AROW rounds it to 0 after a feature
value of 1e8), so a model holding one still round-trips.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from learners.artifact import dumps, loads
from learners.features import FeatureSpec
from learners.linear import make_classifier
from learners.ranking.ranksvm import RankSVM
from service.settings import Settings
from tests.service.serving import ServerThread

OCTETS = {"content-type": "application/octet-stream"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("import")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def put(c: httpx.Client, name: str, blob: bytes) -> httpx.Response:
    return c.put(f"/models/{name}", content=blob, headers=OCTETS)


def refused(c: httpx.Client, name: str, blob: bytes, words: str) -> dict[str, Any]:
    r = put(c, name, blob)
    assert r.status_code == 422, r.text
    detail: dict[str, Any] = r.json()["detail"]
    assert detail["field"] == "artifact" and words in detail["message"], detail
    assert c.get(f"/models/{name}").status_code == 404  # nothing was created
    return detail


def recrafted(blob: bytes, change: Any) -> bytes:
    """The artifact with ``change(arrays, meta)`` applied, written anew (valid checksum)."""
    art = loads(blob)
    arrays = {k: np.array(v) for k, v in art.arrays.items()}
    meta = dict(art.meta)
    change(arrays, meta)
    return dumps(art.kind, art.params, arrays, meta)


def trained(algorithm: str, spec: FeatureSpec, **params: Any) -> Any:
    clf = make_classifier(algorithm, spec.dim, params)
    rows: list[Any] = [{"age": 1.0, "job=clerk": 1.0}, {"age": -1.0, "city=x": 2.0}] * 3
    if spec.kind == "dense":
        rows = [[1.0, 0.0, 2.0, 0.5], [0.0, 1.0, -1.0, 0.0]] * 3
    clf.update(spec.encode(rows), ["a", "b"] * 3)
    clf.features_ = spec
    return clf


@pytest.mark.parametrize("algorithm", ["cw", "arow", "scw1", "scw2"])
def test_a_negative_variance_is_refused(service: httpx.Client, algorithm: str) -> None:
    clf = trained(algorithm, FeatureSpec.dense(4))
    assert put(service, f"ok-{algorithm}", clf.to_bytes()).status_code == 201

    def negative(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        arrays["sigma"][0, 2] = -0.25

    d = refused(service, f"neg-{algorithm}", recrafted(clf.to_bytes(), negative), "'sigma'")
    assert "sigma[0, 2] = -0.25" in d["message"]


def test_a_negative_variance_of_a_full_covariance_is_refused(service: httpx.Client) -> None:
    clf = trained("arow", FeatureSpec.dense(4), covariance="full")

    def negative(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        arrays["sigma"][0, 3, 3] = -1.0

    d = refused(service, "neg-full", recrafted(clf.to_bytes(), negative), "'sigma'")
    assert "sigma[0, 3, 3]" in d["message"]


def test_a_learned_zero_variance_round_trips(service: httpx.Client) -> None:
    """AROW's diagonal update rounds a variance to exactly 0 after a feature value of 1e8:
    a state the learner reaches, so an export of it imports."""
    spec = FeatureSpec.dense(2)
    clf = make_classifier("arow", 2, {})
    clf.update(spec.encode([[1e8, 1.0], [-1e8, 1.0]]), ["a", "b"])
    sigma = clf.state().sigma
    assert sigma is not None and sigma[0, 0] == 0.0
    clf.features_ = spec
    r = put(service, "zero-var", clf.to_bytes())
    assert r.status_code == 201, r.text
    assert r.json()["state_digest"] == clf.state_digest()


@pytest.mark.parametrize("kind", ["linear", "ranksvm"])
def test_names_that_do_not_match_their_hashes_are_refused(service: httpx.Client, kind: str) -> None:
    body: dict[str, Any] = {"algorithm": "arow" if kind == "linear" else "ranksvm",
                            "features": {"kind": "hashed", "bits": 10}}  # fmt: skip
    name = f"names-{kind}"
    assert service.put(f"/models/{name}", json=body).status_code == 201
    rows = [{"age": 1.0, "job": "clerk"}, {"age": -1.0, "city": "x"}, {"height": 3.0}]
    if kind == "linear":
        ex = [{"x": x, "y": y} for x, y in zip(rows, ["a", "b", "a"], strict=True)]
        r = service.post(f"/models/{name}/update", json={"examples": ex})
    else:
        items = [{"x": x, "relevance": y} for x, y in zip(rows, [2, 0, 1], strict=True)]
        r = service.post(f"/models/{name}/update", json={"queries": [{"items": items}]})
    assert r.status_code == 200, r.text
    blob = service.get(f"/models/{name}/state").content
    assert loads(blob).arrays["feature_names_hash"].shape[0] == 4  # age, job=clerk, city=x, height
    assert put(service, f"{name}-copy", blob).status_code == 201  # as exported: imports

    def swapped(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        h = arrays["feature_names_hash"]
        h[[0, 1]] = h[[1, 0]]  # each name now claims the other's hash

    d = refused(service, f"{name}-bad", recrafted(blob, swapped), "'feature_names_hash'")
    assert "entry 0 ('age')" in d["message"]


def test_a_state_changed_after_the_export_is_refused(service: httpx.Client) -> None:
    body = {"algorithm": "scw1", "features": {"kind": "dense", "dim": 4}}
    assert service.put("/models/src", json=body).status_code == 201
    ex = [{"x": [1.0, 0.0, 2.0, 0.5], "y": "a"}, {"x": [0.0, 1.0, -1.0, 0.0], "y": "b"}]
    assert service.post("/models/src/update", json={"examples": ex * 3}).status_code == 200
    blob = service.get("/models/src/state").content
    assert "state_digest" in loads(blob).meta["service"]

    def nudged(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        arrays["mu"][0, 1] += 1.0

    d = refused(service, "src-changed", recrafted(blob, nudged), "meta.service.state_digest")
    assert "'mu'" in d["message"]

    def relabelled(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        meta["service"] = {**meta["service"], "state_digest": "0" * 64}

    refused(service, "src-digest", recrafted(blob, relabelled), "meta.service.state_digest")
    assert put(service, "src-copy", blob).status_code == 201  # the export itself imports

    def ranker_nudged(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        arrays["counters"] = arrays["counters"] + 1

    ranker = RankSVM(dim=4)
    ranker.update(FeatureSpec.dense(4).encode([[1, 0, 0, 0], [0, 1, 0, 0]]), [1, 0], groups=[2])
    ranker.features_ = FeatureSpec.dense(4)
    meta_digest = {"service": {"state_digest": ranker.state_digest()}}
    good = ranker.to_bytes(meta_digest)
    assert put(service, "rank-ok", good).status_code == 201
    refused(service, "rank-bad", recrafted(good, ranker_nudged), "meta.service.state_digest")
