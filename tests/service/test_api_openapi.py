"""The OpenAPI document tells the truth (issue #10): error bodies, content types,
security, per-algorithm params, valid examples, and Allow/OPTIONS as documented."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread

KEY = {"X-API-Key": "k"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data_dir: Path = tmp_path_factory.mktemp("openapi")
    settings = Settings(data_dir=str(data_dir), api_keys="k=predict+update+admin", max_dim=4096)
    with ServerThread(settings) as srv, srv.client(headers=KEY) as c:
        yield c


@pytest.fixture(scope="module")
def spec(client: httpx.Client) -> dict[str, Any]:
    doc: dict[str, Any] = client.get("/openapi.json").json()
    return doc


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method, op in item.items():
            yield path, method, op


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the components alongside, for jsonschema."""
    return {**schema, "components": spec["components"]}


def test_every_error_status_documents_the_real_error_body(spec: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for path, method, op in operations(spec):
        for code, resp in op["responses"].items():
            if code.startswith(("4", "5")) and (path, code) != ("/readyz", "503"):
                schema = resp["content"]["application/json"]["schema"]
                # the Open Inference Protocol's routes answer its {"error": ...}
                body = "V2Error" if path.startswith("/v2") else "ErrorBody"
                assert schema == {"$ref": f"#/components/schemas/{body}"}, (method, path, code)


def test_body_operations_document_415_408_and_422(spec: dict[str, Any]) -> None:
    for path, method, op in operations(spec):
        if "requestBody" in op:
            invalid = "400" if path.startswith("/v2") else "422"  # the v2 protocol's: 400
            assert {"400", "408", "413", "415", invalid} <= set(op["responses"]), (method, path)
        if path.startswith("/v2"):
            assert "422" not in op["responses"], (method, path)


def test_metrics_is_text_and_readyz_documents_503(spec: dict[str, Any]) -> None:
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    ready = spec["paths"]["/readyz"]["get"]["responses"]
    assert ready["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/Readiness")


def test_api_keys_are_security_schemes_per_operation(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "Authorization: Bearer <key>",
    }
    assert schemes["apiKeyHeader"] == {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    both = [{"bearerAuth": []}, {"apiKeyHeader": []}]
    scopes = {}
    for path, method, op in operations(spec):
        if path in ("/healthz", "/readyz", "/metrics", "/v2/health/live", "/v2/health/ready"):
            assert op["security"] == [], path  # open (metrics_public)
        else:
            assert op["security"] == both, (method, path)
            assert {"401", "403"} <= set(op["responses"])
            scopes[(method, path)] = op["x-required-scope"]
    assert scopes[("post", "/update")] == "update"
    assert scopes[("post", "/predict")] == "predict"
    assert scopes[("get", "/models/{name}")] == "predict"
    assert scopes[("put", "/models/{name}")] == "admin"
    assert scopes[("post", "/v2/models/{name}/infer")] == "predict"
    assert scopes[("get", "/v2/models/{name}/versions/{version}")] == "predict"


def test_params_are_typed_per_algorithm(spec: dict[str, Any]) -> None:
    comps = spec["components"]["schemas"]
    create = comps["ModelCreate"]
    assert create["discriminator"]["propertyName"] == "algorithm"
    algorithms = set(create["discriminator"]["mapping"])
    from service.models.kinds import ALGORITHMS

    assert algorithms == {"pa", "pa1", "pa2", "cw", "arow", "scw1", "scw2", "ranksvm",
                          "pa_regression", "pa1_regression", "pa2_regression",
                          "arow_regression", "sgd_regression",
                          "decision"} == set(ALGORITHMS)  # fmt: skip
    validator = jsonschema.Draft202012Validator(
        resolve(spec, {"$ref": "#/components/schemas/ModelCreate"})
    )
    dense = {"kind": "dense", "dim": 4}

    def ok(body: dict[str, Any]) -> bool:
        return validator.is_valid(body)

    assert ok({"algorithm": "scw1", "params": {"C": 1.0, "eta": 0.9}, "features": dense})
    assert not ok({"algorithm": "scw1", "params": {"c": 1.0}, "features": dense})  # C, not c
    assert not ok({"algorithm": "scw1", "params": {"eta": 1.5}, "features": dense})
    assert not ok({"algorithm": "pa", "params": {"C": 1.0}, "features": dense})
    assert not ok({"algorithm": "arow", "params": {"r": 0}, "features": dense})
    assert ok({"algorithm": "ranksvm", "params": {"pairs_per_group": None}, "features": dense})
    assert ok({"algorithm": "pa1_regression", "params": {"epsilon": 0, "C": 2}, "features": dense})
    assert not ok({"algorithm": "pa_regression", "params": {"C": 1.0}, "features": dense})
    assert not ok({"algorithm": "arow_regression", "params": {"r": -1}, "features": dense})
    assert not ok({"algorithm": "pa2_regression", "params": {"epsilon": -0.1}, "features": dense})
    assert not ok({"algorithm": "ranksvm", "params": {"seed": -1}, "features": dense})
    assert not ok({"algorithm": "arow", "features": {"kind": "dense", "dim": 4, "bits": 3}})
    assert not ok({"algorithm": "arow", "features": {"kind": "hashed", "bits": 20, "dim": 5}})
    assert ok({"algorithm": "arow", "features": {**dense, "intercept": True}})
    assert not ok({"algorithm": "arow", "features": {**dense, "intercept": 1}})
    # the configured limits are in the document
    assert not ok({"algorithm": "arow", "features": {"kind": "dense", "dim": 4097}})
    assert not ok({"algorithm": "arow", "features": {"kind": "hashed", "bits": 13}})
    assert ok({"algorithm": "arow", "features": {"kind": "hashed", "bits": 12}})


def test_every_example_validates_and_is_accepted(
    spec: dict[str, Any], client: httpx.Client
) -> None:
    comps = spec["components"]["schemas"]
    for name, schema in comps.items():
        validator = jsonschema.Draft202012Validator(
            resolve(spec, {"$ref": f"#/components/schemas/{name}"})
        )
        for example in schema.get("examples", []):
            errors = [e.message for e in validator.iter_errors(example)]
            assert not errors, (name, example, errors)
    examples = comps["ModelCreate"]["examples"]
    assert [e["algorithm"] for e in examples] == [
        "arow",
        "ranksvm",
        "arow_regression",
    ]  # (scw1: bits 20 > max_dim)
    for i, example in enumerate(examples):
        r = client.put(f"/models/example-{i}", json=example)
        assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/models/anything", {"GET", "PUT", "DELETE", "OPTIONS"}),
        ("/update", {"POST", "OPTIONS"}),
        ("/models/anything/versions", {"GET", "OPTIONS"}),
    ],
)
def test_options_and_405_list_every_method_of_the_path(
    client: httpx.Client, path: str, methods: set[str]
) -> None:
    r = client.options(path)
    assert r.status_code == 204, r.text
    assert {m.strip() for m in r.headers["allow"].split(",")} == methods
    r = client.patch(path, json={})
    assert r.status_code == 405 and r.json()["detail"]["error"] == "method_not_allowed"
    assert {m.strip() for m in r.headers["allow"].split(",")} == methods


def test_without_keys_the_operations_need_no_security(tmp_path: Path) -> None:
    with ServerThread(Settings(data_dir=str(tmp_path))) as srv, srv.client() as c:
        spec = c.get("/openapi.json").json()
    assert "securitySchemes" in spec["components"]
    assert all(op["security"] == [] for _, _, op in operations(spec))


def _refs(node: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    """Every ``$ref`` in ``node``, with where it sits."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield where, value
            else:
                yield from _refs(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, f"{where}/{i}")


def test_every_ref_resolves_and_the_document_is_valid_openapi(spec: dict[str, Any]) -> None:
    """Issue 31 item 4: the promote route's body referred to a missing ``PromoteRequest``."""
    refs = list(_refs(spec))
    assert refs
    dangling = []
    for where, ref in refs:
        assert ref.startswith("#/"), (where, ref)  # the document is self-contained
        node: Any = spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                dangling.append((where, ref))
                break
            node = node[part]
    assert not dangling, dangling
    promote = spec["paths"]["/models/{name}/promote"]["post"]["requestBody"]
    assert promote["content"]["application/json"]["schema"]["$ref"].endswith("/PromoteRequest")
    # and the document as a whole is OpenAPI 3.1 (schemathesis's validator of the spec)
    schemathesis = pytest.importorskip("schemathesis")
    schemathesis.openapi.from_dict(spec).validate()


def test_regression_schemas_default_to_the_learners_defaults(spec: dict[str, Any]) -> None:
    """The documented defaults of each regressor's params are the learner's own."""
    from learners.regression import make_regressor

    comps = spec["components"]["schemas"]
    schemas = {"pa": "PARegressionParams", "pa1": "PA1RegressionParams",
               "pa2": "PA1RegressionParams", "arow": "AROWRegressionParams"}  # fmt: skip
    for algorithm, schema in schemas.items():
        documented = {k: v.get("default") for k, v in comps[schema]["properties"].items()}
        assert documented == make_regressor(algorithm, 4, {}).params, algorithm


def test_records_features_are_in_the_document(spec: dict[str, Any], client: httpx.Client) -> None:
    """Issue 32 item 10: a raw-records model's config (``features.kind = "records"``) is
    in ``ModelCreate``, with its field kinds, transforms and text options typed."""
    validator = jsonschema.Draft202012Validator(
        resolve(spec, {"$ref": "#/components/schemas/ModelCreate"})
    )
    fields = {
        "age": {"type": "numeric", "transform": {"bins": [25, 30, 35]}},
        "hours": {"type": "numeric", "transform": "log1p"},
        "job": {"type": "categorical", "namespace": "c"},
        "note": {"type": "text", "lowercase": True, "words": {"ngrams": 2},
                 "chars": {"ngrams": [3, 5]}, "weighting": "log_tf"},
    }  # fmt: skip
    features = {"kind": "records", "bits": 12, "intercept": True, "fields": fields,
                "interactions": [["c", "c"]], "unknown_fields": "ignore",
                "max_features_per_record": 1000, "max_text_bytes": 100000}  # fmt: skip
    body = {"algorithm": "arow", "features": features}
    assert validator.is_valid(body), [e.message for e in validator.iter_errors(body)]
    assert client.put("/models/records-doc", json=body).status_code == 201
    bad = [
        {**features, "bits": 13},  # over max_dim (4096)
        {**features, "fields": {}},
        {**features, "unknown_fields": "keep"},
        {**features, "fields": {"age": {"type": "numeric", "transform": "log"}}},
        {**features, "fields": {"job": {"type": "categorical", "transform": "log1p"}}},
        {**features, "fields": {"note": {"type": "text", "weighting": "bm25"}}},
        {**features, "fields": {"note": {"type": "text", "chars": {"ngrams": [3, 11]}}}},
        {**features, "interactions": [["c"]]},
        {**features, "dim": 5},
    ]
    for features_bad in bad:
        body = {"algorithm": "arow", "features": features_bad}
        assert not validator.is_valid(body), features_bad
        assert client.put("/models/records-bad", json=body).status_code == 422, features_bad
