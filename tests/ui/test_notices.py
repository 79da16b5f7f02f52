"""Pressloop's own words in the chat (issue 14, findings 4 and 11): a failed run's notice and a
parked run's statement show live, as Pressloop's, and stay in the thread."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.ui.conftest import StartServer, call, sign_in


def test_a_dead_run_is_explained_in_the_chat(page: Page, start_server: StartServer) -> None:
    server = start_server(
        [{"error": {"status": 503, "message": "the model is overloaded"}}],
        PRESSLOOP_MAX_ATTEMPTS="1",
    )
    sign_in(page, server, server.admin_token)
    page.get_by_label("Message to the agent").fill("Say hello")
    page.get_by_role("button", name="Send").click()

    notice = (
        "The model provider did not answer (HTTP 503) after 1 attempt; check the provider, "
        "then requeue this run."
    )
    expect(page.locator(".turn .bubble.pressloop")).to_contain_text(notice)
    expect(page.locator(".turn .turn-state .status")).to_have_text("dead")
    page.reload()  # stored in the thread
    expect(page.locator(".bubble.pressloop")).to_contain_text(notice)


def test_a_parked_run_says_what_waits_not_what_the_model_claimed(
    page: Page, start_server: StartServer
) -> None:
    server = start_server(
        [{"text": "Deleting user Bob.", **call("delete_user", login="bob", reassign="admin")}]
    )
    sign_in(page, server, server.admin_token)
    page.get_by_label("Message to the agent").fill("Delete the user bob")
    page.get_by_role("button", name="Send").click()

    statement = page.locator(".turn .bubble.pressloop")
    expect(statement).to_contain_text("delete_user")
    expect(statement).to_contain_text("needs your approval before it runs")
    expect(page.locator(".turn .turn-state .status")).to_have_text("waiting approval")
