"""The everyday-task benchmark's smoke set (`bench/tasks/catalog.py`, SMOKE) with the real local
model on the real local WordPress: each task's site is set up, the request runs as a chat turn
through a real `Service`, and the benchmark's judge reads the site back. Each task must pass:
the change asked for is there (or the right approval waits, or the answer holds the facts) and
nothing else changed.

With the forgiving references alone 2 of the 5 passed (publish_draft and
approve_named_comment made up an id, make_admin_needs_approval called create_user); grounded
references in the grammar, worked examples that act by title/name/login and answers from
results made them pass (docs/benchmarks.md, "Everyday tasks")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.tasks.catalog import BY_NAME, SMOKE
from bench.tasks.runner import run_task
from pressloop.local_wordpress.local_site import LocalSite
from pressloop.providers.local import build_local_provider
from pressloop.providers.local.provider import LocalProvider
from tests.local.conftest import MODEL_TEST_TIMEOUT_S, Prepared

TASK_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def task_provider(prepared: Prepared) -> Iterator[LocalProvider]:
    """One model process for the five tasks (a start after `make run`'s prepare)."""
    provider = build_local_provider(prepared.settings)
    yield provider
    provider.close()


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
@pytest.mark.parametrize("name", SMOKE)
async def test_an_everyday_task_is_done_as_asked(
    name: str,
    wordpress: LocalSite,
    prepared: Prepared,
    task_provider: LocalProvider,
    tmp_path: Path,
) -> None:
    result = await run_task(
        BY_NAME[name],
        site=wordpress,
        provider_for=lambda _task, _facts: task_provider,
        base=prepared.settings,
        workdir=tmp_path,
        timeout_s=TASK_TIMEOUT_S,
    )
    assert result.passed, (
        f"{name}: {result.cause} ({result.status}); {result.detail}; "
        f"actions: {result.actions}; wrong effects: {result.unexpected}; "
        f"answer: {result.answer!r}"
    )
