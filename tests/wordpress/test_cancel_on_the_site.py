"""A run cancelled while WordPress creates its post, on the real site and both databases.

`HoldingProxy` lets WordPress create the post and holds its answer: the write is in flight
when the run is cancelled. The runner cancels the request, reconciles the step from the site
(the step's marker finds the post), records it in the ledger and ends the run `cancelled`; the
post exists once, and the model would be told it was made.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pressloop.actions.wordpress import WordPressClient
from pressloop.config import Settings
from pressloop.contracts import RunStatus, StepStatus
from pressloop.local_wordpress import LocalSite
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store import ledger as ledger_store
from tests.support.holding_proxy import HoldingProxy


@pytest.fixture
async def service(
    database_url: str, database: object, wordpress: LocalSite, proxy: HoldingProxy, tmp_path: Path
) -> AsyncIterator[Service]:
    env = wordpress.settings_env()
    settings = Settings(
        data_dir=tmp_path,
        database_url=database_url,
        provider="scripted",
        wp_url=proxy.url,
        wp_user=env["PRESSLOOP_WP_USER"],
        wp_app_password=env["PRESSLOOP_WP_APP_PASSWORD"],
        wp_retries=0,
    )
    script = [
        {
            "tool_calls": [
                {"name": "create_post", "arguments": {"title": "Cut short", "content": "x"}}
            ]
        }
    ]
    provider = ScriptedProvider(script)
    opened = await Service.open(settings, provider=lambda: provider)
    yield opened
    await opened.close()


async def test_a_post_created_while_the_run_is_cancelled_is_reconciled_not_repeated(
    service: Service, proxy: HoldingProxy, wordpress_client: WordPressClient
) -> None:
    proxy.trap("POST", "/wp/v2/posts")
    thread = await service.create_thread()
    submission = await service.submit(thread.id, "write it", start_here=True)
    assert await asyncio.to_thread(proxy.held.wait, 30)  # WordPress made it; no answer yet

    cancelled = await service.cancel(submission.run.id)
    proxy.release()
    assert cancelled.status is RunStatus.CANCELLED and cancelled.result is not None
    (step,) = cancelled.result.steps
    assert step.action == "create_post" and step.status is StepStatus.SUCCEEDED
    found = await wordpress_client.get("/wp/v2/posts", {"search": "Cut short", "status": "draft"})
    assert len(found) == 1  # made once, found by its marker, never sent again
    async with service.database.read() as conn:
        (entry,) = await ledger_store.list_entries(conn, submission.run.id)
    assert entry.status == "done" and entry.outcome is not None
    assert entry.outcome.status is StepStatus.SUCCEEDED  # undo can remove it
    messages = (await service.thread_detail(thread.id))["messages"]
    told = next(m for m in messages if m.tool_call_id == step.call_id)
    assert "had taken effect" in told.content
