"""On PostgreSQL a read runs its statements in autocommit (no BEGIN and COMMIT: two round trips
fewer, the same view under READ COMMITTED), and the connection goes back to the pool as it
came: the next write on it is one transaction again, all or nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from pressloop.store import migrate
from pressloop.store.db import Database

TRANSACTION_ID = sa.text("SELECT pg_current_xact_id()::text")


@pytest.fixture
async def one_connection(postgres_database: str) -> AsyncIterator[Database]:
    """A database whose pool has one connection: each transaction below gets the same one."""
    database = Database.open(postgres_database, pool_size=1, max_overflow=0)
    yield database
    await database.close()


async def test_a_read_sends_no_begin_and_the_next_write_is_one_transaction(
    one_connection: Database,
) -> None:
    async with one_connection.read() as conn:
        # Each statement its own transaction: two transaction ids.
        first = (await conn.execute(TRANSACTION_ID)).scalar_one()
        second = (await conn.execute(TRANSACTION_ID)).scalar_one()
    assert first != second
    async with one_connection.write() as conn:
        first = (await conn.execute(TRANSACTION_ID)).scalar_one()
        second = (await conn.execute(TRANSACTION_ID)).scalar_one()
    assert first == second


async def test_a_write_after_a_read_on_the_same_connection_rolls_back_whole(
    one_connection: Database,
) -> None:
    async with one_connection.write() as conn:
        await conn.execute(sa.text("CREATE TEMPORARY TABLE IF NOT EXISTS t (n int)"))
    async with one_connection.read() as conn:
        assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 0
    with pytest.raises(RuntimeError):
        async with one_connection.write() as conn:
            await conn.execute(sa.text("INSERT INTO t VALUES (1)"))
            raise RuntimeError("half-way")
    async with one_connection.read() as conn:
        assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 0
    assert await migrate.current_revision(one_connection) is not None  # reads still answer
