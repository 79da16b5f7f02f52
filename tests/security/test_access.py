"""Access that ends, over HTTP (SQLite and PostgreSQL): revoked and expired tokens, signed-out
and expired UI sessions are refused by the very next request; failed sign-ins are throttled."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa

from pressloop.store.schema import ui_sessions
from tests.api.conftest import Api, ApiFactory
from tests.conftest import FakeClock
from tests.security.access_helpers import FORM, sign_in, ui_cookie


async def new_token(api: Api, role: str = "operator", **extra: Any) -> dict[str, Any]:
    created = await api.client.post(
        "/v1/tokens", json={"name": f"{role}-new", "role": role, **extra}, headers=api.auth("admin")
    )
    assert created.status_code == 201, created.text
    token: dict[str, Any] = created.json()
    return token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def listed(api: Api, token_id: str) -> dict[str, Any]:
    tokens = (await api.client.get("/v1/tokens", headers=api.auth("admin"))).json()
    found: dict[str, Any] = next(t for t in tokens if t["id"] == token_id)
    return found


async def test_a_revoked_token_is_refused_at_once_with_its_ui_sessions(
    make_api: ApiFactory,
) -> None:
    api = await make_api()
    token = await new_token(api)
    session = await sign_in(api, token["token"])
    assert (await api.client.get("/v1/threads", headers=bearer(token["token"]))).status_code == 200
    assert (await api.client.get("/ui/threads", headers=ui_cookie(session))).status_code == 200
    assert (await api.client.get("/v1/threads", headers=ui_cookie(session))).status_code == 200

    # Only admins revoke; an unknown id is 404.
    url = f"/v1/tokens/{token['id']}"
    assert (await api.client.delete(url, headers=api.auth("operator"))).status_code == 403
    missing = await api.client.delete("/v1/tokens/tok_nope", headers=api.auth("admin"))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    revoked = await api.client.delete(url, headers=api.auth("admin"))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["status"] == "revoked" and revoked.json()["revoked_at"]

    refused = await api.client.get("/v1/threads", headers=bearer(token["token"]))
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]
    page = await api.client.get("/ui/threads", headers=ui_cookie(session))
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
    assert (await api.client.get("/v1/threads", headers=ui_cookie(session))).status_code == 401
    again = await api.client.post(
        "/ui/login", content=urlencode({"token": token["token"]}), headers=FORM
    )
    assert again.status_code == 401 and "set-cookie" not in again.headers

    # Revoking again changes nothing (same answer, same time); the others still work.
    twice = await api.client.delete(url, headers=api.auth("admin"))
    assert twice.status_code == 200 and twice.json() == revoked.json()
    assert (await listed(api, token["id"]))["status"] == "revoked"
    assert (await api.client.get("/v1/threads", headers=api.auth("viewer"))).status_code == 200


async def test_the_cookie_holds_a_session_id_that_signing_out_ends(make_api: ApiFactory) -> None:
    api = await make_api()
    token = api.tokens["admin"]
    session = await sign_in(api, token)
    assert token not in session and session != token
    # The database keeps only the session id's hash.
    async with api.service.database.read() as conn:
        rows = (await conn.execute(sa.select(ui_sessions))).all()
    assert [r.session_hash for r in rows] == [hashlib.sha256(session.encode()).hexdigest()]
    assert all(session not in str(tuple(r)) for r in rows)
    # The raw API token is no session: a cookie holding it (the old scheme) is refused.
    assert (await api.client.get("/v1/threads", headers=ui_cookie(token))).status_code == 401

    out = await api.client.post("/ui/logout", headers=ui_cookie(session))
    assert out.status_code == 303 and 'pressloop_session=""' in out.headers["set-cookie"]
    page = await api.client.get("/ui/chat", headers=ui_cookie(session))
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
    ended = await api.client.get("/v1/threads", headers=ui_cookie(session))
    assert ended.status_code == 401 and "session has ended" in ended.json()["error"]["message"]
    # The token itself is untouched, and signs in again with a new session.
    assert (await api.client.get("/v1/threads", headers=bearer(token))).status_code == 200
    assert await sign_in(api, token) != session


async def test_expired_tokens_and_sessions_are_refused(
    make_api: ApiFactory, clock: FakeClock
) -> None:
    api = await make_api(ui_session_lifetime_s=1800)
    hour = await new_token(api, expires_in="1h")
    assert hour["status"] == "active"
    assert (hour["expires_at"], hour["created_at"]) == (
        "2026-01-05T13:00:00Z",
        "2026-01-05T12:00:00Z",
    )
    short_session = await sign_in(api, hour["token"])
    long_lived = api.tokens["operator"]
    long_session = await sign_in(api, long_lived)

    # Half an hour on: every session has reached its lifetime; the tokens still work.
    clock.advance(1800)
    for session in (short_session, long_session):
        assert (await api.client.get("/ui/chat", headers=ui_cookie(session))).status_code == 303
    assert (await api.client.get("/v1/threads", headers=bearer(hour["token"]))).status_code == 200
    short_session = await sign_in(api, hour["token"])  # capped at the token's expiry (13:00)

    clock.advance(1799)
    assert (await api.client.get("/v1/threads", headers=bearer(hour["token"]))).status_code == 200
    clock.advance(1)  # 13:00: the token's end
    expired = await api.client.get("/v1/threads", headers=bearer(hour["token"]))
    assert expired.status_code == 401 and "expired" in expired.json()["error"]["message"]
    assert (await api.client.get("/ui/chat", headers=ui_cookie(short_session))).status_code == 303
    refused = await api.client.post(
        "/ui/login", content=urlencode({"token": hour["token"]}), headers=FORM
    )
    assert refused.status_code == 401
    assert (await listed(api, hour["id"]))["status"] == "expired"
    assert (await api.client.get("/v1/threads", headers=bearer(long_lived))).status_code == 200

    bad = await api.client.post(
        "/v1/tokens",
        json={"name": "x", "role": "viewer", "expires_in": "soon"},
        headers=api.auth("admin"),
    )
    assert bad.status_code == 422 and "30d" in bad.json()["error"]["message"]


async def test_last_used_is_written_at_most_once_a_minute(
    make_api: ApiFactory, clock: FakeClock
) -> None:
    api = await make_api()
    token = await new_token(api, "viewer")
    assert token["last_used_at"] is None
    for _ in range(3):
        assert (await api.client.get("/v1/runs", headers=bearer(token["token"]))).status_code == 200
    assert (await listed(api, token["id"]))["last_used_at"] == "2026-01-05T12:00:00Z"
    clock.advance(59)
    await api.client.get("/v1/runs", headers=bearer(token["token"]))
    assert (await listed(api, token["id"]))["last_used_at"] == "2026-01-05T12:00:00Z"
    clock.advance(1)
    session = await sign_in(api, token["token"])
    clock.advance(90)
    assert (await api.client.get("/ui/runs", headers=ui_cookie(session))).status_code == 200
    assert (await listed(api, token["id"]))["last_used_at"] == "2026-01-05T12:02:30Z"


async def test_failed_sign_ins_are_throttled_per_address(
    make_api: ApiFactory, clock: FakeClock
) -> None:
    api = await make_api()
    wrong = urlencode({"token": "plt_guess"})
    for _ in range(10):
        failed = await api.client.post("/ui/login", content=wrong, headers=FORM)
        assert failed.status_code == 401
        clock.advance(1)
    limited = await api.client.post("/ui/login", content=wrong, headers=FORM)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "50"
    assert "Too many failed sign-ins" in limited.text
    # Even the right token waits: nothing is checked while the address is throttled.
    right = urlencode({"token": api.tokens["admin"]})
    assert (await api.client.post("/ui/login", content=right, headers=FORM)).status_code == 429
    clock.advance(50)  # the first failure leaves the one-minute window
    assert (await api.client.post("/ui/login", content=right, headers=FORM)).status_code == 303
