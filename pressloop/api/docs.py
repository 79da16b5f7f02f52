"""`/docs`: Swagger UI served from this machine, with no inline script.

Swagger UI's files come from the installed `fastapi-offline` package (its `static/` folder), so
the page loads nothing from another origin and works offline; its start-up code is a script of
our own (`/docs/swagger-init.js`), not inline, so the one Content-Security-Policy of every page
(`api/headers.py`) holds here too. ReDoc is not served: its bundle needs inline styles and
`blob:` workers. The online validator badge is off (`validatorUrl: null`): it is another origin.
"""

from __future__ import annotations

from html import escape
from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from pressloop.errors import NotFound

DOCS_PATH = "/docs"
ASSETS = Path(str(files("fastapi_offline") / "static"))
# Only what the page uses; the package also ships ReDoc.
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
}

INIT_JS = """\
"use strict";
// Start Swagger UI on /docs (kept out of the page so its CSP allows no inline script).
window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
});
"""


def page(title: str, openapi_url: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{escape(title)} API</title>
  <link rel="icon" href="/ui/static/icon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="{DOCS_PATH}/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui" data-openapi-url="{escape(openapi_url)}"></div>
  <script src="{DOCS_PATH}/assets/swagger-ui-bundle.js"></script>
  <script src="{DOCS_PATH}/swagger-init.js"></script>
</body>
</html>
"""


def mount_docs(app: FastAPI) -> None:
    """Serve `/docs` for the app's OpenAPI schema (which must be on: `openapi_url`)."""
    assert app.openapi_url is not None
    html = page(app.title, app.openapi_url)
    router = APIRouter(include_in_schema=False)

    @router.get(DOCS_PATH)
    async def docs() -> HTMLResponse:
        return HTMLResponse(html)

    @router.get(f"{DOCS_PATH}/swagger-init.js")
    async def init_script() -> Response:
        return Response(INIT_JS, media_type="text/javascript; charset=utf-8")

    @router.get(f"{DOCS_PATH}/assets/{{name}}")
    async def asset(name: str) -> FileResponse:
        if name not in ASSET_TYPES:
            raise NotFound(f"no such docs asset: {name!r}")
        return FileResponse(ASSETS / name, media_type=ASSET_TYPES[name])

    app.include_router(router)
