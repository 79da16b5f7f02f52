"""Signing in to the UI: an API token, checked once, opens a server-side session whose random id
is kept in an HttpOnly cookie (the token itself never is). Failed sign-ins are throttled per
client address."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request

from pressloop.api.auth import SESSION_COOKIE, access_of, has_role, service_of
from pressloop.api.throttle import SignInThrottle
from pressloop.store.records import TokenRecord


class SignInRequired(Exception):
    """Raised by pages without a valid session: the UI answers with the sign-in page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


async def signed_in(request: Request) -> TokenRecord:
    session_id = request.cookies.get(SESSION_COOKIE)
    record = await access_of(request).session_token(session_id) if session_id else None
    if record is None:
        query = f"?{request.url.query}" if request.url.query else ""
        raise SignInRequired(request.url.path + query)
    return record


def throttle_of(request: Request) -> SignInThrottle:
    """The app's count of failed sign-ins per address (made once, on the service's clock)."""
    throttle: SignInThrottle | None = getattr(request.app.state, "sign_in_throttle", None)
    if throttle is None:
        service = service_of(request)
        throttle = SignInThrottle(
            now=service.now,
            max_failures=service.settings.sign_in_max_failures,
            window_s=service.settings.sign_in_window_s,
        )
        request.app.state.sign_in_throttle = throttle
    return throttle


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def safe_next(path: str | None) -> str:
    """Where to go after signing in: only a path inside the UI (never another site)."""
    if path and path.startswith("/ui") and not path.startswith("//"):
        return path
    return "/ui/"


def sign_in_url(next_path: str) -> str:
    return f"/ui/login?next={quote(next_path, safe='')}"


User = Annotated[TokenRecord, Depends(signed_in)]


def abilities(user: TokenRecord) -> dict[str, bool]:
    """What the page may offer: a viewer gets no action buttons (the API refuses them anyway)."""
    return {"can_operate": has_role(user, "operator"), "is_admin": has_role(user, "admin")}
