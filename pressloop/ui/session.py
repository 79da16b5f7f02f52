"""Signing in to the UI: an API token, checked once and then kept in an HttpOnly cookie."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request

from pressloop.api.auth import SESSION_COOKIE, has_role, service_of
from pressloop.store.records import TokenRecord


class SignInRequired(Exception):
    """Raised by pages without a valid session: the UI answers with the sign-in page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


async def signed_in(request: Request) -> TokenRecord:
    token = request.cookies.get(SESSION_COOKIE)
    record = await service_of(request).authenticate(token) if token else None
    if record is None:
        query = f"?{request.url.query}" if request.url.query else ""
        raise SignInRequired(request.url.path + query)
    return record


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
