"""End-to-end UI tests: a real `pressloop serve` (scripted model, real WordPress, SQLite) driven
by Playwright in Debian's Chromium.

Each test starts its own server with its own script, so the scripted model answers that test's
turns from the top. Screenshots of the main pages go to `test-output/ui/` (kept after the run).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from pressloop.local_wordpress.local_site import LocalSite
from tests.support.serve import Serve, serve_env

# The WordPress fixtures (one site per session, restored before each test).
from tests.wordpress.conftest import (  # noqa: F401
    wordpress,
    wordpress_packages,
    wordpress_session,
)

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("PRESSLOOP_TEST_OUTPUT", ROOT / "test-output")) / "ui"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
expect.set_options(timeout=15_000)


def call(name: str, **params: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": params}]}


class Server(Serve):
    """A running `pressloop serve` on the test's WordPress, and what a test needs to talk to it:
    `api` (an HTTP client with the admin token), `token(role)`, `wp()`, `wait_for_run`."""

    api: httpx.Client

    def __init__(self, home: Path, env: dict[str, str], site: LocalSite) -> None:
        super().__init__(home, env)
        self.site = site

    def start(self) -> Self:
        super().start()
        # The first admin token is only in its file (0600), never in the serve log.
        token = self.admin_token
        assert token.startswith("plt_") and token not in self.output(), self.output()
        self.api = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            trust_env=False,
            timeout=20,
        )
        return self

    def token(self, role: str) -> str:
        answer = self.api.post("/v1/tokens", json={"name": f"{role}-person", "role": role})
        answer.raise_for_status()
        return str(answer.json()["token"])

    def wp(self) -> httpx.Client:
        """The WordPress REST API as its admin (to set up and check the site)."""
        return httpx.Client(
            base_url=f"{self.site.url}/wp-json",
            auth=(self.site.admin_user, self.site.app_password),
            trust_env=False,
            timeout=20,
        )

    def wait_for_run(
        self, run_id: str, statuses: set[str], timeout_s: float = 20
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            run: dict[str, Any] = self.api.get(f"/v1/runs/{run_id}").json()
            if run["status"] in statuses or time.monotonic() > deadline:
                assert run["status"] in statuses, (run, self.output())
                return run
            time.sleep(0.1)

    def crash_and_restart(self) -> None:
        """SIGKILL the server mid-work (connections drop, leases are left behind), then start a
        new one on the same port and data directory."""
        self.api.close()
        super().crash_and_restart()

    def stop(self) -> int | None:
        if hasattr(self, "api"):
            self.api.close()
        return super().stop()


StartServer = Callable[..., Server]


@pytest.fixture
def start_server(tmp_path: Path, wordpress: LocalSite) -> Iterator[StartServer]:  # noqa: F811
    """Start `pressloop serve` with a script (and extra settings) on the test's WordPress."""
    servers: list[Server] = []

    def start(script: list[dict[str, Any]] | dict[str, Any], **settings: str) -> Server:
        home = tmp_path / f"server{len(servers)}"
        home.mkdir()
        script_file = home / "script.json"
        script_file.write_text(json.dumps(script), encoding="utf-8")
        env = serve_env(
            home / "data",
            script_file,
            **wordpress.settings_env(),
            PRESSLOOP_WORKER_POLL="0.1",
            PRESSLOOP_SCHEDULER_POLL="0.2",
            PRESSLOOP_EVENT_POLL="0.05",
        )
        env.update(settings)
        server = Server(home, env, wordpress)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


# Module scope: Playwright's sync API runs an event loop in this thread while it is open, and
# the async tests of other folders need the thread's loop free once these modules are done.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def sign_in(page: Page, server: Server, token: str, *, then: str = "/ui/chat") -> None:
    page.goto(f"{server.url}{then}")
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(then.split("?")[0])))


class HeldScript:
    """A page's script held back by a route until `release()`: what a person sees, and what a
    click does, before the script runs (a slow network, a large page)."""

    def __init__(self, page: Page, pattern: str) -> None:
        self._page, self._pattern = page, pattern
        self._held: list[Route] = []
        page.route(pattern, self._hold)

    def _hold(self, route: Route) -> None:
        self._held.append(route)

    def release(self) -> None:
        for _ in range(100):
            if self._held:
                break
            self._page.wait_for_timeout(50)
        assert self._held, f"the page never asked for {self._pattern}"
        self._held[0].continue_()
        self._page.unroute(self._pattern, self._hold)


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
