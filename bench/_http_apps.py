"""Ceilings for ``bench/http.py``: the cheapest servers uvicorn can run.

- ``bare``: a raw ASGI callable that reads the body and answers a fixed JSON.
- ``noop``: a FastAPI app with one ``POST /predict`` route that reads the body
  and answers a fixed JSON (what any FastAPI service pays before doing work).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

_BODY = b'{"ok":true}'


async def bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        msg = await receive()
        more = msg.get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_BODY)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _BODY})


noop = FastAPI()


@noop.post("/predict")
async def _noop(request: Request) -> Response:
    await request.body()
    return Response(_BODY, media_type="application/json")


@noop.get("/healthz")
async def _health() -> Response:
    return Response(_BODY, media_type="application/json")


def stack_floor() -> Any:
    """learnserve's whole stack (metrics, the hot routes' pipeline: API keys, content type,
    readiness, the body read with its deadline, the answer's JSON) with a ``/predict``
    handler that answers a constant: what a request costs before any model work
    (``bench/stack_floor.py``). A uvicorn factory; settings from the environment."""
    from service.api import hot
    from service.app import factory

    async def constant(*_: Any) -> dict[str, Any]:
        return {"model": "floor", "version": 0, "predictions": []}

    hot.ROUTES["/predict"] = ("predict", constant)
    return factory()
