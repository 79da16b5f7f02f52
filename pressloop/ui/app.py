"""Mount the UI on the API's app: the pages, their static files, the sign-in redirect, and the
sign-in form's body limit. `pressloop serve` (and the tests that reach the UI) build the app as
`mount_ui(create_app(service, ...))`."""

from __future__ import annotations

from pathlib import Path

from fastapi import Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from pressloop.api.app import PressloopApp
from pressloop.ui.pages import chat, operations, overview, runs, settings, signin, tokens
from pressloop.ui.session import SignInRequired, sign_in_url

STATIC = Path(__file__).parent / "static"


async def _to_sign_in(_request: Request, exc: Exception) -> RedirectResponse:
    assert isinstance(exc, SignInRequired)
    return RedirectResponse(sign_in_url(exc.next_path), status_code=303)


def mount_ui(app: PressloopApp) -> PressloopApp:
    """The admin UI on `app` (before it serves); `app` itself, to compose in one expression."""
    app.path_limits[signin.SIGN_IN_PATH] = signin.MAX_FORM_BYTES
    app.add_exception_handler(SignInRequired, _to_sign_in)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
    for module in (signin, chat, overview, runs, operations, settings, tokens):
        app.include_router(module.router, include_in_schema=False)
    return app
