"""The API's interactive documents, Swagger UI at /api/docs and ReDoc at /api/redoc, served with
their scripts and styles from an installed package (fastapi-offline's copies): they load on a
network that cannot reach a CDN, and load nothing from anywhere else."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/api/docs-assets"
ASSETS = Path(str(files("fastapi_offline") / "static"))
TITLE = "Orgdeck API"


def install_docs(app: FastAPI, *, openapi_url: str, docs_url: str, redoc_url: str) -> None:
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS), name="docs-assets")

    def asset(request: Request, name: str) -> str:
        # Behind a proxy that serves the app under a prefix, the browser asks for the prefixed path.
        return f"{request.scope.get('root_path', '').rstrip('/')}{ASSETS_PATH}/{name}"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=request.scope.get("root_path", "").rstrip("/") + openapi_url,
            title=f"{TITLE}: Swagger UI",
            swagger_js_url=asset(request, "swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
        )

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=request.scope.get("root_path", "").rstrip("/") + openapi_url,
            title=f"{TITLE}: ReDoc",
            redoc_js_url=asset(request, "redoc.standalone.js"),
            redoc_favicon_url=asset(request, "favicon.png"),
            with_google_fonts=False,
        )
