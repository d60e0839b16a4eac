"""Dependencies shared by the routes, as ``Annotated`` aliases.

All are ``async def``: FastAPI runs plain ``def`` dependencies in a thread pool,
which costs more than the whole /predict handler.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.api.errors import ApiError
from service.engine.facade import Engine
from service.settings import Settings


def ready_engine(engine: Engine) -> Engine:
    """The engine, once the service is ready (the one readiness check of every route)."""
    if not engine.ready:
        raise not_ready(engine)
    return engine


async def get_engine(request: Request) -> Engine:
    return ready_engine(request.app.state.engine)


def not_ready(reg: Engine) -> ApiError:
    """503 saying what the service waits for (compiling kernels, restoring models, the store)."""
    return ApiError(
        503,
        "not_ready",
        f"the service is starting, waiting for {reg.not_ready_reason()}; retry shortly",
        headers={"Retry-After": "1"},
    )


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
