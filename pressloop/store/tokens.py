"""API tokens: only a SHA-256 of each token is kept; the token itself is shown once."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.ids import new_id
from pressloop.store.records import TokenRecord
from pressloop.store.schema import api_tokens

ROLES = ("admin", "operator", "viewer")
TOKEN_PREFIX = "plt_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _token(row: sa.Row[Any]) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        name=row.name,
        role=row.role,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


async def create_token(
    conn: AsyncConnection, *, name: str, role: str, now: datetime
) -> tuple[TokenRecord, str]:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = new_id("tok")
    await conn.execute(
        sa.insert(api_tokens).values(
            id=token_id, name=name, role=role, token_hash=hash_token(plaintext), created_at=now
        )
    )
    row = (await conn.execute(sa.select(api_tokens).where(api_tokens.c.id == token_id))).one()
    return _token(row), plaintext


async def verify_token(conn: AsyncConnection, plaintext: str) -> TokenRecord | None:
    row = (
        await conn.execute(
            sa.select(api_tokens).where(
                api_tokens.c.token_hash == hash_token(plaintext), api_tokens.c.revoked_at.is_(None)
            )
        )
    ).one_or_none()
    return _token(row) if row else None


async def list_tokens(conn: AsyncConnection) -> list[TokenRecord]:
    rows = (await conn.execute(sa.select(api_tokens).order_by(api_tokens.c.created_at))).all()
    return [_token(r) for r in rows]
