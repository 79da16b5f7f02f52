"""API tokens (admin only): create (optionally expiring), list, revoke.

Neither a token nor its hash is ever answered, except the new token itself, once, on creation.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from pressloop.api.auth import Admin, access_of
from pressloop.api.bounds import Id
from pressloop.api.schemas import Request as Body
from pressloop.api.schemas import Role
from pressloop.errors import InvalidRequest
from pressloop.runtime.access import LONGEST, parse_duration
from pressloop.store.tokens import AccessToken

router = APIRouter(tags=["tokens"])

TokenStatus = Literal["active", "expired", "revoked"]


class TokenCreate(Body):
    name: str = Field(min_length=1, max_length=200)
    role: Role
    expires_in: Annotated[
        Annotated[str, Field(min_length=1, max_length=40)]
        | Annotated[int, Field(ge=1, le=int(LONGEST.total_seconds()))]
        | None,
        Field(
            description="How long the token lives: 30d, 12h, 90m, 1d12h or seconds, at most "
            f"{LONGEST.days} days. Unset: until it is revoked.",
            examples=["30d"],
        ),
    ] = None

    def lifetime(self) -> timedelta | None:
        if self.expires_in is None:
            return None
        text = str(self.expires_in)
        try:
            return parse_duration(text)
        except OverflowError:  # more days than a timedelta holds
            raise InvalidRequest(
                f"a duration must be more than 0 and at most {LONGEST.days} days"
            ) from None
        except ValueError:  # digits int() does not read, such as "²"
            raise InvalidRequest(
                f"{text!r} is not a duration: write it like 30d, 12h, 90m, 1d12h or 3600 (seconds)"
            ) from None


class TokenOut(BaseModel):
    id: str
    name: str
    role: Role
    status: TokenStatus
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None = Field(
        description="Written at most once a minute, so it may lag the latest use a little."
    )
    revoked_at: datetime | None

    @classmethod
    def of(cls, token: AccessToken, now: datetime) -> TokenOut:
        status: TokenStatus = "revoked" if token.revoked_at else "active"
        if status == "active" and not token.live(now):
            status = "expired"
        return cls(
            id=token.id,
            name=token.name,
            role=token.role,
            status=status,
            created_at=token.created_at,
            expires_at=token.expires_at,
            last_used_at=token.last_used_at,
            revoked_at=token.revoked_at,
        )


class TokenCreated(TokenOut):
    token: str = Field(description="The token itself: shown this once, only its hash is kept.")


@router.post("/v1/tokens", status_code=201)
async def create_token(body: TokenCreate, request: Request, _who: Admin) -> TokenCreated:
    """A new API token. The answer is the only time the token itself is shown."""
    access = access_of(request)
    record, plaintext = await access.create_token(
        name=body.name, role=body.role, expires_in=body.lifetime()
    )
    return TokenCreated(**TokenOut.of(record, access.now()).model_dump(), token=plaintext)


@router.get("/v1/tokens")
async def list_tokens(request: Request, _who: Admin) -> list[TokenOut]:
    """Every token, revoked and expired ones too (never the token or its hash)."""
    access = access_of(request)
    now = access.now()
    return [TokenOut.of(t, now) for t in await access.list_tokens()]


@router.delete("/v1/tokens/{token_id}")
async def revoke_token(token_id: Id, request: Request, _who: Admin) -> TokenOut:
    """Revoke a token and end every UI session signed in with it, at once. Revoking a revoked
    token answers it unchanged."""
    access = access_of(request)
    return TokenOut.of(await access.revoke_token(token_id), access.now())
