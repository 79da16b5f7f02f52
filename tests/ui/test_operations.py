"""Schedules, settings, the viewer role, and every page on a phone-width screen."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Page, expect

from tests.ui.conftest import HeldScript, StartServer, call, screenshot, sign_in

PAGES = ("chat", "threads", "runs", "approvals", "schedules", "usage", "settings")


def test_a_schedule_created_in_the_ui_produces_a_heartbeat_run(
    page: Page, start_server: StartServer
) -> None:
    server = start_server({"cycle": True, "answers": [{"text": "HEARTBEAT_OK"}]})
    sign_in(page, server, server.admin_token, then="/ui/schedules")
    form = page.locator("#new-schedule")
    form.get_by_label("Interval", exact=True).fill("2")
    form.get_by_label("Unit").select_option(label="seconds")
    form.get_by_label("Prompt (optional, else HEARTBEAT.md)").fill("Look after the site.")
    form.get_by_role("button", name="Create schedule").click()
    row = page.locator("#schedules tr[data-schedule-id]")
    expect(row).to_contain_text("every 2 s")
    expect(row.locator(".status").first).to_have_text("active")

    deadline = time.monotonic() + 20
    beats: list[dict[str, object]] = []
    while not beats and time.monotonic() < deadline:
        beats = [
            r
            for r in server.api.get("/v1/runs").json()
            if r["trigger"] == "heartbeat" and r["status"] == "succeeded"
        ]
        time.sleep(0.2)
    assert beats, server.log.read_text()
    page.reload()
    expect(row.locator(".beats li").first.locator(".status")).to_have_text("succeeded")
    screenshot(page, "schedules")

    row.get_by_role("button", name="Pause").click()
    expect(row.locator(".status").first).to_have_text("paused")
    assert [s["status"] for s in server.api.get("/v1/schedules").json()] == ["paused"]


def test_settings_turn_the_agent_off_and_change_a_triggers_policy(
    page: Page, start_server: StartServer
) -> None:
    server = start_server([{"text": "Hello."}])
    sign_in(page, server, server.admin_token, then="/ui/settings")
    # Before settings.js listens, the kill switch shows it is not ready, and a click on it as
    # drawn changes nothing (it once did nothing and said nothing: a person's control).
    script = HeldScript(page, "**/ui/static/settings.js")
    page.reload(wait_until="commit")
    kill = page.get_by_role("button", name="Turn the agent off")
    expect(kill).to_be_disabled()
    kill.click(force=True)
    script.release()
    expect(kill).to_be_enabled()
    assert server.api.get("/v1/settings").json()["agent_disabled"] is False
    page.once("dialog", lambda dialog: dialog.accept())
    kill.click()
    expect(page.locator("#kill-state")).to_contain_text("off")
    thread = server.api.post("/v1/threads", json={}).json()
    refused = server.api.post(f"/v1/threads/{thread['id']}/runs", json={"message": "hi"})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "agent_disabled"
    assert server.api.get(f"/v1/runs?thread_id={thread['id']}").json() == []
    page.get_by_role("button", name="Turn the agent on").click()
    expect(page.locator("#kill-state")).to_contain_text("on")

    page.get_by_label("heartbeat write actions").select_option("confirm")
    page.get_by_label("chat max rounds").fill("5")
    page.get_by_role("button", name="Save policies").click()
    expect(page.locator("#toasts")).to_contain_text("Policies saved")
    policies = server.api.get("/v1/settings").json()["policies"]
    assert policies["heartbeat"]["changes"] == {"write": "confirm"}
    assert policies["chat"]["changes"] == {"max_rounds": 5}
    assert policies["api"]["changes"] == {}
    page.reload()
    expect(page.get_by_label("chat max rounds")).to_have_value("5")
    screenshot(page, "settings")


def test_a_viewer_sees_no_action_buttons_and_the_api_refuses_anyway(
    page: Page, start_server: StartServer
) -> None:
    server = start_server(
        [
            call("delete_user", login="admin", reassign="admin"),
            {"error": {"status": 400, "message": "bad request"}},
        ]
    )
    thread = server.api.post("/v1/threads", json={"title": "waiting"}).json()
    run = server.api.post(
        f"/v1/threads/{thread['id']}/runs", json={"message": "delete admin", "mode": "background"}
    ).json()["run"]
    server.wait_for_run(run["id"], {"waiting_approval"})
    approval = server.api.get("/v1/approvals").json()[0]
    viewer = server.token("viewer")

    sign_in(page, server, viewer, then="/ui/approvals")
    card = page.locator(f"#approval-{approval['id']}")
    expect(card).to_contain_text("delete_user")
    expect(card.get_by_role("button")).to_have_count(0)
    page.goto(f"{server.url}/ui/runs/{run['id']}")
    expect(page.locator('[data-field="status"] .status')).to_have_text("waiting approval")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    page.goto(f"{server.url}/ui/chat?thread={thread['id']}")
    expect(page.get_by_label("Message to the agent")).to_have_count(0)
    expect(page.locator("article.approval")).to_contain_text("delete_user")
    expect(page.locator("article.approval").get_by_role("button")).to_have_count(0)
    page.goto(f"{server.url}/ui/settings")
    expect(page.get_by_role("button", name="Turn the agent off")).to_have_count(0)
    expect(page.get_by_label("chat max rounds")).to_be_disabled()

    # The page's own session cannot act either: the API checks the role, not the buttons.
    status = page.evaluate(
        """async (id) => (await fetch(`/v1/approvals/${id}/approve`, {method: "POST",
            headers: {"X-Pressloop-UI": "1", "Content-Type": "application/json"},
            body: "{}"})).status""",
        approval["id"],
    )
    assert status == 403
    with httpx.Client(base_url=server.url, trust_env=False) as client:
        bearer = {"Authorization": f"Bearer {viewer}"}
        assert client.post(f"/v1/runs/{run['id']}/cancel", headers=bearer).status_code == 403
        assert (
            client.patch("/v1/settings", json={"agent_disabled": True}, headers=bearer).status_code
            == 403
        )
        # A signed-in cookie without the UI header is refused before the role is even looked at.
        cookie = {"Cookie": f"pressloop_session={server.admin_token}"}
        assert client.post(f"/v1/runs/{run['id']}/cancel", headers=cookie).status_code == 403
    assert server.api.get(f"/v1/approvals/{approval['id']}").json()["status"] == "pending"


def test_every_page_fits_a_phone_and_labels_every_control(
    browser: object, start_server: StartServer
) -> None:
    server = start_server({"cycle": True, "answers": [{"text": "Hello from Pressloop."}]})
    thread = server.api.post("/v1/threads", json={"title": "A first talk"}).json()
    server.api.post(f"/v1/threads/{thread['id']}/runs", json={"message": "Hi"})
    child = server.api.post(
        f"/v1/threads/{thread['id']}/spawn",
        json={"message": "Check the plugins", "title": "Helper"},
    ).json()
    server.wait_for_run(child["run"]["id"], {"succeeded"})
    context = browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[attr-defined]
    phone = context.new_page()
    sign_in(phone, server, server.admin_token, then="/ui/chat")
    for name in PAGES:
        phone.goto(f"{server.url}/ui/{name}")
        expect(phone.locator("main h1")).to_be_visible()
        overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"/ui/{name} is {overflow}px wider than a phone"
        unlabelled = phone.evaluate(
            """[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
               .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
               .map(e => e.name || e.id)"""
        )
        assert unlabelled == [], f"/ui/{name} has controls without a label: {unlabelled}"
        screenshot(phone, f"phone-{name}")
    phone.set_viewport_size({"width": 1280, "height": 900})
    for name in ("threads", "runs", "usage", "approvals"):
        phone.goto(f"{server.url}/ui/{name}")
        screenshot(phone, name)
    # Usage: today's bar carries the tokens the two runs used.
    phone.goto(f"{server.url}/ui/usage")
    used = sum(
        r["input_tokens"] + r["output_tokens"]
        for r in server.api.get("/v1/usage?scope=site").json()
    )
    assert used > 0
    expect(phone.locator("figure.chart").first.locator("rect title").last).to_have_text(
        re.compile(rf": {used}$")
    )
    # A thread shows the tree of agents it spawned, with their runs' states.
    phone.goto(f"{server.url}/ui/threads/{thread['id']}")
    expect(phone.locator(".tree li")).to_contain_text("Helper")
    expect(phone.locator(".tree li .status").last).to_have_text("succeeded")
    screenshot(phone, "thread")
    context.close()


def test_a_button_that_posts_is_disabled_until_the_page_script_listens_then_works(
    page: Page, start_server: StartServer
) -> None:
    server = start_server([{"text": "ok"}])
    server.token("operator")
    sign_in(page, server, server.admin_token, then="/ui/tokens")
    deletes: list[str] = []
    page.on("request", lambda r: deletes.append(r.url) if r.method == "DELETE" else None)
    script = HeldScript(page, "**/ui/static/app.js")  # it listens for such buttons
    page.reload(wait_until="commit")
    revoke = page.get_by_role("button", name="Revoke operator-person")
    expect(revoke).to_be_disabled()
    revoke.click(force=True)  # a person's click on the button as drawn
    script.release()

    expect(revoke).to_be_enabled()
    assert not deletes
    statuses = {t["name"]: t["status"] for t in server.api.get("/v1/tokens").json()}
    assert statuses["operator-person"] == "active"
    page.once("dialog", lambda dialog: dialog.accept())
    revoke.click()
    expect(page.locator("tr", has_text="operator-person").locator(".status")).to_have_text(
        "revoked"
    )
    statuses = {t["name"]: t["status"] for t in server.api.get("/v1/tokens").json()}
    assert statuses["operator-person"] == "revoked"
