"""The group commit on a loop of its own (PostgreSQL, `PRESSLOOP_COMMIT_THREAD=true`; off by
default, beside a stream process too): its transactions go on while the main loop is busy, their
values and errors come back, and closing the service stops the thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.config import Settings
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.commit_loop import CommitLoop
from pressloop.runtime.service import Service
from pressloop.store.db import Database
from pressloop.store.schema import runs
from tests.conftest import empty_tables
from tests.runtime.conftest import ServiceFactory
from tests.runtime.sessions import claimed, session_of

THREAD_NAME = "pressloop-commits"


def _commit_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


async def test_only_postgresql_commits_on_a_loop_of_its_own_and_only_when_asked(
    make_service: ServiceFactory, database_url: str
) -> None:
    by_default = await make_service([])
    assert by_default.runner.committer.commit_loop is None
    service = await make_service([], commit_thread=True)
    commit_loop = service.runner.committer.commit_loop
    if database_url.startswith("sqlite"):
        # SQLite's writers of one process take turns on the main loop (store/db.py).
        assert commit_loop is None
    else:
        assert isinstance(commit_loop, CommitLoop)


@pytest.mark.parametrize(("setting", "own_loop"), [({}, False), ({"commit_thread": True}, True)])
async def test_beside_a_stream_process_the_group_commit_stays_on_the_main_loop_unless_asked(
    make_service: ServiceFactory, database_url: str, setting: dict[str, bool], own_loop: bool
) -> None:
    """A serving process whose streams a stream process writes (its relay's URL set): its turns
    run below the stream process, and the thread's handovers cost more than the main loop's
    wait (benchmarks.md, section 3ae)."""
    relayed = {"streamer_relay": "http://127.0.0.1:9/secret", **setting}
    service = await make_service([], **relayed)
    assert service.runner.relays.enabled
    commit_loop = service.runner.committer.commit_loop
    expected = own_loop and not database_url.startswith("sqlite")
    assert isinstance(commit_loop, CommitLoop) is expected


async def test_a_group_commit_does_not_queue_for_the_pool(make_service: ServiceFactory) -> None:
    """Every connection of the pool busy (a burst of requests and claims): the batch that a
    person's stream waits for still goes, on the group commit's own connection (PostgreSQL;
    SQLite's group commit goes first among its writers)."""
    service = await make_service([], db_pool_size=1, db_pool_timeout_s=3)
    (claim,) = await claimed(service, 1)
    session = session_of(service, claim)

    async def count_runs(conn: AsyncConnection) -> int:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(runs))).scalar_one())

    async with service.database.read() as held:  # the pool's one connection, held
        await held.execute(sa.select(1))
        # From the pool, the batch would wait for it and fail after the pool's timeout.
        assert await session.write(count_runs) == 1


@pytest.fixture
async def pg_service(postgres_database: str, tmp_path: Path) -> AsyncIterator[Service]:
    """A service on PostgreSQL alone: the commit loop is PostgreSQL's (SQLite's writers take
    turns on the main loop: tests/store/test_write_turns.py)."""
    emptied = Database.open(postgres_database)
    await empty_tables(emptied)
    await emptied.close()
    settings = Settings(
        data_dir=tmp_path,
        database_url=postgres_database,
        provider="scripted",
        commit_thread=True,
    )
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    yield service
    await service.close()


async def test_a_commit_goes_on_while_the_main_loop_is_busy(pg_service: Service) -> None:
    service = pg_service
    commit_loop = service.runner.committer.commit_loop
    assert commit_loop is not None
    (claim,) = await claimed(service, 1)
    session = session_of(service, claim)
    entered, main_busy = threading.Event(), threading.Event()
    ran: dict[str, Any] = {}

    def on_commit(*_args: Any) -> None:
        ran["committed_at"] = time.monotonic()

    async def write(conn: AsyncConnection) -> int:
        entered.set()
        await asyncio.to_thread(main_busy.wait, 10)  # until the main loop is blocked
        count = (await conn.execute(sa.select(sa.func.count()).select_from(runs))).scalar_one()
        ran["thread"] = threading.current_thread().name
        return int(count)

    event.listen(commit_loop.database.engine.sync_engine, "commit", on_commit)
    try:
        written = asyncio.create_task(session.write(write))
        assert await asyncio.to_thread(entered.wait, 10)
        main_busy.set()
        # The main loop does nothing else for half a second (a burst of runs' work).
        time.sleep(0.5)  # noqa: ASYNC251 (blocking the loop is the point)
        busy_until = time.monotonic()
        assert await written == 1
    finally:
        event.remove(commit_loop.database.engine.sync_engine, "commit", on_commit)
    assert ran["thread"] == THREAD_NAME
    # The statement ran and the transaction committed while the main loop was blocked.
    assert ran["committed_at"] < busy_until


async def test_errors_come_back_and_closing_stops_the_thread(pg_service: Service) -> None:
    service = pg_service
    (claim,) = await claimed(service, 1)
    session = session_of(service, claim)

    async def broken(_conn: AsyncConnection) -> None:
        raise ValueError("this write is broken")

    with pytest.raises(ValueError, match="this write is broken"):
        await session.write(broken)
    assert _commit_threads()
    await service.close()
    assert not _commit_threads()
