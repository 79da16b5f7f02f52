"""The tokens page in a real browser: an admin sees every token's life, makes one (shown once),
revokes one (refused at once); signing out ends the session on the server."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from tests.ui.conftest import StartServer, browser, page, sign_in, start_server
from tests.wordpress.conftest import wordpress, wordpress_packages, wordpress_session

# The UI's fixtures (a browser, a page, a `pressloop serve` on the test's WordPress).
__all__ = [
    "browser",
    "page",
    "start_server",
    "wordpress",
    "wordpress_packages",
    "wordpress_session",
]


def test_an_admin_makes_and_revokes_tokens_and_signing_out_ends_the_session(
    page: Page, start_server: StartServer
) -> None:
    server = start_server([{"text": "ok"}])
    operator = server.token("operator")
    sign_in(page, server, server.admin_token, then="/ui/settings")
    page.get_by_role("link", name="API tokens").click()
    expect(page).to_have_url(re.compile(r"/ui/tokens$"))
    mine = page.locator("#tokens tr", has_text="you")
    expect(mine).to_contain_text("admin")
    expect(mine.locator("td").nth(5)).not_to_have_text("never")  # last used: just now

    page.get_by_label("Name").fill("deploy bot")
    page.get_by_label("Role").select_option("viewer")
    page.get_by_label("Expires in").fill("30d")
    page.get_by_role("button", name="Create token").click()
    shown = page.locator("#new-token-value")
    expect(shown).to_have_text(re.compile(r"^plt_[\w-]{40,}$"))
    made = shown.text_content() or ""
    page.get_by_role("button", name="Done").click()
    bot = page.locator("#tokens tr", has_text="deploy bot")
    expect(bot.locator(".status")).to_have_text("active")
    expect(bot.locator("td").nth(4)).not_to_have_text("never")  # expires in 30 days
    assert made not in page.content()

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke operator-person").click()
    expect(page.locator("#tokens tr", has_text="operator-person").locator(".status")).to_have_text(
        "revoked"
    )
    with httpx.Client(base_url=server.url, trust_env=False, timeout=20) as client:
        refused = client.get("/v1/threads", headers={"Authorization": f"Bearer {operator}"})
        assert refused.status_code == 401
        made_works = client.get("/v1/threads", headers={"Authorization": f"Bearer {made}"})
        assert made_works.status_code == 200

        session = next(c for c in page.context.cookies() if c["name"] == "pressloop_session")
        assert session["httpOnly"] and session["value"] != server.admin_token
        cookie = {"Cookie": f"pressloop_session={session['value']}"}
        assert client.get("/ui/tokens", headers=cookie).status_code == 200
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(re.compile(r"/ui/login$"))
        assert client.get("/ui/tokens", headers=cookie).status_code == 303
        assert client.get("/v1/threads", headers=cookie).status_code == 401
