"""Sign in with an API token (a server-side session), sign out (ends it); `/ui` opens the chat."""

from __future__ import annotations

import math
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from pressloop.api.auth import SESSION_COOKIE, access_of
from pressloop.errors import RateLimited
from pressloop.ui.render import TEMPLATES
from pressloop.ui.session import client_address, safe_next, throttle_of

router = APIRouter()

SIGN_IN_PATH = "/ui/login"
# The sign-in form holds one token: the app refuses a larger body before reading it.
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


@router.get(SIGN_IN_PATH)
async def sign_in_form(request: Request, next: str | None = None) -> Response:
    return _sign_in_page(request, next_path=safe_next(next))


@router.post(SIGN_IN_PATH)
async def sign_in(request: Request) -> Response:
    # A plain form post (no script needed); parsed here to spare a multipart dependency.
    body = (await request.body())[:MAX_FORM_BYTES].decode("utf-8", "replace")
    form = {key: values[0] for key, values in parse_qs(body).items()}
    next_path = safe_next(form.get("next"))
    address, throttle = client_address(request), throttle_of(request)
    try:
        throttle.check(address)
    except RateLimited as limited:
        wait_s = max(1, math.ceil(limited.retry_after_s))
        refused = _sign_in_page(
            request,
            next_path=next_path,
            error=f"Too many failed sign-ins from this address: try again in {wait_s} s.",
            status=429,
        )
        refused.headers["Retry-After"] = str(wait_s)
        return refused
    token = form.get("token", "").strip()
    if not token:
        return _sign_in_page(request, next_path=next_path, error="Enter an API token.", status=422)
    access = access_of(request)
    record = await access.authenticate(token)
    if record is None:
        throttle.failed(address)
        return _sign_in_page(
            request,
            next_path=next_path,
            error="That token is not valid (unknown, expired or revoked).",
            status=401,
        )
    previous = request.cookies.get(SESSION_COOKIE)
    if previous:
        await access.close_session(previous)
    session = await access.open_session(record)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session.id,
        max_age=max(1, math.ceil((session.expires_at - access.now()).total_seconds())),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/ui/logout")
async def sign_out(request: Request) -> Response:
    """End the session on the server too: the cookie's value is refused from now on."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        await access_of(request).close_session(session_id)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
