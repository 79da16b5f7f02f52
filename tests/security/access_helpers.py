"""Signing in to the admin UI over HTTP, for the access tests."""

from __future__ import annotations

from urllib.parse import urlencode

from tests.api.conftest import Api

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def sign_in(api: Api, token: str, *, next_path: str = "/ui/chat") -> str:
    """Sign in to the UI with `token`: the session cookie's value (the client keeps none)."""
    response = await api.client.post(
        "/ui/login", content=urlencode({"token": token, "next": next_path}), headers=FORM
    )
    assert response.status_code == 303, response.text
    api.client.cookies.clear()  # each request says itself whether it carries the session
    name, _, value = response.headers["set-cookie"].split(";")[0].partition("=")
    assert name == "pressloop_session" and value
    return value


def ui_cookie(session_id: str) -> dict[str, str]:
    return {"Cookie": f"pressloop_session={session_id}"}
