"""`submit(start_here=True)` (the API's chat turns, the CLI) on both databases: the new run is
claimed in the transaction that creates it, and a busy thread falls back to the queue."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from pressloop.config import Settings
from pressloop.contracts import Policy, PolicyMode, RunStatus, Trigger
from pressloop.errors import AgentDisabled, BudgetSpent, NotFound
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store import claims as claim_store
from pressloop.store import runs as run_store
from pressloop.store.db import Database
from tests.conftest import empty_tables
from tests.runtime.conftest import ServiceFactory


async def test_the_run_is_claimed_in_the_transaction_that_creates_it(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([{"text": "hello"}])
    thread = await service.create_thread()
    submission = await service.submit(thread.id, "hi", start_here=True)
    # submit has returned: its task has not run a step yet, but the run is ours already.
    stored = await service.get_run(submission.run.id)
    assert stored.status is RunStatus.RUNNING
    assert stored.lease_owner == service.runner.owner and stored.attempt == 1
    assert submission.started is not None
    finished = await submission.started
    assert finished is not None and finished.status is RunStatus.SUCCEEDED
    assert finished.result is not None and finished.result.assistant_text == "hello"


async def test_a_busy_thread_queues_the_run_and_it_runs_next(make_service: ServiceFactory) -> None:
    service: Service = await make_service([{"text": "first", "delay_s": 0.3}, {"text": "second"}])
    thread = await service.create_thread()
    first = await service.submit(thread.id, "one", start_here=True)
    second = await service.submit(thread.id, "two", start_here=True)
    assert (await service.get_run(second.run.id)).status is RunStatus.QUEUED
    assert first.started is not None and second.started is not None
    # The second could not be claimed while the first ran: it stays queued for a worker.
    assert await asyncio.wait_for(second.started, 10) is None
    done = await asyncio.wait_for(first.started, 10)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert (await service.get_run(second.run.id)).status is RunStatus.QUEUED
    after = await service.run_now(second.run.id)
    assert after is not None and after.status is RunStatus.SUCCEEDED
    assert after.result is not None and after.result.assistant_text == "second"


async def test_a_new_turn_reads_its_agent_settings_and_counters_once(
    make_service: ServiceFactory,
) -> None:
    """The checks (kill switch, budgets), the policy and the claim's context share one read of
    each: a statement is a round trip on the serving loop (`runtime/turn_reads.py`). What they
    read still decides: the site's policy reaches the run, the context has the agent."""
    service: Service = await make_service([{"text": "hello"}], budget_user_actions=5)
    await service.update_site_settings(policies={"chat": {"write": "deny"}})
    thread = await service.create_thread()
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(" ".join(statement.split()))

    engine = service.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        submission = await service.submit(thread.id, "hi", user="ana", start_here=True)
    finally:
        event.remove(engine, "before_cursor_execute", record)

    def reads_of(table: str) -> list[str]:
        return [s for s in statements if s.startswith("SELECT") and f"FROM {table} " in s + " "]

    assert len(reads_of("agents")) == 1, statements
    assert len(reads_of("settings")) == 1, statements
    assert len(reads_of("usage_daily")) == 1, statements
    assert submission.run.policy.write is PolicyMode.DENY
    assert submission.started is not None
    finished = await submission.started
    assert finished is not None and finished.status is RunStatus.SUCCEEDED


async def test_a_new_turn_is_refused_on_what_its_shared_reads_found(
    make_service: ServiceFactory,
) -> None:
    """The shared reads are the checks' reads: the kill switch and a spent budget still refuse
    a new turn before anything is stored."""
    service: Service = await make_service([{"text": "hello"}], budget_user_tokens=1)
    thread = await service.create_thread()
    await service.update_site_settings(agent_disabled=True)
    with pytest.raises(AgentDisabled):
        await service.submit(thread.id, "hi", user="ana", start_here=True)
    await service.update_site_settings(agent_disabled=False)
    first = await service.submit(thread.id, "hi", user="ana", start_here=True)
    assert first.started is not None and (await first.started) is not None
    await service.flush_usage()
    with pytest.raises(BudgetSpent):
        await service.submit(thread.id, "again", user="ana", start_here=True)
    assert [r.id for r in await service.list_runs(thread_id=thread.id)] == [first.run.id]


async def test_a_claim_that_loses_a_race_stores_the_turn_queued(
    postgres_database: str, tmp_path: Path
) -> None:
    """`submit` claims without a savepoint: when another process starts a run of the thread
    after the submit looked (PostgreSQL: the unique index makes the claim wait, then fail), the
    whole transaction rolls back and the turn is stored again, queued: one run, not two, and
    no error for the person."""
    database = Database.open(postgres_database)
    await empty_tables(database)
    settings = Settings(data_dir=tmp_path, database_url=postgres_database, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([{"text": "hi"}]))
    try:
        thread = await service.create_thread()
        async with database.write() as other:  # another process, its claim not committed yet
            theirs, _ = await run_store.create_run(
                other,
                thread_id=thread.id,
                agent_id=thread.agent_id,
                trigger=Trigger.API,
                input="theirs",
                policy=Policy(),
                now=datetime.now(UTC),
                max_attempts=3,
            )
            claim = await claim_store.claim_run(
                other, owner="other", ttl_s=30, now=datetime.now(UTC), run_id=theirs.id
            )
            assert claim is not None
            submitting = asyncio.create_task(service.submit(thread.id, "mine", start_here=True))
            await _until_a_backend_waits_for_a_lock(database)
        submission = await asyncio.wait_for(submitting, 10)
        assert submission.created
        runs = await service.list_runs(thread_id=thread.id)
        assert sorted(r.input for r in runs) == ["mine", "theirs"]
        assert (await service.get_run(submission.run.id)).status is RunStatus.QUEUED
        assert submission.started is not None
        assert await asyncio.wait_for(submission.started, 10) is None  # the thread is busy
    finally:
        await service.close()
        await database.close()


async def _until_a_backend_waits_for_a_lock(database: Database) -> None:
    waiting = sa.text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    async with asyncio.timeout(10):
        while True:
            async with database.read() as conn:
                if (await conn.execute(waiting)).scalar_one():
                    return
            await asyncio.sleep(0.02)


async def test_a_thread_for_an_agent_that_does_not_exist_is_not_found(
    make_service: ServiceFactory,
) -> None:
    """The insert's foreign key checks the agent (no read before it): a missing agent is still
    a clear NotFound, and nothing is stored."""
    service: Service = await make_service([])
    with pytest.raises(NotFound, match="agent 'nobody' does not exist"):
        await service.create_thread(agent_id="nobody")
    assert await service.list_threads() == []
    thread = await service.create_thread(title="kept")
    assert [t.id for t in await service.list_threads()] == [thread.id]
