"""API tokens (admins): each token's life (created, expires, last used, revoked), revoke one,
create one (shown once). Every change goes through `/v1/tokens` from the browser."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import access_of, has_role
from pressloop.api.tokens import TokenOut
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()


@router.get("/ui/tokens")
async def tokens(request: Request, user: User) -> Response:
    listed: list[TokenOut] = []
    if has_role(user, "admin"):
        access = access_of(request)
        now = access.now()
        listed = [TokenOut.of(t, now) for t in reversed(await access.list_tokens())]
    return await page(request, "tokens.html", user, "settings", tokens=listed)
