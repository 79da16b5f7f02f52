"""API tokens and roles: admin (everything) > operator (chat, cancel, requeue) > viewer (read).

A token comes as `Authorization: Bearer ...` (API clients); the admin UI's browser sends its
session cookie instead (a random session id made at sign-in, never the token itself). Both are
checked against their stored hash on every request, so a revoked or expired token, or a
signed-out session, is refused at once; the token's name is the user the runs it starts are
recorded for.

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
from pressloop.runtime.access import Access
from pressloop.runtime.service import Service
from pressloop.store.records import TokenRecord
from pressloop.store.tokens import AccessToken

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


async def _service(request: Request) -> Service:
    """`service_of` as a dependency: async, so FastAPI calls it on the loop (a plain `def`
    dependency is run on a worker thread, a hop of its own on every request)."""
    return service_of(request)


def access_of(request: Request) -> Access:
    """The app's tokens and sessions, over its service's database and clock (made once)."""
    access: Access | None = getattr(request.app.state, "access", None)
    if access is None:
        service = service_of(request)
        access = Access(database=service.database, settings=service.settings, now=service.now)
        request.app.state.access = access
    return access


async def authenticated(
    request: Request, credentials: HTTPAuthorizationCredentials | None, cookie: str | None
) -> AccessToken:
    """The live token of the request: the bearer header first, then the UI's session cookie."""
    access = access_of(request)
    if credentials is not None:
        token = await access.authenticate(credentials.credentials)
        if token is None:
            raise Unauthorized("the API token is not valid (unknown, expired or revoked)")
        return token
    if cookie:
        if request.method not in SAFE_METHODS and UI_HEADER.lower() not in request.headers:
            raise Forbidden(f"a signed-in browser must send the {UI_HEADER} header to change this")
        token = await access.session_token(cookie)
        if token is None:
            raise Unauthorized("the session has ended (signed out, expired or revoked)")
        return token
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
        token = await authenticated(request, credentials, cookie)
        if not has_role(token, role):
            raise Forbidden(f"this needs the {role} role; the token {token.name!r} is {token.role}")
        return token

    return check


ServiceDep = Annotated[Service, Depends(_service)]
Viewer = Annotated[TokenRecord, Depends(require("viewer"))]
Operator = Annotated[TokenRecord, Depends(require("operator"))]
Admin = Annotated[TokenRecord, Depends(require("admin"))]
