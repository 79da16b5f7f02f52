"""Sign in with an API token, sign out; `/ui` itself opens the chat."""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from pressloop.api.auth import SESSION_COOKIE, service_of
from pressloop.ui.render import TEMPLATES
from pressloop.ui.session import safe_next

router = APIRouter()

# The cookie lives as long as a working day; the token itself stays valid until it is revoked.
SESSION_MAX_AGE_S = 12 * 3600
MAX_FORM_BYTES = 4096


def _sign_in_page(
    request: Request, *, next_path: str, error: str = "", status: int = 200
) -> Response:
    return TEMPLATES.TemplateResponse(
        request,
        "login.html",
        {"next": next_path, "error": error, "user": None},
        status_code=status,
    )


@router.get("/ui")
@router.get("/ui/")
async def home() -> RedirectResponse:
    return RedirectResponse("/ui/chat", status_code=303)


@router.get("/ui/login")
async def sign_in_form(request: Request, next: str | None = None) -> Response:
    return _sign_in_page(request, next_path=safe_next(next))


@router.post("/ui/login")
async def sign_in(request: Request) -> Response:
    # A plain form post (no script needed); parsed here to spare a multipart dependency.
    body = (await request.body())[:MAX_FORM_BYTES].decode("utf-8", "replace")
    form = {key: values[0] for key, values in parse_qs(body).items()}
    next_path = safe_next(form.get("next"))
    token = form.get("token", "").strip()
    if not token:
        return _sign_in_page(request, next_path=next_path, error="Enter an API token.", status=422)
    record = await service_of(request).authenticate(token)
    if record is None:
        return _sign_in_page(
            request,
            next_path=next_path,
            error="That token is not valid (unknown or revoked).",
            status=401,
        )
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/ui/logout")
async def sign_out() -> Response:
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
