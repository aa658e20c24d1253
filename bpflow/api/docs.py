"""The interactive documentation (Swagger UI) at `/api/docs`, served whole by bpflow so it
works offline (SPEC §13): its script, style sheet and icon come from the `fastapi-offline`
package under `/api/docs/static`, never from a CDN, and the online spec validator is off."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS = "/api/docs"
STATIC = f"{DOCS}/static"
OAUTH2_REDIRECT = f"{DOCS}/oauth2-redirect"
ASSETS = Path(fastapi_offline.__file__).parent / "static"


def add_docs(app: FastAPI) -> None:
    """The Swagger UI page, its OAuth2 redirect page and its assets (the app is made with
    `docs_url=None`: the framework's own page loads them from a CDN)."""
    app.mount(STATIC, StaticFiles(directory=ASSETS), name="docs-static")

    @app.get(DOCS, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT}",
            swagger_js_url=f"{root}{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{root}{STATIC}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None})

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
