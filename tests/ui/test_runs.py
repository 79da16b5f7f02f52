"""Run pages: the timeline follows a background run live, a dead run is requeued from its page,
and undo from a step restores the site."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.ui.conftest import Server, StartServer, call, screenshot, sign_in


def background_run(server: Server, message: str) -> str:
    thread = server.api.post("/v1/threads", json={"title": message}).json()
    accepted = server.api.post(
        f"/v1/threads/{thread['id']}/runs", json={"message": message, "mode": "background"}
    )
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["run"]["id"])


def test_a_background_runs_timeline_updates_live(page: Page, start_server: StartServer) -> None:
    server = start_server(
        [
            {**call("remember", content="Check the comments daily."), "delay_s": 1.5},
            {"text": "Noted.", "delay_s": 1.5},
        ]
    )
    sign_in(page, server, server.admin_token, then="/ui/runs")
    run_id = background_run(server, "Remember to check the comments")
    page.goto(f"{server.url}/ui/runs/{run_id}")
    page.evaluate("window.sameDocument = true")  # gone if anything reloads the page
    timeline = page.locator("#timeline")
    expect(timeline.locator('li[data-type="run.started"]')).to_have_count(1)
    expect(timeline.locator('li[data-type="run.finished"]')).to_have_count(0)
    expect(page.locator("#live-dot")).to_be_visible()

    expect(timeline.locator('li[data-type="action"]')).to_contain_text("remember")
    expect(timeline.locator('li[data-type="run.finished"]')).to_contain_text("succeeded")
    expect(page.locator('[data-field="status"] .status')).to_have_text("succeeded")
    expect(page.locator("#live-dot")).to_be_hidden()
    expect(page.locator("#steps .step")).to_contain_text("remember")
    assert page.evaluate("window.sameDocument") is True
    seqs = [int(s) for s in timeline.locator("li").evaluate_all("l => l.map(e => e.dataset.seq)")]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1  # each event once, in order
    screenshot(page, "run")


def test_a_dead_run_is_requeued_from_its_page(page: Page, start_server: StartServer) -> None:
    server = start_server(
        [
            {"error": {"status": 503, "message": "the model is overloaded"}},
            {"text": "Back on my feet."},
        ],
        PRESSLOOP_MAX_ATTEMPTS="1",
    )
    run_id = background_run(server, "Say hello")
    dead = server.wait_for_run(run_id, {"dead"})
    assert dead["error"]["retryable"] is False  # dead: no retry comes unless a person requeues

    sign_in(page, server, server.admin_token, then=f"/ui/runs/{run_id}")
    expect(page.locator('[data-field="status"] .status')).to_have_text("dead")
    expect(page.locator('[data-field="error"]')).to_contain_text("overloaded")
    expect(page.get_by_role("button", name="Cancel run")).to_be_hidden()
    page.get_by_role("button", name="Requeue run").click()
    expect(page.locator('[data-field="status"] .status')).to_have_text("succeeded")
    expect(page.locator("#timeline")).to_contain_text("Back on my feet.")
    assert server.wait_for_run(run_id, {"succeeded"})["result"]["assistant_text"] == (
        "Back on my feet."
    )


def test_undo_from_a_runs_step_restores_the_post(page: Page, start_server: StartServer) -> None:
    with start_server([]).wp() as wp:
        post = wp.post(
            "/wp/v2/posts", json={"title": "Original title", "content": "Original words"}
        ).json()
    server = start_server(
        [call("update_post", id=post["id"], title="Changed title"), {"text": "Renamed."}]
    )
    thread = server.api.post("/v1/threads", json={"title": "rename"}).json()
    done = server.api.post(
        f"/v1/threads/{thread['id']}/runs", json={"message": "Rename my post"}
    ).json()
    assert done["run"]["status"] == "succeeded", done
    with server.wp() as wp:
        assert wp.get(f"/wp/v2/posts/{post['id']}").json()["title"]["rendered"] == "Changed title"

    sign_in(page, server, server.admin_token, then=f"/ui/runs/{done['run']['id']}")
    step = page.locator('#steps .step[data-action="update_post"]')
    page.once("dialog", lambda dialog: dialog.accept())
    step.get_by_role("button", name="Undo").click()
    expect(page.locator("#toasts")).to_contain_text("Undone.")
    with server.wp() as wp:
        assert wp.get(f"/wp/v2/posts/{post['id']}").json()["title"]["rendered"] == (
            "Original title"
        )
    page.reload()
    expect(page.locator('#steps .step[data-action="update_post"] .status').last).to_have_text(
        "undone"
    )
    expect(step.get_by_role("button", name="Undo")).to_have_count(0)
