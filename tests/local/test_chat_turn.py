"""One full chat turn with the real local model on the real local WordPress: the runtime, the
JSON decision protocol with the grammar, the WordPress pack, the action result fed back. The
model starts fresh in the data directory `prepare` made, as after `make run`: its first answer
restores the system prompt's state that `prepare` saved for the default catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.contracts import RunStatus, StepStatus
from pressloop.local_wordpress.local_site import LocalSite
from pressloop.providers.local import build_local_provider
from pressloop.runtime.service import Service
from tests.local.conftest import MODEL_TEST_TIMEOUT_S, Prepared

TITLE = "Hello from Pressloop"


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_a_chat_turn_creates_the_draft_on_the_site(
    wordpress: LocalSite,
    wordpress_client: WordPressClient,
    prepared: Prepared,
    tmp_path: Path,
) -> None:
    env = wordpress.settings_env()
    settings = prepared.settings.model_copy(
        update={
            "data_dir": tmp_path,
            "wp_url": env["PRESSLOOP_WP_URL"],
            "wp_user": env["PRESSLOOP_WP_USER"],
            "wp_app_password": env["PRESSLOOP_WP_APP_PASSWORD"],
        }
    )
    provider = build_local_provider(prepared.settings)  # a start after `make run`'s prepare
    service = await Service.open(settings, provider=lambda: provider)
    try:
        thread = await service.create_thread()
        queued = await service.submit(thread.id, f"Create a draft post titled {TITLE}")
        run = await service.run_now(queued.run.id)
    finally:
        await service.close()
        provider.close()

    # The service's first request started with exactly the prefix `prepare` saved.
    assert provider.prefix_restored == 1, provider.prefix_refused

    assert run is not None and run.result is not None, run
    result = run.result
    assert run.status is RunStatus.SUCCEEDED, result
    assert result.provider == "local"
    created = [s for s in result.steps if s.action == "create_post"]
    assert created and created[0].status is StepStatus.SUCCEEDED, result.steps
    drafts = await wordpress_client.get(
        "/wp/v2/posts", {"status": "draft", "search": TITLE, "context": "edit"}
    )
    assert [d["title"]["raw"] for d in drafts][:1] == [TITLE], drafts
    assert result.assistant_text.strip()
