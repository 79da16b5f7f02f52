"""API tokens and roles: admin (everything) > operator (chat, cancel, requeue) > viewer (read).

A token comes as `Authorization: Bearer ...` (API clients) or in the admin UI's session cookie
(the browser). Tokens are checked against their stored hash on every request; the token's name is
the user the runs it starts are recorded for.

The cookie is `SameSite=Strict` and `HttpOnly`; on top of that, a request that changes something
with the cookie alone must carry the `X-Pressloop-UI` header, which a cross-site form cannot send
and a cross-site script cannot add without a CORS preflight that Pressloop never allows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from pressloop.api.errors import Forbidden, Unauthorized
from pressloop.runtime.service import Service
from pressloop.store.records import TokenRecord

RANK = {"viewer": 0, "operator": 1, "admin": 2}
SESSION_COOKIE = "pressloop_session"
UI_HEADER = "X-Pressloop-UI"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

bearer = HTTPBearer(
    auto_error=False, description="An API token (`pressloop token create`): Bearer plt_..."
)
session_cookie = APIKeyCookie(
    name=SESSION_COOKIE,
    auto_error=False,
    description="The admin UI's session (set by signing in at /ui/login).",
)


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def token_from(
    request: Request, credentials: HTTPAuthorizationCredentials | None, cookie: str | None
) -> str:
    """The token the request authenticates with: the bearer header first, then the cookie."""
    if credentials is not None:
        return credentials.credentials
    if cookie:
        if request.method not in SAFE_METHODS and UI_HEADER.lower() not in request.headers:
            raise Forbidden(f"a signed-in browser must send the {UI_HEADER} header to change this")
        return cookie
    raise Unauthorized("this needs an API token: send the header Authorization: Bearer ...")


def has_role(token: TokenRecord, role: str) -> bool:
    return RANK.get(token.role, -1) >= RANK[role]


def require(role: str) -> Callable[..., Awaitable[TokenRecord]]:
    """A dependency that lets through tokens with `role` or a higher one."""

    async def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
        cookie: Annotated[str | None, Depends(session_cookie)],
    ) -> TokenRecord:
        token = await service_of(request).authenticate(token_from(request, credentials, cookie))
        if token is None:
            raise Unauthorized("the API token is not valid (unknown or revoked)")
        if not has_role(token, role):
            raise Forbidden(f"this needs the {role} role; the token {token.name!r} is {token.role}")
        return token

    return check


ServiceDep = Annotated[Service, Depends(service_of)]
Viewer = Annotated[TokenRecord, Depends(require("viewer"))]
Operator = Annotated[TokenRecord, Depends(require("operator"))]
Admin = Annotated[TokenRecord, Depends(require("admin"))]
