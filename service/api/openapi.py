"""The OpenAPI document (``/openapi.json``), made to tell the truth.

FastAPI's generator knows only what the route decorators say. The routes read
their bodies by hand, check API keys in code and answer errors in one shape, so
this module completes the document from the same facts the code uses:

- every error status has the real body (``ErrorBody``), never FastAPI's
  ``HTTPValidationError``; each operation lists the statuses its layers can answer
  (401/403 with keys, 503 while restoring or with the store down, 400/408/413/415/422
  for a body, 404/422 for a ``{name}``);
- the hand-parsed bodies' schemas, with examples, and ``ModelCreate`` per algorithm
  with the configured limits (``max_dim``, ``max_batch_examples``) written in;
- API keys as ``securitySchemes`` (bearer and ``X-API-Key``) and per-operation
  ``security`` with the scope needed (``x-required-scope``), as configured.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from service.api.hot import MODEL_ROUTES
from service.api.hot import ROUTES as HOT_ROUTES
from service.api.model_schemas import MODEL_CREATE, MODEL_CREATE_EXAMPLES
from service.api.schemas import BODY_MODELS, DOC_MODELS
from service.api.v2_docs import DOC_MODELS as V2_DOC_MODELS
from service.settings import Settings

_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_V2_ERROR_REF = {"$ref": "#/components/schemas/V2Error"}
_REASONS = {
    400: "bad request (e.g. a Content-Length that is not a number)",
    401: "an API key is required, or the key is unknown",
    403: "the API key lacks the scope this operation needs",
    404: "no such model",
    408: "the request body did not arrive within body_timeout_seconds",
    409: "conflicts with the model's state or kind",
    413: "body or batch over the configured limits",
    415: "Content-Type is not the one this operation reads",
    422: "invalid input; `field` names the offending part",
    503: "not ready yet, or the store is unreachable (see Retry-After)",
}
# A model name in a path: 1-64 of A-Z a-z 0-9 . _ -, but not "." or ".." (which
# clients normalise away). Written without look-arounds, which not every tool reads.
NAME_PATTERN = (
    r"^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}"
    r"|\.\.[A-Za-z0-9._-]{1,62})$"
)
SECURITY_SCHEMES = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "Authorization: Bearer <key>",
    },
    "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
}


def required_scope(method: str, path: str, settings: Settings) -> str | None:
    """The API-key scope an operation needs, None for none: what the code checking the key
    asks (``tests/service/test_api_scopes_doc.py`` probes every operation against this).

    The routes :mod:`service.api.hot` serves check the scope of its tables; the FastAPI
    routes say theirs as a dependency (:func:`route_scopes` reads those); the v2 routes
    ask ``predict`` in code, except health."""
    if path in ("/healthz", "/readyz") or path.startswith("/v2/health/"):
        return None
    if path == "/metrics":
        return None if settings.metrics_public else "admin"
    if method == "post" and path in HOT_ROUTES:
        return HOT_ROUTES[path][0]
    if method == "post" and path.startswith("/models/{name}/"):
        hot = MODEL_ROUTES.get(path.removeprefix("/models/{name}/"))
        if hot is not None:
            return hot[0]
    if path == "/models/{name}/state":  # a full copy of the model
        return "admin"
    if path == "/predict" or method == "get" or path.startswith("/v2"):
        return "predict"
    return "admin"


def route_scopes(app: FastAPI) -> dict[tuple[str, str], str]:
    """(method, path) -> the scope of the ``require_<scope>`` dependency of each FastAPI
    route that has one (:mod:`service.api.auth`)."""
    out: dict[tuple[str, str], str] = {}
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue
        stack = list(route.dependant.dependencies)
        while stack:
            dep = stack.pop()
            name = getattr(dep.call, "__name__", "")
            if name.startswith("require_"):
                for method in route.methods or ():
                    out[(method.lower(), route.path)] = name.removeprefix("require_")
            stack.extend(dep.dependencies)
    return out


def install_openapi(app: FastAPI, settings: Settings) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app, settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def build(app: FastAPI, settings: Settings) -> dict[str, Any]:
    schema = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    # (a route's body_doc model is a component too, so its $ref resolves)
    for model in dict.fromkeys([*DOC_MODELS, *V2_DOC_MODELS, *BODY_MODELS.values()]):
        _add(schemas, model.__name__, model.model_json_schema(ref_template=_REF))
    create = MODEL_CREATE.json_schema(ref_template=_REF)
    create["examples"] = [e for e in MODEL_CREATE_EXAMPLES if _within(e["features"], settings)]
    _add(schemas, "ModelCreate", create)
    _write_limits(schemas, settings)
    for base in ("UpdateRequest", "PredictRequest"):
        # The path-form routes (/models/{name}/update|predict): the same body, whose
        # "model" may be left out (the path names it).
        by_path = copy.deepcopy(schemas[base])
        by_path["required"] = [r for r in by_path.get("required", []) if r != "model"]
        by_path["title"] = base.replace("Request", "ByPathRequest")
        schemas[by_path["title"]] = by_path
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    components["securitySchemes"] = SECURITY_SCHEMES
    paths = schema.get("paths", {})
    declared = route_scopes(app)
    for path, item in paths.items():
        for method, op in item.items():
            scope = declared.get((method, path)) or required_scope(method, path, settings)
            _complete(op, method, path, settings, scope)
    _add_links(paths)
    return schema


_REF = "#/components/schemas/{model}"


def _add(schemas: dict[str, Any], name: str, js: dict[str, Any]) -> None:
    for sub_name, sub in js.pop("$defs", {}).items():
        schemas.setdefault(sub_name, sub)
    schemas[name] = js


def _max_bits(settings: Settings) -> int:
    return min(31, settings.max_dim.bit_length() - 1)


def _within(features: dict[str, Any], settings: Settings) -> bool:
    """An example's features fit this server's limits (examples must validate)."""
    return bool(
        features.get("dim", 1) <= settings.max_dim
        and features.get("bits", 1) <= _max_bits(settings)
    )


def _write_limits(schemas: dict[str, Any], settings: Settings) -> None:
    for kind in ("DenseFeatures", "SparseFeatures"):
        schemas[kind]["properties"]["dim"]["maximum"] = settings.max_dim
    for kind in ("HashedFeatures", "RecordsFeatures"):
        schemas[kind]["properties"]["bits"]["maximum"] = _max_bits(settings)
    for name, key in (("UpdateRequest", "examples"), ("UpdateRequest", "queries"),
                      ("PredictRequest", "instances"), ("PredictRequest", "queries")):  # fmt: skip
        # Optional, but never null: an absent list is fine, a null one is refused.
        prop = schemas[name]["properties"][key]
        array = next(s for s in prop.pop("anyOf") if s.get("type") == "array")
        prop.update(array, maxItems=settings.max_batch_examples)
        prop.pop("default", None)


def _complete(
    op: dict[str, Any], method: str, path: str, settings: Settings, scope: str | None
) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    codes: set[int] = set()
    if scope is not None and settings.auth_enabled:
        op["security"] = [{"bearerAuth": []}, {"apiKeyHeader": []}]
        codes |= {401, 403}
    else:
        op["security"] = []
    if scope is not None:
        op["x-required-scope"] = scope
    if path.startswith("/models") or path in ("/update", "/predict"):
        codes.add(503)
    # The Open Inference Protocol routes (service.api.v2) answer invalid input with
    # 400 and errors as {"error": ...} (V2Error), as that protocol says.
    v2 = path.startswith("/v2")
    if "requestBody" in op:
        codes |= {400, 408, 413, 415} if v2 else {400, 408, 413, 415, 422}
    if "{name}" in path:
        codes |= {404} if v2 else {404, 422}
        for param in op.get("parameters", []):
            if param.get("in") == "path" and param.get("name") == "name":
                param["schema"] = {"type": "string", "pattern": NAME_PATTERN, "title": "Name"}
    if v2:
        responses.pop("422", None)  # FastAPI's, for path parameters: never answered there
    for status in sorted(codes):
        responses.setdefault(str(status), {"description": _REASONS[status]})
    for code, resp in responses.items():
        if code.startswith(("4", "5")) and not (path == "/readyz" and code == "503"):
            resp["content"] = {"application/json": {"schema": _V2_ERROR_REF if v2 else _ERROR_REF}}
            if resp.get("description") in (None, "", "Validation Error"):
                resp["description"] = _REASONS.get(int(code), "error")


# What a created model leads to, as OpenAPI links (clients and schemathesis's
# stateful phase follow them): link name -> (operation id, body given to it).
_NAME = {"name": "$request.path.name"}
_MODEL = {"model": "$request.path.name"}
_AFTER_CREATE: dict[str, tuple[str, dict[str, str] | None]] = {
    "GetModel": ("get_model_models__name__get", None),
    "Checkpoint": ("checkpoint_model_models__name__checkpoint_post", None),
    "Update": ("update_update_post", _MODEL),
    "Predict": ("predict_predict_post", _MODEL),
    "DeleteModel": ("delete_model_models__name__delete", None),
}
_AFTER_DEPLOY: dict[str, tuple[str, dict[str, str] | None]] = {
    "GetModel": ("get_model_models__name__get", None),
    "Versions": ("list_artifacts_models__name__versions_get", None),
    "Artifacts": ("list_artifacts_models__name__artifacts_get", None),
    "Activate": ("activate_models__name__active_put", None),
    "Rollback": ("rollback_models__name__rollback_post", None),
    "Predict": ("predict_predict_post", _MODEL),
    "DeleteModel": ("delete_model_models__name__delete", None),
}


def _add_links(paths: dict[str, Any]) -> None:
    for path, status, targets in (("/models/{name}", "201", _AFTER_CREATE),
                                  ("/models/{name}", "200", _AFTER_CREATE),
                                  ("/models/{name}/artifact", "201", _AFTER_DEPLOY)):  # fmt: skip
        links = paths[path]["put"]["responses"][status].setdefault("links", {})
        for link_name, (op_id, body) in targets.items():
            link: dict[str, Any] = {"operationId": op_id}
            if body is None:
                link["parameters"] = _NAME
            else:
                link["requestBody"] = body
            links[link_name] = link
