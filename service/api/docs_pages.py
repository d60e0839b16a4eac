"""``/docs`` (Swagger UI) and ``/redoc`` served whole by the service (issue 31 item 5).

FastAPI's pages load their scripts and stylesheet from a CDN (and a favicon and fonts
from other hosts), so they are blank where the service usually runs: a network with
no way out. The assets come from the ``fastapi-offline`` package instead, which ships
Swagger UI's bundle and stylesheet and ReDoc's standalone bundle, and are served
under :data:`ASSETS_URL` by Starlette's ``StaticFiles`` (which looks files up and
reads them in a worker thread, off the event loop, with ETag/Last-Modified).

The pages and their assets need no API key, as FastAPI's did; they say nothing that
``/openapi.json`` does not.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
ASSETS_URL = "/docs/assets"
# swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))


def _root(request: Request) -> str:
    """The path the service is mounted under behind a proxy (``--root-path``), if any."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def install_docs(app: FastAPI) -> None:
    """The docs pages and their assets on ``app`` (created with ``docs_url=None`` and
    ``redoc_url=None``, so that FastAPI's CDN pages are not there)."""
    openapi_url = app.openapi_url or "/openapi.json"
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
            init_oauth=app.swagger_ui_init_oauth,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,  # ReDoc falls back to the browser's fonts
        )

    for path, page in ((DOCS_URL, swagger_ui), (OAUTH2_REDIRECT_URL, oauth2_redirect),
                       (REDOC_URL, redoc)):  # fmt: skip
        app.add_api_route(path, page, methods=["GET"], include_in_schema=False)
