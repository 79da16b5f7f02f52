"""MCP servers on the settings page (issue 16): an admin adds one (a name and its JSON) and
removes it, through the API with the page's session; a literal secret is refused and shown as
the API's message; a viewer sees the list and no form."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.ui.conftest import StartServer, screenshot, sign_in

SECRET = "sk-live-0123456789"


def test_an_admin_adds_and_removes_an_mcp_server_on_the_settings_page(
    page: Page, start_server: StartServer
) -> None:
    server = start_server([{"text": "Hello."}])
    sign_in(page, server, server.admin_token, then="/ui/settings")
    table = page.locator("#mcp-servers")
    expect(table).to_contain_text("No MCP servers.")
    form = page.locator("#new-mcp-server")

    # A literal secret is refused by the API, and the page says why; nothing is stored.
    form.get_by_label("Name").fill("files")
    form.get_by_label("Server (JSON").fill(
        json.dumps({"command": "npx", "env": {"FS_TOKEN": SECRET}})
    )
    form.get_by_role("button", name="Save server").click()
    expect(page.locator("#toasts")).to_contain_text("secrets are never stored")
    assert server.api.get("/v1/settings/mcp-servers").json()["servers"] == []

    entry = {
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "fs-server"],
        "env": {"FS_TOKEN": "${env:FS_TOKEN}"},
        "tools": {"write_file": "destructive"},
    }
    form.get_by_label("Server (JSON").fill(json.dumps(entry))
    form.get_by_role("button", name="Save server").click()
    row = page.locator('#mcp-servers tr[data-mcp-server="files"]')
    expect(row).to_contain_text("npx -y fs-server")
    expect(row).to_contain_text("settings")
    expect(row).to_contain_text("FS_TOKEN=${env:FS_TOKEN}")
    expect(row).to_contain_text("write_file: destructive")
    expect(row).to_contain_text("not set: FS_TOKEN")  # the server's environment lacks it
    (stored,) = server.api.get("/v1/settings/mcp-servers").json()["servers"]
    assert stored["name"] == "files" and stored["env"] == {"FS_TOKEN": "${env:FS_TOKEN}"}
    screenshot(page, "settings-mcp-servers")

    # A viewer sees the server, and no way to change it.
    viewer = server.token("viewer")
    context = page.context.browser
    assert context is not None
    viewer_page = context.new_page()
    sign_in(viewer_page, server, viewer, then="/ui/settings")
    expect(viewer_page.locator('#mcp-servers tr[data-mcp-server="files"]')).to_be_visible()
    expect(viewer_page.locator("#new-mcp-server")).to_have_count(0)
    expect(viewer_page.get_by_role("button", name="Remove files")).to_have_count(0)
    viewer_page.close()

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Remove files").click()
    expect(page.locator("#mcp-servers")).to_contain_text("No MCP servers.")
    assert server.api.get("/v1/settings/mcp-servers").json()["servers"] == []
