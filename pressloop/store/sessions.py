"""The admin UI's sessions: a random id in the browser's cookie, only its SHA-256 stored here.

A session is live while it is not revoked (signed out), not expired, and its token is live.
"""

from __future__ import annotations

import secrets
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.ids import new_id
from pressloop.store.schema import api_tokens, ui_sessions
from pressloop.store.tokens import AccessToken, hash_token, live_at, token_of


async def open_session(
    conn: AsyncConnection, *, token_id: str, now: datetime, expires_at: datetime
) -> str:
    """A new session for this token; the session id comes back once, only its hash is kept.

    Expired sessions (signed out or not) are dropped on the way.
    """
    await conn.execute(sa.delete(ui_sessions).where(ui_sessions.c.expires_at <= now))
    session_id = secrets.token_urlsafe(32)
    await conn.execute(
        sa.insert(ui_sessions).values(
            id=new_id("ses"),
            session_hash=hash_token(session_id),
            token_id=token_id,
            created_at=now,
            expires_at=expires_at,
        )
    )
    return session_id


async def session_token(
    conn: AsyncConnection, session_id: str, *, now: datetime
) -> AccessToken | None:
    """The live token behind a live session, if this session id is one."""
    row = (
        await conn.execute(
            sa.select(api_tokens)
            .join(ui_sessions, ui_sessions.c.token_id == api_tokens.c.id)
            .where(
                ui_sessions.c.session_hash == hash_token(session_id),
                ui_sessions.c.revoked_at.is_(None),
                ui_sessions.c.expires_at > now,
                live_at(now),
            )
        )
    ).one_or_none()
    return token_of(row) if row else None


async def close_session(conn: AsyncConnection, session_id: str, *, now: datetime) -> None:
    await conn.execute(
        sa.update(ui_sessions)
        .where(
            ui_sessions.c.session_hash == hash_token(session_id),
            ui_sessions.c.revoked_at.is_(None),
        )
        .values(revoked_at=now)
    )
