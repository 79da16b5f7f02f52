"""Half-done writes against the real WordPress, over HTTP, on both databases (issue 14, finding 6).

WordPress creates the category, then its answer does not say so: a plugin prints a notice after
the JSON, fails the request with a 500, cuts the body short, or takes longer than the client
waits. Whatever the answer, the step's own check ("found again", by the step's marker) runs at
once: the step ends succeeded with what was made, exactly one category exists, and undo removes
it. A test mu-plugin (written into the site for the test; the next test's restore removes it)
spoils the answer of the marked create only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.errors import SiteError
from pressloop.local_wordpress.local_site import LocalSite
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service

SPOILER = r"""<?php
// Test only: spoil WordPress's answer to a marked POST /wp/v2/categories after the term exists.
add_filter('rest_post_dispatch', function ($response, $server, $request) {
    if ($request->get_method() !== 'POST' || $request->get_route() !== '/wp/v2/categories'
        || !$request->get_header('x_pressloop_call')) {
        return $response;
    }
    switch (%(mode)r) {
        case 'notice':  // a plugin prints after the JSON: 201, a body that is not JSON
            register_shutdown_function(function () {
                echo "\n<br />\n<b>Notice</b>: a plugin printed after the answer";
            });
            return $response;
        case 'error':  // a plugin fails the request after the write
            return new WP_REST_Response(
                ['code' => 'plugin_failed', 'message' => 'A plugin failed after the write.'], 500
            );
        case 'cut':  // the body stops short of what the headers promise
            $response->header('Content-Length', '100000');
            return $response;
        case 'slow':  // the answer comes after the client stopped waiting
            sleep(3);
            return $response;
    }
    return $response;
}, 10, 3);
"""

Build = Callable[[str], Awaitable[tuple[Service, httpx.AsyncClient, dict[str, str]]]]


@pytest.fixture
async def site_api(
    wordpress: LocalSite, database_url: str, database: object, tmp_path: Path
) -> AsyncIterator[Build]:
    """The app over a Service on the local WordPress, with a scripted model and the spoiler."""
    opened: list[tuple[Service, httpx.AsyncClient]] = []

    async def build(mode: str) -> tuple[Service, httpx.AsyncClient, dict[str, str]]:
        plugin = wordpress.docroot / "wp-content" / "mu-plugins" / "pressloop-test-spoiler.php"
        plugin.write_text(SPOILER % {"mode": mode}, encoding="utf-8")
        env = wordpress.settings_env()
        settings = Settings(
            data_dir=tmp_path,
            database_url=database_url,
            provider="scripted",
            wp_url=env["PRESSLOOP_WP_URL"],
            wp_user=env["PRESSLOOP_WP_USER"],
            wp_app_password=env["PRESSLOOP_WP_APP_PASSWORD"],
            wp_timeout_s=1.5,
            wp_retries=0,
        )
        provider = ScriptedProvider(
            [
                {"tool_calls": [{"name": "create_category", "arguments": {"name": "Recipes"}}]},
                {"text": "The Recipes category is there."},
            ]
        )
        service = await Service.open(settings, provider=lambda: provider)
        _record, token = await service.create_token(name="owner", role="operator")
        transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
        client = httpx.AsyncClient(transport=transport, base_url="http://pressloop.test")
        opened.append((service, client))
        return service, client, {"Authorization": f"Bearer {token}"}

    yield build
    for service, client in opened:
        await client.aclose()
        await service.close()


async def categories_named(client: WordPressClient, name: str) -> list[dict[str, Any]]:
    found = await client.get("/wp/v2/categories", {"search": name, "hide_empty": False})
    return [c for c in found if c["name"] == name]


@pytest.mark.parametrize("mode", ["notice", "error", "cut", "slow"])
async def test_a_create_whose_answer_is_spoiled_is_found_again_and_can_be_undone(
    site_api: Build, wordpress_client: WordPressClient, mode: str
) -> None:
    _service, api, auth = await site_api(mode)
    thread = (await api.post("/v1/threads", json={}, headers=auth)).json()
    answered = await api.post(
        f"/v1/threads/{thread['id']}/runs", json={"message": "add a Recipes category"}, headers=auth
    )
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["run"]["status"] == "succeeded", body
    (step,) = body["result"]["steps"]
    assert step["status"] == "succeeded" and "(found again)" in step["result_summary"]
    (made,) = await categories_named(wordpress_client, "Recipes")  # once, not twice

    (row,) = (await api.get(f"/v1/runs/{body['run']['id']}/ledger", headers=auth)).json()
    assert row["fate"] == "ran" and row["outcome"]["data"]["id"] == made["id"]
    undone = await api.post(f"/v1/ledger/{row['id']}/undo", headers=auth)
    assert undone.status_code == 200, undone.text
    with pytest.raises(SiteError, match="404"):
        await wordpress_client.get(f"/wp/v2/categories/{made['id']}")
