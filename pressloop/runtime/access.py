"""Access that ends: API tokens (created, listed, revoked, expiring) and the UI's sessions.

Every check reads the database, so a revoked or expired token, a signed-out session, or a
session whose token was revoked is refused by the very next request, in every process.
Secrets (tokens, session ids) only pass through here; the store keeps their hashes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from pressloop.clock import Now
from pressloop.config import Settings
from pressloop.errors import InvalidRequest, NotFound
from pressloop.store import sessions as session_store
from pressloop.store import tokens as token_store
from pressloop.store.db import Database
from pressloop.store.tokens import AccessToken

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DURATION = re.compile(r"(\d+)([smhdw])")
LONGEST = timedelta(days=3660)


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `1d12h`, `90m`, `3600s` or a plain number of seconds: a positive span."""
    value = text.strip().lower()
    if value.isdigit():
        seconds = int(value)
    elif value and DURATION.sub("", value) == "":
        seconds = sum(int(n) * UNIT_SECONDS[unit] for n, unit in DURATION.findall(value))
    else:
        raise InvalidRequest(
            f"{text!r} is not a duration: write it like 30d, 12h, 90m, 1d12h or 3600 (seconds)"
        )
    span = timedelta(seconds=seconds)
    if not timedelta(0) < span <= LONGEST:
        raise InvalidRequest(f"a duration must be more than 0 and at most {LONGEST.days} days")
    return span


@dataclass(kw_only=True)
class Session:
    """A UI sign-in: the id goes into the browser's cookie (and nowhere else)."""

    id: str
    token: AccessToken
    expires_at: datetime


class Access:
    def __init__(self, *, database: Database, settings: Settings, now: Now) -> None:
        self.database = database
        self.now = now
        self.touch_interval = timedelta(seconds=settings.token_touch_interval_s)
        self.session_lifetime = timedelta(seconds=settings.ui_session_lifetime_s)

    # Tokens -------------------------------------------------------------------------------

    async def create_token(
        self, *, name: str, role: str, expires_in: timedelta | None = None
    ) -> tuple[AccessToken, str]:
        """A new token; the plaintext comes back once, only its hash is stored."""
        if role not in token_store.ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(token_store.ROLES)}")
        now = self.now()
        expires_at = now + expires_in if expires_in is not None else None
        async with self.database.write() as conn:
            return await token_store.create_token(
                conn, name=name, role=role, now=now, expires_at=expires_at
            )

    async def list_tokens(self) -> list[AccessToken]:
        async with self.database.read() as conn:
            return await token_store.all_tokens(conn)

    async def revoke_token(self, token_id: str) -> AccessToken:
        """Revoke a token (and its UI sessions); revoking a revoked token changes nothing."""
        async with self.database.write() as conn:
            token = await token_store.revoke_token(conn, token_id, now=self.now())
        if token is None:
            raise NotFound(f"token {token_id!r} does not exist")
        return token

    async def authenticate(self, plaintext: str) -> AccessToken | None:
        """The live token for this plaintext token, if any (its use is recorded)."""
        now = self.now()
        async with self.database.read() as conn:
            token = await token_store.verify_token(conn, plaintext, now=now)
        if token is not None:
            await self._used(token, now)
        return token

    async def _used(self, token: AccessToken, now: datetime) -> None:
        """Write the last use only when the stored one is older than the interval (the check
        is repeated in the UPDATE, so concurrent requests write it once)."""
        if token.last_used_at is not None and now - token.last_used_at < self.touch_interval:
            return
        async with self.database.write() as conn:
            await token_store.touch_token(conn, token.id, now=now, interval=self.touch_interval)

    # UI sessions ----------------------------------------------------------------------------

    async def open_session(self, token: AccessToken) -> Session:
        """Sign in with a live token: a session that ends at the latest with the token."""
        now = self.now()
        expires_at = now + self.session_lifetime
        if token.expires_at is not None:
            expires_at = min(expires_at, token.expires_at)
        async with self.database.write() as conn:
            session_id = await session_store.open_session(
                conn, token_id=token.id, now=now, expires_at=expires_at
            )
        return Session(id=session_id, token=token, expires_at=expires_at)

    async def session_token(self, session_id: str) -> AccessToken | None:
        """The live token behind a live session (its use is recorded), if any."""
        now = self.now()
        async with self.database.read() as conn:
            token = await session_store.session_token(conn, session_id, now=now)
        if token is not None:
            await self._used(token, now)
        return token

    async def close_session(self, session_id: str) -> None:
        """Sign out: this session id is refused from now on."""
        async with self.database.write() as conn:
            await session_store.close_session(conn, session_id, now=self.now())
