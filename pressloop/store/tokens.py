"""API tokens: only a SHA-256 of each token is kept; the token itself is shown once.

A token is live until it is revoked or its `expires_at` passes. `last_used_at` is written at
most once per `touch_interval` per token, so using a token does not cost a write per request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.ids import new_id
from pressloop.store.records import TokenRecord
from pressloop.store.schema import api_tokens, ui_sessions

ROLES = ("admin", "operator", "viewer")
TOKEN_PREFIX = "plt_"


@dataclass(kw_only=True)
class AccessToken(TokenRecord):
    """A token with its whole life: when it expires and when it was last used."""

    expires_at: datetime | None = None
    last_used_at: datetime | None = None

    def live(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def live_at(now: datetime | sa.BindParameter[datetime]) -> sa.ColumnElement[bool]:
    """The condition a token row meets while it may be used."""
    return sa.and_(
        api_tokens.c.revoked_at.is_(None),
        sa.or_(api_tokens.c.expires_at.is_(None), api_tokens.c.expires_at > now),
    )


# Every API request looks its token up: the statement is built once (building it anew was half
# the lookup's CPU in a profile under 200 streams), its values bound per request.
_VERIFY = sa.select(api_tokens).where(
    api_tokens.c.token_hash == sa.bindparam("b_hash"),
    live_at(sa.bindparam("b_now", type_=api_tokens.c.expires_at.type)),
)


def token_of(row: sa.Row[Any]) -> AccessToken:
    return AccessToken(
        id=row.id,
        name=row.name,
        role=row.role,
        created_at=row.created_at,
        expires_at=row.expires_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


async def get_token(conn: AsyncConnection, token_id: str) -> AccessToken | None:
    row = (
        await conn.execute(sa.select(api_tokens).where(api_tokens.c.id == token_id))
    ).one_or_none()
    return token_of(row) if row else None


async def create_token(
    conn: AsyncConnection,
    *,
    name: str,
    role: str,
    now: datetime,
    expires_at: datetime | None = None,
) -> tuple[AccessToken, str]:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = new_id("tok")
    await conn.execute(
        sa.insert(api_tokens).values(
            id=token_id,
            name=name,
            role=role,
            token_hash=hash_token(plaintext),
            created_at=now,
            expires_at=expires_at,
        )
    )
    created = await get_token(conn, token_id)
    assert created is not None
    return created, plaintext


async def verify_token(
    conn: AsyncConnection, plaintext: str, *, now: datetime | None = None
) -> AccessToken | None:
    """The live token (not revoked, not expired at `now`) for this plaintext, if any."""
    moment = now or datetime.now(UTC)
    params = {"b_hash": hash_token(plaintext), "b_now": moment}
    row = (await conn.execute(_VERIFY, params)).one_or_none()
    return token_of(row) if row else None


async def list_tokens(conn: AsyncConnection) -> list[TokenRecord]:
    return [*await all_tokens(conn)]


async def all_tokens(conn: AsyncConnection) -> list[AccessToken]:
    rows = (await conn.execute(sa.select(api_tokens).order_by(api_tokens.c.created_at))).all()
    return [token_of(r) for r in rows]


async def touch_token(
    conn: AsyncConnection, token_id: str, *, now: datetime, interval: timedelta
) -> None:
    """Record a use, unless one was recorded less than `interval` ago (by any process)."""
    await conn.execute(
        sa.update(api_tokens)
        .where(
            api_tokens.c.id == token_id,
            sa.or_(
                api_tokens.c.last_used_at.is_(None), api_tokens.c.last_used_at <= now - interval
            ),
        )
        .values(last_used_at=now)
    )


async def revoke_token(
    conn: AsyncConnection, token_id: str, *, now: datetime
) -> AccessToken | None:
    """Revoke a token and every UI session signed in with it; revoking twice changes nothing."""
    await conn.execute(
        sa.update(api_tokens)
        .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    await conn.execute(
        sa.update(ui_sessions)
        .where(ui_sessions.c.token_id == token_id, ui_sessions.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return await get_token(conn, token_id)
