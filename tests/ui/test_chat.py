"""Signing in and chatting: the turn appears live; destructive steps wait for the person."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.ui.conftest import HeldScript, Server, StartServer, call, screenshot, sign_in


def test_sign_in_refuses_a_wrong_token_then_chat_shows_the_steps_and_the_answer(
    page: Page, start_server: StartServer
) -> None:
    server = start_server(
        [
            {"text": "Let me look at the posts.", **call("list_posts")},
            {"text": "Your site has one post: Hello world!"},
        ]
    )
    page.goto(f"{server.url}/ui/chat")
    expect(page).to_have_url(re.compile(r"/ui/login\?next=%2Fui%2Fchat"))
    page.get_by_label("API token").fill("plt_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    screenshot(page, "sign-in")

    page.get_by_label("API token").fill(server.admin_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/ui/chat$"))
    page.get_by_label("Message to the agent").fill("What posts do I have?")
    page.get_by_role("button", name="Send").click()

    step = page.locator('.call[data-action="list_posts"]')
    expect(step).to_be_visible()
    expect(step.locator(".status")).to_have_text("succeeded")
    expect(page.locator(".bubble.agent").first).to_have_text("Let me look at the posts.")
    expect(page.locator(".bubble.agent.final")).to_have_text("Your site has one post: Hello world!")
    expect(page.locator(".turn .turn-state .status")).to_have_text("succeeded")
    expect(page).to_have_url(re.compile(r"/ui/chat\?thread=thr_"))
    screenshot(page, "chat")

    # The turn is stored: a reload shows the conversation from the database.
    page.reload()
    expect(page.locator(".bubble.user")).to_have_text(re.compile("What posts do I have?"))
    expect(page.locator(".bubble.agent").last).to_contain_text("one post: Hello world!")
    runs = server.api.get("/v1/runs").json()
    assert [(r["trigger"], r["status"]) for r in runs] == [("chat", "succeeded")]


def test_a_send_before_the_page_script_runs_waits_for_it_and_never_puts_the_message_in_a_url(
    page: Page, start_server: StartServer
) -> None:
    server = start_server([{"text": "Hello from the agent."}])
    sign_in(page, server, server.admin_token)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    script = HeldScript(page, "**/ui/static/chat.js")

    page.goto(f"{server.url}/ui/chat", wait_until="commit")
    box = page.get_by_label("Message to the agent")
    send = page.get_by_role("button", name="Send")
    box.fill("Say hello")
    expect(send).to_be_disabled()
    send.click(force=True)  # a person's click on the button as drawn, script or not
    script.release()

    expect(send).to_be_enabled()
    expect(box).to_have_value("Say hello")  # what was typed is still there
    send.click()
    expect(page.locator(".bubble.agent.final")).to_have_text("Hello from the agent.")
    leaked = [url for url in requested if "message=" in url or "Say+hello" in url]
    assert not leaked, leaked


def ask_to_delete_a_user(page: Page, start_server: StartServer, login: str, answer: str) -> Server:
    """A WordPress user `login`, and a chat that asks the agent to delete it (which it tries)."""
    server = start_server([call("delete_user", login=login, reassign="admin"), {"text": answer}])
    with server.wp() as wp:
        wp.post(
            "/wp/v2/users",
            json={"username": login, "email": f"{login}@example.test", "password": "S3cret-123"},
        ).raise_for_status()
    sign_in(page, server, server.admin_token)
    page.get_by_label("Message to the agent").fill(f"Delete the user {login}")
    page.get_by_role("button", name="Send").click()
    return server


def site_logins(server: Server) -> set[str]:
    with server.wp() as wp:
        return {u["slug"] for u in wp.get("/wp/v2/users").json()}


def test_approving_a_destructive_step_finishes_the_run_and_changes_the_site(
    page: Page, start_server: StartServer
) -> None:
    server = ask_to_delete_a_user(page, start_server, "bob", "Bob's account is gone.")
    card = page.locator("article.approval")
    expect(card).to_contain_text("delete_user needs your approval")
    expect(card).to_contain_text("destructive")
    expect(page.locator(".turn .turn-state .status")).to_have_text("waiting approval")
    assert "bob" in site_logins(server)  # nothing happens before the person decides
    screenshot(page, "chat-approval")

    card.get_by_role("button", name="Approve").click()
    expect(page.locator(".bubble.agent.final")).to_have_text("Bob's account is gone.")
    expect(page.locator(".turn .turn-state .status")).to_have_text("succeeded")
    assert "bob" not in site_logins(server)
    approvals = server.api.get("/v1/approvals").json()
    assert [(a["status"], a["decided_by"]) for a in approvals] == [("approved", "admin")]


def test_rejecting_a_destructive_step_leaves_the_site_unchanged(
    page: Page, start_server: StartServer
) -> None:
    server = ask_to_delete_a_user(page, start_server, "carol", "I left Carol alone.")
    card = page.locator("article.approval")
    card.get_by_label("Note to the agent (optional)").fill("Carol stays.")
    card.get_by_role("button", name="Reject").click()
    expect(page.locator(".bubble.agent.final")).to_have_text("I left Carol alone.")
    assert "carol" in site_logins(server)
    approvals = server.api.get("/v1/approvals").json()
    assert [(a["status"], a["note"]) for a in approvals] == [("rejected", "Carol stays.")]


def test_a_dropped_connection_loses_nothing_when_the_server_crashes_mid_turn(
    page: Page, start_server: StartServer
) -> None:
    server = start_server(
        {
            "per_turn": True,
            "answers": [
                {"text": "Noting it.", **call("remember", content="Blue is the brand colour.")},
                {"text": "Saved, even across a crash.", "delay_s": 3},
            ],
        },
        PRESSLOOP_LEASE_TTL="2",
        PRESSLOOP_LEASE_RENEW="0.5",
    )
    sign_in(page, server, server.admin_token)
    page.get_by_label("Message to the agent").fill("Remember that blue is our colour")
    page.get_by_role("button", name="Send").click()
    expect(page.locator('.call[data-action="remember"] .status')).to_have_text("succeeded")

    # The second model call is in flight: the server dies with the run leased and the browser's
    # stream cut; a new server takes the run over once the lease expires.
    server.crash_and_restart()
    expect(page.locator(".bubble.agent.final")).to_have_text("Saved, even across a crash.")
    expect(page.locator(".turn .turn-state .status")).to_have_text("succeeded")
    expect(page.locator('.call[data-action="remember"]')).to_have_count(1)
    expect(page.locator(".bubble.agent")).to_have_count(2)  # "Noting it." and the answer, once
    runs = server.api.get("/v1/runs").json()
    assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 2)]
    ledger = server.api.get(f"/v1/runs/{runs[0]['id']}/ledger").json()
    assert [e["action"] for e in ledger] == ["remember"]  # the action ran once
