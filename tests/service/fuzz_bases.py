"""The models and the valid bodies :mod:`tests.service.test_fuzz_bodies` starts from.

A model of every kind and index base: online linear classifiers (dense, dense with
``index_base`` 1, sparse 0- and 1-based, hashed; binary and multiclass), RankSVM
(sparse 0- and 1-based, dense), LambdaMART (0-based with two artifact versions, and
1-based as ``learnserve train`` writes from SVMlight), LL-SVM and FastXML, all small
and trained here.

The bodies are the examples of the OpenAPI document (``UpdateRequest``,
``PredictRequest``, ``ModelCreate``, ``ActivateRequest``, ``V2InferRequest``), rewritten
for each model (its name, its features, its labels) and for each route that takes
them (``/update``, ``/predict``, their ``/models/{name}/...`` forms, ``PUT
/models/{name}``, ``PUT .../active``, v2 ``infer`` with and without a version). Each is
sent once: only those answered 2xx are bases (so each case changes one thing of a
valid request).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

DIM = 6
CREATED = "fuzz-new"  # the name PUT /models/{name} creates (deleted after each success)
OCTETS = {"content-type": "application/octet-stream"}


@dataclass
class Model:
    name: str
    x: Callable[[int], Any]  # a valid x, the i-th
    labels: list[Any]  # empty for rankers and batch models
    create: dict[str, Any] | None = None  # online models
    artifacts: tuple[Callable[[], bytes], ...] = ()  # batch models
    ranker: bool = False
    tensor: bool = False  # served by v2 infer
    outputs: tuple[str, ...] = ("score",)


@dataclass
class Base:
    method: str
    path: str
    route: str  # the route template, for the counts
    label: str  # the model (and the example) it was made for
    body: Any
    writes: bool  # a 2xx may change a model


def dense(i: int) -> list[float]:
    return [round(((i + j) % 5) * 0.25 - 0.5, 2) for j in range(DIM)]


def sparse(base: int) -> Callable[[int], dict[str, float]]:
    return lambda i: {str(base + i % DIM): 1.0, str(base + (i + 2) % DIM): 0.5}


def hashed(i: int) -> dict[str, Any]:
    return {"job": ["clerk", "manager"][i % 2], "age": 30 + i}


def lambdamart(index_base: int, trees: int) -> Callable[[], bytes]:
    def build() -> bytes:
        from learners.ranking.lambdamart import LambdaMART

        rng = np.random.default_rng(trees)
        X = rng.normal(size=(60, DIM))
        y = np.clip((X[:, 0] * 2 + 2).round(), 0, 4).astype(int)
        m = LambdaMART(n_estimators=trees, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 3)
        m.meta_["index_base"] = index_base  # 1: as trained from a 1-based SVMlight file
        blob: bytes = m.to_bytes()
        return blob

    return build


def llsvm() -> bytes:
    from learners.llsvm.model import LLSVM

    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, DIM))
    y = np.where(X[:, 0] + X[:, 2] > 0, "yes", "no")
    blob: bytes = LLSVM(n_anchors=4, n_neighbours=2, passes=1).fit(X, y).to_bytes()
    return blob


def fastxml() -> bytes:
    from learners.features import Batch
    from learners.xml.fastxml import FastXML

    rng = np.random.default_rng(1)
    X = Batch.from_dense(rng.random((40, DIM)))
    Y = [[i % 5, (i + 1) % 5] for i in range(40)]
    blob: bytes = FastXML(n_trees=2, max_leaf=5, seed=1, n_jobs=1).fit(X, Y).to_bytes()
    return blob


def _online(algorithm: str, features: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"algorithm": algorithm, "params": params, "features": features}


_CLASSES = ("label", "score", "scores", "classes")
MODELS = [
    Model("lin-dense", dense, ["+1", "-1"], _online("arow", {"kind": "dense", "dim": DIM}),
          tensor=True, outputs=(*_CLASSES, "confidence")),
    Model("lin-dense1", dense, [0, 1],
          _online("pa", {"kind": "dense", "dim": DIM, "index_base": 1}), tensor=True,
          outputs=_CLASSES),
    Model("lin-sparse", sparse(0), ["yes", "no"],
          _online("pa1", {"kind": "sparse", "dim": DIM}, C=0.5)),
    Model("lin-sparse1", sparse(1), ["yes", "no"],
          _online("cw", {"kind": "sparse", "dim": DIM, "index_base": 1})),
    Model("lin-hashed", hashed, ["+1", "-1"], _online("scw1", {"kind": "hashed", "bits": 8})),
    Model("multi", sparse(0), ["a", "b", "c"], _online("arow", {"kind": "sparse", "dim": DIM})),
    Model("multi-dense", dense, [1, 2, 3], _online("scw2", {"kind": "dense", "dim": DIM}),
          tensor=True, outputs=(*_CLASSES, "confidence")),
    Model("rank", sparse(0), [], _online("ranksvm", {"kind": "sparse", "dim": DIM}),
          ranker=True),
    Model("rank1", sparse(1), [],
          _online("ranksvm", {"kind": "sparse", "dim": DIM, "index_base": 1}), ranker=True),
    Model("rank-dense", dense, [], _online("ranksvm", {"kind": "dense", "dim": DIM}),
          ranker=True, tensor=True),
    Model("ltr", sparse(0), [], artifacts=(lambdamart(0, 3), lambdamart(0, 4)), ranker=True,
          tensor=True),
    Model("ltr1", sparse(1), [], artifacts=(lambdamart(1, 3),), ranker=True, tensor=True),
    Model("llsvm", dense, [], artifacts=(llsvm,), tensor=True, outputs=_CLASSES),
    Model("fastxml", sparse(0), [], artifacts=(fastxml,)),
]  # fmt: skip


def populate(c: httpx.Client) -> None:
    for m in MODELS:
        if m.create is not None:
            r = c.put(f"/models/{m.name}", json=m.create)
            assert r.status_code == 201, r.text
        for build in m.artifacts:
            r = c.put(f"/models/{m.name}/artifact", content=build(), headers=OCTETS)
            assert r.status_code == 201, r.text
        if m.labels:
            ex = [{"x": m.x(i), "y": m.labels[i % len(m.labels)]} for i in range(12)]
            r = c.post("/update", json={"model": m.name, "examples": ex})
            assert r.status_code == 200, r.text
        elif m.create is not None:  # RankSVM
            items = [{"x": m.x(i), "relevance": i % 3} for i in range(DIM)]
            r = c.post("/update", json={"model": m.name, "queries": [{"qid": 1, "items": items}]})
            assert r.status_code == 200, r.text


def _for_model(example: Any, m: Model) -> Any:
    """The document's example, with ``m``'s name, features and labels."""
    out = copy.deepcopy(example)
    count = iter(range(1000))

    def visit(node: Any) -> Any:
        if isinstance(node, dict):
            for k, v in list(node.items()):
                if k == "model":
                    node[k] = m.name
                elif k == "x":
                    node[k] = m.x(next(count))
                elif k == "y" and m.labels:
                    node[k] = m.labels[next(count) % len(m.labels)]
                elif k == "min_version":
                    node[k] = 1
                else:
                    visit(v)
        elif isinstance(node, list):
            for v in node:
                visit(v)
        return node

    return visit(out)


def _infer_body(example: dict[str, Any], m: Model) -> dict[str, Any]:
    """The document's example for ``m``, with every optional field of the request."""
    body = copy.deepcopy(example)
    t = body["inputs"][0]
    t["shape"] = [2, DIM]
    t["data"] = dense(0) + dense(1)
    body["parameters"] = {"binary_data_output": False}
    body["outputs"] = [{"name": m.outputs[0], "parameters": {"binary_data": False}}]
    if "scores" in m.outputs:
        body["outputs"].append({"name": "scores", "parameters": {"classification": 2}})
    return body


def _without_model(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "model"}  # the path names it


def _candidates(spec: dict[str, Any], c: httpx.Client) -> list[Base]:
    ex = {k: v.get("examples", []) for k, v in spec["components"]["schemas"].items()}
    out: list[Base] = []
    for m in MODELS:
        by_path = f"/models/{m.name}"
        for example in ex["PredictRequest"]:
            body = _for_model(example, m)
            if m.name == "fastxml":  # its own field
                body["k"] = 3
            out.append(Base("POST", "/predict", "POST /predict", m.name, body, False))
            out.append(Base("POST", f"{by_path}/predict", "POST /models/{name}/predict",
                            m.name, _without_model(body), False))  # fmt: skip
        for example in ex["UpdateRequest"] if m.create is not None else []:
            body = _for_model(example, m)
            for query in body.get("queries", []):
                query["weight"] = 1.0  # the document's example leaves it out
            out.append(Base("POST", "/update", "POST /update", m.name, body, True))
            out.append(Base("POST", f"{by_path}/update", "POST /models/{name}/update",
                            m.name, _without_model(body), True))  # fmt: skip
        for example in ex["V2InferRequest"] if m.tensor else []:
            body = _infer_body(example, m)
            path = f"/v2/models/{m.name}/infer"
            out.append(Base("POST", path, "POST /v2/models/{name}/infer", m.name, body, False))
            if len(m.artifacts) == 1:  # its version moves only with a deploy
                v = c.get(f"/models/{m.name}").json()["version"]
                path = f"/v2/models/{m.name}/versions/{v}/infer"
                route = "POST /v2/models/{name}/versions/{version}/infer"
                out.append(Base("POST", path, route, m.name, body, False))
    for example in ex["ActivateRequest"]:
        body = {**example, "version": 2}  # the version served: the base changes nothing
        route = "PUT /models/{name}/active"
        out.append(Base("PUT", "/models/ltr/active", route, "ltr", body, True))
    scw2 = _online("scw2", {"kind": "hashed", "bits": 6}, C=1.0, eta=0.9)
    creates = [
        *ex["ModelCreate"],
        _online("pa2", {"kind": "dense", "dim": 3, "index_base": 1}, C=0.5),
        _online("cw", {"kind": "sparse", "dim": 8, "index_base": 1}, eta=0.8),
        {**scw2, "metrics": {"window": 50}},
        _online("pa", {"kind": "dense", "dim": 2}),
    ]
    for body in creates:
        out.append(Base("PUT", f"/models/{CREATED}", "PUT /models/{name}", CREATED, body, True))
    return out


def bases(c: httpx.Client) -> list[Base]:
    """The candidates that are accepted (each sent once; a created model is deleted)."""
    spec = c.get("/openapi.json").json()
    kept = []
    by_path: set[tuple[str, str]] = set()
    for b in _candidates(spec, c):
        if (b.route, b.label) in by_path:
            continue  # the by-path forms share the handler: one base per model is enough
        r = c.request(b.method, b.path, json=b.body)
        assert r.status_code < 500, (b, r.text)
        if r.status_code < 300:
            kept.append(b)
            if b.route.startswith("POST /models/{name}/"):
                by_path.add((b.route, b.label))
        if b.path == f"/models/{CREATED}" and r.status_code < 300:
            assert c.delete(f"/models/{CREATED}").status_code == 204
    per_route = {b.route for b in kept}
    assert len(per_route) == 8, per_route  # every route that reads a JSON body
    fed = {b.label for b in kept}
    assert fed >= {m.name for m in MODELS}, {m.name for m in MODELS} - fed
    return kept
