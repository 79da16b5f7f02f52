"""Bearer tokens and roles: admin (everything) > operator (chat, cancel, requeue) > viewer (read).

Tokens are checked against their stored hash on every request; the token's name is the user the
runs it starts are recorded for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pressloop.api.errors import Forbidden, Unauthorized
from pressloop.runtime.service import Service
from pressloop.store.records import TokenRecord

RANK = {"viewer": 0, "operator": 1, "admin": 2}

bearer = HTTPBearer(
    auto_error=False, description="An API token (`pressloop token create`): Bearer plt_..."
)


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def require(role: str) -> Callable[..., Awaitable[TokenRecord]]:
    """A dependency that lets through tokens with `role` or a higher one."""

    async def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> TokenRecord:
        if credentials is None:
            raise Unauthorized("this needs an API token: send the header Authorization: Bearer ...")
        token = await service_of(request).authenticate(credentials.credentials)
        if token is None:
            raise Unauthorized("the API token is not valid (unknown or revoked)")
        if RANK.get(token.role, -1) < RANK[role]:
            raise Forbidden(f"this needs the {role} role; the token {token.name!r} is {token.role}")
        return token

    return check


ServiceDep = Annotated[Service, Depends(service_of)]
Viewer = Annotated[TokenRecord, Depends(require("viewer"))]
Operator = Annotated[TokenRecord, Depends(require("operator"))]
Admin = Annotated[TokenRecord, Depends(require("admin"))]
