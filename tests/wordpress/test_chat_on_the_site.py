"""Chat turns acting on the real WordPress through the whole runtime (SQLite): approvals pause
and resume, spawned runs are denied, undo restores the site."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.config import Settings
from pressloop.contracts import Checkpoint, RunStatus, StepStatus
from pressloop.local_wordpress.local_site import LocalSite
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.schema import action_ledger, runs

Build = Callable[[list[dict[str, Any]]], Any]


@pytest.fixture
async def site_service(wordpress: LocalSite, tmp_path: Path) -> AsyncIterator[Build]:
    services: list[Service] = []

    async def build(script: list[dict[str, Any]]) -> Service:
        provider = ScriptedProvider(script)
        env = wordpress.settings_env()
        settings = Settings(
            data_dir=tmp_path,
            provider="scripted",
            wp_url=env["PRESSLOOP_WP_URL"],
            wp_user=env["PRESSLOOP_WP_USER"],
            wp_app_password=env["PRESSLOOP_WP_APP_PASSWORD"],
        )
        service = await Service.open(settings, provider=lambda: provider)
        services.append(service)
        return service

    yield build
    for service in services:
        await service.close()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def logins(client: WordPressClient) -> set[str]:
    users = await client.get("/wp/v2/users", {"per_page": 100})
    return {u["slug"] for u in users}


async def make_user(client: WordPressClient, login: str) -> None:
    await client.post(
        "/wp/v2/users",
        {"username": login, "email": f"{login}@example.test", "password": "S3cret-pass-123"},
    )


async def test_delete_user_waits_for_approval_then_the_loop_finishes(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    await make_user(wordpress_client, "xavier")
    service: Service = await site_service(
        [
            call("delete_user", login="xavier", reassign="admin"),
            {"text": "Xavier has been deleted; his content went to admin."},
        ]
    )
    thread = await service.create_thread()
    paused = await service.run_now((await service.submit(thread.id, "delete user xavier")).run.id)
    assert paused is not None and paused.status is RunStatus.WAITING_APPROVAL
    assert "xavier" in await logins(wordpress_client)  # nothing happens before approval
    (approval,) = await service.approvals.find(status="pending")
    await service.decide(approval.id, approve=True, by="owner")
    done = await service.run_now(paused.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert "xavier" not in await logins(wordpress_client)
    assert done.result is not None and "deleted" in done.result.assistant_text


async def test_rejected_delete_leaves_the_user_and_tells_the_model(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    await make_user(wordpress_client, "yvonne")
    service: Service = await site_service(
        [
            call("delete_user", login="yvonne", reassign="admin"),
            {"text": "I did not delete Yvonne."},
        ]
    )
    thread = await service.create_thread()
    paused = await service.run_now((await service.submit(thread.id, "delete yvonne")).run.id)
    (approval,) = await service.approvals.find(status="pending")
    await service.decide(approval.id, approve=False, by="owner", note="she is our editor")
    done = await service.run_now(paused.id)  # type: ignore[union-attr]
    assert done is not None and done.result is not None
    assert done.result.steps[-1].status is StepStatus.REJECTED
    assert "yvonne" in await logins(wordpress_client)


async def test_a_spawned_run_is_denied_a_destructive_action(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    await make_user(wordpress_client, "zoe")
    service: Service = await site_service(
        [
            call("delete_user", login="zoe", reassign="admin"),
            {"text": "Not allowed."},
        ]
    )
    root = await service.create_thread()
    spawned = await service.spawn(root.id, "delete zoe")
    run = await service.run_now(spawned.run.id)
    assert run is not None and run.result is not None
    assert run.result.steps[0].status is StepStatus.DENIED
    assert "zoe" in await logins(wordpress_client)


async def test_undo_restores_a_posts_title_and_content(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    post = await wordpress_client.post(
        "/wp/v2/posts", {"title": "Original", "content": "First words", "status": "draft"}
    )
    service: Service = await site_service(
        [
            call("update_post", id=post["id"], title="Changed", content="Other words"),
            {"text": "Updated."},
        ]
    )
    thread = await service.create_thread()
    run = await service.run_now((await service.submit(thread.id, "rewrite it")).run.id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    changed = await wordpress_client.get(f"/wp/v2/posts/{post['id']}")
    assert changed["title"]["raw"] == "Changed"
    (entry,) = await service.ledger(run.id)
    await service.undo(entry.id, by="owner")
    restored = await wordpress_client.get(f"/wp/v2/posts/{post['id']}")
    assert restored["title"]["raw"] == "Original"
    assert "First words" in restored["content"]["raw"]


async def test_site_context_reaches_the_prompt_and_follows_changes(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    service: Service = await site_service(
        [
            {"text": "Hello."},
            call("activate_plugin", plugin="pressloop-test-plugin"),
            {"text": "Activated."},
            {"text": "It is active."},
        ]
    )
    thread = await service.create_thread()
    await service.run_now((await service.submit(thread.id, "hi")).run.id)
    system = service.runner.provider().requests[0].system  # type: ignore[attr-defined]
    site_part = system.split("## SITE_CONTEXT\n", 1)[1]
    assert "Site: " in site_part and "Post types: " in site_part and "post" in site_part
    assert "[pressloop-test-plugin] inactive" in site_part
    assert "(active: twentytwentythree)" in site_part

    await service.run_now((await service.submit(thread.id, "activate the test plugin")).run.id)
    await service.run_now((await service.submit(thread.id, "is it active?")).run.id)
    latest = service.runner.provider().requests[-1].system  # type: ignore[attr-defined]
    assert "[pressloop-test-plugin] active" in latest


async def test_a_create_post_interrupted_before_its_outcome_is_not_repeated(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    service: Service = await site_service(
        [
            call("create_post", title="Once only", content="Exactly one of me."),
            {"text": "Created."},
            {"text": "Created (resumed)."},
        ]
    )
    thread = await service.create_thread()
    run = await service.run_now((await service.submit(thread.id, "write it")).run.id)
    assert run is not None and run.checkpoint is not None

    # Put the run where a worker killed after WordPress created the post, but before the
    # step's outcome and the checkpoint were committed, would leave it.
    async with service.database.write() as conn:
        await conn.execute(
            sa.update(action_ledger)
            .where(action_ledger.c.run_id == run.id)
            .values(status="intent", outcome=None, finished_at=None)
        )
        before = Checkpoint(round=1, messages=run.checkpoint.messages[:2])
        await conn.execute(
            sa.update(runs)
            .where(runs.c.id == run.id)
            .values(status="queued", checkpoint=before.model_dump(mode="json"))
        )
    resumed = await service.run_now(run.id)
    assert resumed is not None and resumed.status is RunStatus.SUCCEEDED
    found = await wordpress_client.get("/wp/v2/posts", {"search": "Once only", "status": "draft"})
    assert len(found) == 1  # reconciled from the site, not created twice
    assert resumed.result is not None
    assert resumed.result.steps[0].status is StepStatus.SUCCEEDED  # found, not "unknown"


async def test_a_wordpress_error_reaches_the_model_the_steps_and_the_events(
    site_service: Build, wordpress_client: WordPressClient
) -> None:
    service: Service = await site_service(
        [call("update_post", id=9999, title="Nope"), {"text": "There is no such post."}]
    )
    thread = await service.create_thread()
    run = await service.run_now((await service.submit(thread.id, "retitle post 9999")).run.id)
    assert run is not None and run.result is not None and run.status is RunStatus.SUCCEEDED
    step = run.result.steps[0]
    assert step.status is StepStatus.FAILED and step.error is not None
    assert "there is no post with id 9999" in step.error
    assert "404 rest_post_invalid_id" in step.error
    results = [e.data for e in await service.events(run.id) if e.type.value == "result"]
    assert "404 rest_post_invalid_id" in results[0]["message"]
    told = service.runner.provider().requests[-1].messages[-1]  # type: ignore[attr-defined]
    assert "404 rest_post_invalid_id" in told.content
