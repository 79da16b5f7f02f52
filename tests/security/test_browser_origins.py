"""In Debian's Chromium: every UI page and `/docs` load only from their own origin, and the
Content-Security-Policy refuses nothing they need (a violation would mean a broken page).

A real uvicorn on 127.0.0.1 (SQLite), driven by Playwright's async API; every request the
browser makes is recorded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, Request, async_playwright, expect

from tests.api.conftest import ApiFactory

CHROMIUM = "/usr/bin/chromium"
HAS_CHROMIUM = Path(CHROMIUM).exists()
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
SCRIPT = [
    {"tool_calls": [{"name": "remember", "arguments": {"content": "The owner likes teal."}}]},
    {"text": "Noted: you like teal."},
    {"text": "Hello from the chat."},
]
# Reported by the page when the CSP blocks something (not a listener: works with every page).
COLLECT_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not HAS_CHROMIUM:
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/ensure-chromium.sh`")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        await launched.close()


class Recorder:
    """Every request and CSP complaint of one page."""

    def __init__(self, page: Page) -> None:
        self.requests: list[str] = []
        self.console: list[str] = []
        page.on("request", self._request)
        page.on("console", self._console)

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console.append(message.text)

    def elsewhere(self, origin: str) -> list[str]:
        return [u for u in self.requests if not u.startswith(origin + "/")]


async def violations(page: Page) -> list[str]:
    found: list[str] = await page.evaluate("window.__violations || []")
    return found


async def test_ui_pages_and_docs_load_only_from_their_origin(
    make_api: ApiFactory, browser: Browser
) -> None:
    api = await make_api(SCRIPT, server=True)
    origin = str(api.client.base_url).rstrip("/")
    thread_id = await api.thread()
    done = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "remember teal"}, headers=api.auth()
    )
    run_id = done.json()["run"]["id"]
    spawned = await api.client.post(
        f"/v1/threads/{thread_id}/spawn", json={"message": "look around"}, headers=api.auth()
    )
    assert spawned.status_code == 201

    context = await browser.new_context()
    await context.add_init_script(COLLECT_VIOLATIONS)
    page = await context.new_page()
    recorder = Recorder(page)

    await page.goto(f"{origin}/ui/login")
    await page.get_by_label("API token").fill(api.tokens["admin"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(f"{origin}/ui/chat")
    pages = [
        f"/ui/chat?thread={thread_id}",
        "/ui/threads",
        f"/ui/threads/{thread_id}",
        "/ui/runs",
        f"/ui/runs/{run_id}",
        "/ui/approvals",
        "/ui/schedules",
        "/ui/usage",
        "/ui/settings",
        "/docs",
    ]
    for path in pages:
        await page.goto(f"{origin}{path}", wait_until="networkidle")
        assert await violations(page) == [], path
    # The scripts ran: Swagger UI drew the API, the run page its timeline.
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Pressloop")
    await expect(page.locator(".opblock").first).to_be_visible()
    await page.goto(f"{origin}/ui/chat?thread={thread_id}", wait_until="networkidle")
    await page.get_by_label("Message to the agent").fill("Hello?")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator(".bubble.agent.final").last).to_have_text("Hello from the chat.")
    assert await violations(page) == []

    assert recorder.elsewhere(origin) == []
    assert [m for m in recorder.console if "Content Security Policy" in m] == []
    assert any(u.endswith("/docs/assets/swagger-ui-bundle.js") for u in recorder.requests)
    await context.close()
