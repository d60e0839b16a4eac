"""``POST /v2/models/{name}[/versions/{v}]/infer``: the handler, and the model lookup the
other v2 routes share (:mod:`service.api.v2`).

Requests are answered by :func:`serve_infer`, plain ASGI called from
:mod:`service.api.hot` ahead of FastAPI's stack, as ``/predict`` is (one row through
FastAPI's layers ran at 0.62x of ``/predict``, plain at ~0.9x: ``bench/v2.py``); the
FastAPI routes in :mod:`service.api.v2` document the path and run :func:`infer_answer`.

>>> infer_target("/v2/models/digits/infer"), infer_target("/v2/models/d/versions/3/infer")
(('digits', None), ('d', '3'))
>>> infer_target("/v2/models/d/ready") is None
True
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.types import Receive, Send

from service.api.deps import ready_engine
from service.api.errors import ApiError, http_headers, http_status
from service.api.request_bodies import (
    ClientGone,
    check_content_type,
    receive_body,
    type_name,
    unsupported_type,
)
from service.api.v2_outputs import output_names, output_tensors, requested_outputs
from service.api.v2_tensors import (
    bad,
    encode_response,
    input_matrix,
    split_request,
)
from service.engine import followers
from service.engine.facade import Engine
from service.engine.model_handle import ModelHandle
from service.errors import ServiceError
from service.models.payload import dense_batch

log = logging.getLogger("learnserve.api")
_INFER_TYPES = ("application/json", "application/octet-stream")
_JSON = "application/json"
# The only request headers infer reads.
WANTED = frozenset({b"content-length", b"content-type", b"content-encoding", b"authorization",
                    b"x-api-key", b"inference-header-content-length"})  # fmt: skip


def infer_target(path: str) -> tuple[str, str | None] | None:
    """(model, version or None) of an infer path, else None."""
    if not (path.startswith("/v2/models/") and path.endswith("/infer")):
        return None
    parts = path[11:-6].split("/")
    if len(parts) == 1 and parts[0]:
        return parts[0], None
    if len(parts) == 3 and parts[0] and parts[1] == "versions" and parts[2]:
        return parts[0], parts[2]
    return None


def error_answer(e: ServiceError, rstate: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
    """The protocol's error body ``{"error": message}`` (with ``code``, ``field``); 422 as 400."""
    rstate["error_code"] = e.code  # for learnserve_request_errors_total
    body = {"error": e.message, "code": e.code}
    if e.field is not None:
        body["field"] = e.field
    status = http_status(e)
    return 400 if status == 422 else status, orjson.dumps(body), http_headers(e) or {}


async def served(
    engine: Engine, name: str, version: str | None, rstate: dict[str, Any]
) -> tuple[ModelHandle, int]:
    """The model and its row width; 400 for a model whose input is no tensor, 404 for
    a version not served now."""
    h = await ready_engine(engine).find(name)
    rstate["model"] = h.name  # only names that exist become metric labels
    a = h.adapter
    width = a.tensor_width() if a.tensor_task else None
    if width is None:
        features = a.config.get("features", {}).get("kind", "sparse")
        raise ApiError(
            400,
            "not_a_tensor_model",
            f"model {name!r} ({a.kind}, {features} features) reads maps of features, "
            "not a fixed-width tensor: use POST /predict",
            "name",
        )
    if version is not None and version != str(h.version):
        raise ApiError(
            404,
            "version_not_found",
            f"model {name!r} serves version {h.version}, not {version[:40]!r} (the version "
            "moves with every update or deploy; ask without /versions/ for the current one)",
            "version",
        )
    return h, width


async def infer_answer(
    state: Any,
    headers: Mapping[str, str],
    read: Callable[[int, float], Awaitable[bytes]],
    name: str,
    version: str | None,
    rstate: dict[str, Any],
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an infer answer. ``state``: the app's state (keyring,
    engine); ``headers``: lower-case names; ``read(max_bytes, timeout)``: the body."""
    state.keyring.check(headers, "predict")
    ctype = headers.get("content-type", "")
    # tritonclient sends no Content-Type; infer changes no model, so the
    # cross-site-form reason to insist on one (service.api.request_bodies) does not apply.
    if ctype.strip():  # else the JSON routes' rule (a charset must be utf-8)
        check_content_type(ctype, _INFER_TYPES)
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":  # tritonclient's request_compression_algorithm
        raise unsupported_type(f"Content-Encoding {encoding[:40]!r}: send the body as is")
    engine = ready_engine(state.engine)
    settings = engine.settings
    raw = await read(settings.max_body_bytes, settings.body_timeout_seconds)
    req, binary = split_request(raw, headers.get("inference-header-content-length"))
    h, width = await served(engine, name, version, rstate)
    X = input_matrix(req, binary, width, settings.max_batch_examples)
    wanted, named = requested_outputs(req, output_names(h.adapter))
    # (a promoted follower answers under its leader's name; no await since: one version)
    preds = followers.serving(h).adapter.predict_batch(dense_batch(X))
    head: dict[str, Any] = {"model_name": h.name, "model_version": str(h.version)}
    if "id" in req:  # echoed, as the protocol asks
        if type(req["id"]) is not str:
            raise bad(f"must be a string, got {type_name(req['id'])}", "id")
        head["id"] = req["id"]
    body, n = encode_response(head, output_tensors(preds, wanted, named))
    if n == len(body):
        return body, {"content-type": _JSON}
    return body, {"content-type": "application/octet-stream",
                  "inference-header-content-length": str(n)}  # fmt: skip


async def serve_infer(
    state: Any, scope: Any, receive: Receive, send: Send, target: tuple[str, str | None]
) -> None:
    """Answer one infer request as plain ASGI (``service.api.hot``)."""
    headers: dict[str, str] = {}
    for k, v in scope["headers"]:
        if k in WANTED:
            headers.setdefault(k.decode("latin-1"), v.decode("latin-1"))  # first wins
    rstate = scope.setdefault("state", {})

    async def read(max_bytes: int, timeout: float) -> bytes:
        return await receive_body(receive, headers.get("content-length"), max_bytes, timeout)

    status = 200
    try:
        body, extra = await infer_answer(state, headers, read, *target, rstate)
    except ServiceError as e:
        status, body, extra = error_answer(e, rstate)
        extra = {"content-type": _JSON, **extra}
    except ClientGone:
        rstate["status"] = 499  # nothing to answer; counted apart from server errors
        return
    except Exception:
        log.exception("unhandled error on POST %s", scope["path"])
        status, extra = 500, {"content-type": _JSON}
        body = orjson.dumps({"error": "internal error (see the server log)", "code": "internal"})
    out = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})
