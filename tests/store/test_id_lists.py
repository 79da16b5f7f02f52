"""`among`: one statement text whatever the number of values, so PostgreSQL prepares it once per
connection; the same rows as `IN` on both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from pressloop.store import agents as agent_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.id_lists import among
from pressloop.store.schema import threads

NOW = datetime(2026, 12, 4, tzinfo=UTC)


async def test_among_selects_the_rows_listed_and_no_others(database: Database) -> None:
    async with database.write() as conn:
        agent = await agent_store.ensure_agent(conn, now=NOW)
        made = [
            (await thread_store.create_thread(conn, agent_id=agent.id, now=NOW)).id
            for _ in range(5)
        ]
    cases = {
        "two of five": ([made[1], made[3]], {made[1], made[3]}),
        "one": ([made[0]], {made[0]}),
        "none listed": ([], set()),
        "unknown ids only": (["thr_missing", "thr_gone"], set()),
        "all and an unknown one": ([*made, "thr_missing"], set(made)),
    }
    async with database.read() as conn:
        for name, (listed, expected) in cases.items():
            query = sa.select(threads.c.id).where(among(conn, threads.c.id, listed))
            found = set((await conn.execute(query)).scalars())
            assert found == expected, name


@pytest.fixture
async def one_connection(postgres_database: str) -> AsyncIterator[Database]:
    """PostgreSQL with one pooled connection: every statement below is prepared on it."""
    database = Database.open(postgres_database, pool_size=1, max_overflow=0)
    yield database
    await database.close()


PREPARED_LIKE = sa.text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE :pattern")


async def test_a_list_of_any_length_is_prepared_once_on_postgresql(
    one_connection: Database,
) -> None:
    # A process looks for cancels among the runs it runs: as many as are in flight, a count
    # that changes with every poll under load. With `IN ($1, ..., $n)` each count was a
    # statement of its own, prepared anew (and pushing others out of the connection's cache).
    async with one_connection.read() as conn:
        for count in range(1, 13):
            ids = [f"run_{i}" for i in range(count)]
            assert await run_store.cancels_requested(conn, ids) == []
        prepared = await conn.execute(PREPARED_LIKE, {"pattern": "%runs.cancel_requested%"})
        assert prepared.scalar_one() == 1
