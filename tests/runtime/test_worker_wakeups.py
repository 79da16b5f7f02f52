"""What wakes an idle worker in another process. On PostgreSQL its notifications announce every
run made claimable, so it waits up to `worker_idle_poll_s` (30 s here) between looks, except
for what no notification announces: a retry's backoff that ends, a lease that expires. On
SQLite it polls every `worker_poll_s`. Every case below would take the 30 s if the worker
waited them out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pressloop.config import Settings
from pressloop.contracts import RunStatus, Trigger
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store import claims as claim_store
from pressloop.store.db import Database
from pressloop.store.records import RunRecord
from tests.conftest import empty_tables
from tests.support.processes import wait_for
from tests.support.queued_runs import queue_on

Starter = Callable[[], Awaitable[Service]]

IDLE_POLL_S = 30.0
SOON_S = 10.0  # far below the idle poll, far above a loaded machine's hiccup


async def _service(url: str, folder: Path) -> Service:
    settings = Settings(
        database_url=url,
        data_dir=folder,
        provider="scripted",
        worker_poll_s=0.05,
        worker_idle_poll_s=IDLE_POLL_S,
        cooldown_s=0,
    )
    provider = ScriptedProvider([{"text": "done"}], cycle=True)
    return await Service.open(settings, provider=lambda: provider)


async def _finished(service: Service, run_id: str) -> tuple[RunRecord, float]:
    """The run once it ends (within `SOON_S`), and how long that took from now."""
    start = time.monotonic()

    async def succeeded() -> RunRecord | None:
        run = await service.get_run(run_id)
        return run if run.status is RunStatus.SUCCEEDED else None

    run = await wait_for(succeeded, SOON_S)
    return run, time.monotonic() - start


async def _queue(service: Service, *, due_in_s: float = 0.0, dead_owner: bool = False) -> RunRecord:
    """A run queued on a new thread by this process, due in `due_in_s`; with `dead_owner`,
    claimed in the same transaction by a worker that then dies (its lease lasts 2 s)."""
    thread = await service.create_thread()
    async with service.database.write() as conn:
        run = await queue_on(
            conn,
            thread.id,
            thread.agent_id,
            now=service.now(),
            trigger=Trigger.HEARTBEAT,
            due_in_s=due_in_s,
        )
        if dead_owner:
            claim = await claim_store.claim_run(
                conn, owner="dead:1", ttl_s=2.0, now=service.now(), run_id=run.id
            )
            assert claim is not None
    return run


@pytest.fixture
async def queues(database_url: str, tmp_path: Path) -> AsyncIterator[Service]:
    """The process that queues runs; it runs none."""
    if not database_url.startswith("sqlite"):  # the session's database, emptied first
        database = Database.open(database_url)
        await empty_tables(database)
        await database.close()
    service = await _service(database_url, tmp_path / "queues")
    yield service
    await service.close()


@pytest.fixture
async def worker_process(database_url: str, tmp_path: Path) -> AsyncIterator[Starter]:
    """Starts the other process: a worker (and, on PostgreSQL, its listener), left idle."""
    started: list[Service] = []

    async def start() -> Service:
        service = await _service(database_url, tmp_path / "works")
        started.append(service)
        listener = service.start_listener()
        if listener is not None:
            await asyncio.wait_for(listener.listening.wait(), 10)
        service.start_worker()
        await asyncio.sleep(0.5)  # its first looks are done: it waits
        return service

    yield start
    for service in started:
        await service.close()


async def test_a_run_queued_elsewhere_starts_soon(queues: Service, worker_process: Starter) -> None:
    works = await worker_process()
    run = await _queue(queues)
    finished, _took = await _finished(works, run.id)
    assert finished.result is not None and finished.result.assistant_text == "done"


async def test_a_run_due_later_starts_when_due(queues: Service, worker_process: Starter) -> None:
    """A retry's backoff: on PostgreSQL the notification comes when the run is queued, not when
    it is due; the idle worker asks when the next run is due and wakes then."""
    works = await worker_process()
    run = await _queue(queues, due_in_s=1.5)
    finished, took = await _finished(works, run.id)
    assert took >= 1.0  # not before it was due
    assert finished.started_at is not None and finished.started_at >= run.not_before


async def test_a_dead_workers_run_is_taken_back_when_its_lease_expires(
    queues: Service, worker_process: Starter
) -> None:
    run = await _queue(queues, dead_owner=True)
    works = await worker_process()  # idle: nothing is claimable, a lease expires in 2 s
    finished, _took = await _finished(works, run.id)
    assert finished.attempt == 2  # the dead worker's attempt counted


async def test_the_kill_switch_going_off_starts_what_it_held(
    queues: Service, worker_process: Starter
) -> None:
    await queues.update_site_settings(agent_disabled=True)
    works = await worker_process()
    run = await _queue(queues)  # queued before the switch went on (a retry, a heartbeat)
    await asyncio.sleep(0.5)  # the worker looked, found the switch on, and waits
    assert (await works.get_run(run.id)).status is RunStatus.QUEUED
    await queues.update_site_settings(agent_disabled=False)
    await _finished(works, run.id)


async def test_an_idle_worker_on_postgresql_stays_quiet(
    queues: Service, worker_process: Starter
) -> None:
    """Nothing queued, nothing due: on PostgreSQL the worker waits for a notification (at most
    the idle poll) and sends nothing meanwhile; on SQLite it looks every `worker_poll_s`."""
    works = await worker_process()
    statements: list[str] = []

    def sent(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    engine = works.database.engine.sync_engine
    sa.event.listen(engine, "before_cursor_execute", sent)
    try:
        await asyncio.sleep(2.0)
    finally:
        sa.event.remove(engine, "before_cursor_execute", sent)
    if works.database.is_sqlite:
        assert len(statements) >= 20  # 40 looks at 0.05 s, a claim each
    else:
        assert statements == []
    # Still awake to what is queued.
    run = await _queue(queues)
    await _finished(works, run.id)
