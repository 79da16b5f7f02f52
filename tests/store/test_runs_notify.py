"""PostgreSQL tells listening workers when a transaction leaves a run claimable (migration 0011):
one notification at the commit, none for a rolled-back transaction, none for a run claimed where
it was queued, none for a run queued behind a busy one until that one ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import asyncpg  # type: ignore[import-untyped]
import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import RunStatus
from pressloop.store import claims as claim_store
from pressloop.store import migrate
from pressloop.store.db import Database
from pressloop.store.notify import RUNS_CHANNEL, listen_url
from pressloop.store.records import RunRecord
from pressloop.store.schema import runs
from tests.conftest import empty_tables
from tests.support.queued_runs import queue_on, queue_runs

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
MARKER = "marker"

Write = Callable[[AsyncConnection], Awaitable[object]]


class Notifications:
    """Counts the notifications on `pressloop_runs` that one piece of work causes."""

    def __init__(self, database: Database, listener: asyncpg.Connection) -> None:
        self.database = database
        self.received: asyncio.Queue[str] = asyncio.Queue()
        self._listener = listener

    async def start(self) -> None:
        await self._listener.add_listener(
            RUNS_CHANNEL, lambda *args: self.received.put_nowait(args[-1])
        )

    async def after(self, write: Write, *, rollback: bool = False) -> int:
        """How many notifications arrive for what `write` does in one transaction (committed,
        or rolled back)."""
        if rollback:
            with pytest.raises(RuntimeError):
                async with self.database.write() as conn:
                    await write(conn)
                    raise RuntimeError("rolled back")
        else:
            async with self.database.write() as conn:
                await write(conn)
        # A marker sent after that commit: whatever it notified arrived before it.
        async with self.database.write() as conn:
            await conn.execute(sa.select(sa.func.pg_notify(RUNS_CHANNEL, MARKER)))
        count = 0
        while (payload := await asyncio.wait_for(self.received.get(), 10)) != MARKER:
            assert payload == ""
            count += 1
        return count


@pytest.fixture
async def notifications(postgres_database: str) -> AsyncIterator[Notifications]:
    database = Database.open(postgres_database)
    await empty_tables(database)
    listener = await asyncpg.connect(listen_url(postgres_database))
    counter = Notifications(database, listener)
    await counter.start()
    yield counter
    await listener.close()
    await database.close()


async def _queue_on(conn: AsyncConnection, thread_of: RunRecord) -> RunRecord:
    return await queue_on(conn, thread_of.thread_id, thread_of.agent_id, now=NOW)


async def _set_status(conn: AsyncConnection, run_id: str, status: RunStatus) -> None:
    await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(status=status.value))


async def test_a_run_queued_is_announced_once_at_its_commit(notifications: Notifications) -> None:
    assert await notifications.after(lambda conn: queue_runs(conn, 1, now=NOW)) == 1
    # Three runs in one transaction: one notification (PostgreSQL folds identical ones).
    assert await notifications.after(lambda conn: queue_runs(conn, 3, now=NOW)) == 1
    assert await notifications.after(lambda conn: queue_runs(conn, 1, now=NOW), rollback=True) == 0


async def test_a_run_claimed_where_it_was_queued_wakes_no_one(
    notifications: Notifications,
) -> None:
    async def queue_and_claim(conn: AsyncConnection) -> None:
        (run,) = await queue_runs(conn, 1, now=NOW)
        claim = await claim_store.claim_run(conn, owner="here", ttl_s=30, now=NOW, run_id=run.id)
        assert claim is not None

    assert await notifications.after(queue_and_claim) == 0


async def test_a_run_behind_a_busy_one_is_announced_when_that_one_ends(
    notifications: Notifications,
) -> None:
    busy: list[RunRecord] = []

    async def queue_and_claim(conn: AsyncConnection) -> None:
        (run,) = await queue_runs(conn, 1, now=NOW)
        assert await claim_store.claim_run(conn, owner="here", ttl_s=30, now=NOW, run_id=run.id)
        busy.append(run)

    assert await notifications.after(queue_and_claim) == 0
    assert await notifications.after(lambda conn: _queue_on(conn, busy[0])) == 0
    # Paused on an approval, the thread is still busy.
    paused = RunStatus.WAITING_APPROVAL
    assert await notifications.after(lambda conn: _set_status(conn, busy[0].id, paused)) == 0
    done = RunStatus.SUCCEEDED
    assert await notifications.after(lambda conn: _set_status(conn, busy[0].id, done)) == 1
    # A change that leaves nothing claimable says nothing.
    assert await notifications.after(lambda conn: _set_status(conn, busy[0].id, done)) == 0


async def test_a_run_put_back_in_the_queue_is_announced(notifications: Notifications) -> None:
    running: list[RunRecord] = []

    async def queue_and_claim(conn: AsyncConnection) -> None:
        (run,) = await queue_runs(conn, 1, now=NOW)
        assert await claim_store.claim_run(conn, owner="here", ttl_s=30, now=NOW, run_id=run.id)
        running.append(run)

    await notifications.after(queue_and_claim)
    # A retry after a failed attempt, a lease that expired, an approval decided: queued again.
    queued = RunStatus.QUEUED
    assert await notifications.after(lambda conn: _set_status(conn, running[0].id, queued)) == 1


def _downgrade_to(connection: Connection, revision: str) -> None:
    command.downgrade(migrate.alembic_config(connection), revision)


async def test_the_migration_goes_down_and_up_again(notifications: Notifications) -> None:
    database = notifications.database
    try:
        async with database.engine.begin() as conn:
            await conn.run_sync(_downgrade_to, "0010")
        assert await notifications.after(lambda conn: queue_runs(conn, 1, now=NOW)) == 0
    finally:
        await migrate.upgrade(database)
    assert await notifications.after(lambda conn: queue_runs(conn, 1, now=NOW)) == 1


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_on_sqlite_the_migrations_add_no_trigger(database: Database) -> None:
    async with database.read() as conn:
        triggers = (
            await conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        ).all()
    assert triggers == []
