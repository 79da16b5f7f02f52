"""A real worker process killed between a WordPress call and its ledger commit, on the real site.

`python -m pressloop.runtime.process` (what `pressloop worker` runs) talks to the local
WordPress through `HoldingProxy`, which holds WordPress's answer to the step's create or update
until the test has locked the run's database rows; then the answer is delivered, the worker's
REST call returns, and its next write (the step's outcome) waits on the lock. The test kills it
there with SIGKILL: the site has changed, the ledger has the step's intent and no outcome.
A second worker (started while the first held the run) reclaims it once the lease expires,
reconciles the step from the site (by the step's marker for a create, by the post's fields for
an update) and finishes the turn. The site shows the change exactly once. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa

from pressloop.actions.wordpress import WordPressClient
from pressloop.config import Settings
from pressloop.contracts import FINAL_RUN_STATUSES, RunStatus, StepStatus
from pressloop.local_wordpress import LocalSite
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.schema import action_ledger
from tests.support.holding_proxy import HoldingProxy
from tests.support.locks import sqlite_write_lock
from tests.support.processes import Workers, wait_for


@pytest.fixture
async def setup(
    database_url: str, database: object, wordpress: LocalSite, tmp_path: Path
) -> AsyncIterator[tuple[Service, Workers]]:
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    workers = Workers(database_url, tmp_path, wordpress.settings_env())
    try:
        yield service, workers
    finally:
        workers.stop_all()
        await service.close()


@asynccontextmanager
async def writes_blocked(database_url: str, run_id: str) -> AsyncIterator[None]:
    """Hold the lock every write of the run needs: SQLite's write lock, or the run's row on
    PostgreSQL (each of the runner's writes first fences on that row)."""
    if database_url.startswith("sqlite"):
        with sqlite_write_lock(database_url):
            yield
        return
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    transaction = conn.transaction()
    await transaction.start()
    await conn.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", run_id)
    try:
        yield
    finally:
        await transaction.rollback()
        await conn.close()


async def crash_and_resume(
    service: Service, workers: Workers, proxy: HoldingProxy, run_id: str, call: dict[str, Any]
) -> Any:
    """Run the step in worker "a" through the proxy, SIGKILL it once the call has returned,
    and let worker "b" (started meanwhile, so it is ready) take the run over and finish it."""
    through_proxy = {"PRESSLOOP_WP_URL": proxy.url}
    first = workers.start([{"tool_calls": [call]}], concurrency=2, name="a", env=through_proxy)
    assert await asyncio.to_thread(proxy.held.wait, 60), "WordPress never got the call"
    workers.start([{"text": "Done, once."}], concurrency=2, name="b")  # a holds the run
    async with writes_blocked(workers.database_url, run_id):
        proxy.release()
        assert await asyncio.to_thread(proxy.delivered.wait, 60), "the worker never read it"
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        async with service.database.read() as conn:  # nobody can write while the lock is held
            query = sa.select(action_ledger).where(action_ledger.c.run_id == run_id)
            (entry,) = (await conn.execute(query)).all()
        assert (entry.status, entry.outcome) == ("intent", None)  # killed before the commit

    async def finished() -> Any:
        current = await service.get_run(run_id)
        return current if current.status in FINAL_RUN_STATUSES else None

    done = await wait_for(finished, limit_s=60)
    assert done.status is RunStatus.SUCCEEDED and done.attempt == 2
    assert done.result.assistant_text == "Done, once."
    return done


async def test_a_create_post_is_not_repeated_after_a_kill_between_the_call_and_the_commit(
    setup: tuple[Service, Workers], proxy: HoldingProxy, wordpress_client: WordPressClient
) -> None:
    service, workers = setup
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "write the notice")).run
    proxy.trap("POST", "/wp/v2/posts")
    call = {"name": "create_post", "arguments": {"title": "Closed Monday", "content": "Sorry!"}}
    done = await crash_and_resume(service, workers, proxy, run.id, call)

    step = done.result.steps[0]
    assert step.status is StepStatus.SUCCEEDED and "found again" in step.result_summary
    query = {"search": "Closed Monday", "status": "draft"}
    made = await wordpress_client.get("/wp/v2/posts", query)
    assert len(made) == 1  # created by the first worker, exactly once
    (entry,) = await service.ledger(run.id)
    assert entry.status == "done" and entry.outcome is not None
    assert entry.outcome.data["id"] == made[0]["id"]


async def test_an_update_post_is_not_repeated_after_a_kill_between_the_call_and_the_commit(
    setup: tuple[Service, Workers], proxy: HoldingProxy, wordpress_client: WordPressClient
) -> None:
    service, workers = setup
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "retitle the first post")).run
    proxy.trap("POST", "/wp/v2/posts/1")
    revisions = len(await wordpress_client.get("/wp/v2/posts/1/revisions"))
    call = {"name": "update_post", "arguments": {"id": 1, "title": "Welcome back"}}
    done = await crash_and_resume(service, workers, proxy, run.id, call)

    step = done.result.steps[0]
    assert step.status is StepStatus.SUCCEEDED and "found applied" in step.result_summary
    assert (await wordpress_client.get("/wp/v2/posts/1"))["title"]["raw"] == "Welcome back"
    # One new revision, for the one update the first worker sent: the second sent nothing.
    assert len(await wordpress_client.get("/wp/v2/posts/1/revisions")) == revisions + 1
    (entry,) = await service.ledger(run.id)
    assert entry.snapshot["fields"] == {"title": "Hello world!"}  # undo still goes back
