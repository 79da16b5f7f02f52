"""The writers of one process take SQLite's write lock in turns (`store/db.py`): first come
first served, the group commit (`first=True`) before the others, a cancelled waiter out of the
line, and a database used from several event loops. Before, every writer polled SQLite's busy
handler: under 200 streams a group commit waited seconds behind the runs being started."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from pressloop.store.db import Database


@pytest.fixture
def database(tmp_path: Path) -> Database:
    database = Database.open(f"sqlite:///{tmp_path / 'turns.db'}", busy_timeout_s=5)
    asyncio.run(_create(database))
    return database


async def _create(database: Database) -> None:
    async with database.write() as conn:
        await conn.execute(sa.text("CREATE TABLE log (who TEXT)"))
    await database.engine.dispose()


async def _writer(database: Database, who: str, order: list[str], *, first: bool = False) -> None:
    async with database.write(first=first) as conn:
        order.append(who)
        await conn.execute(sa.text("INSERT INTO log VALUES (:who)"), {"who": who})
        await asyncio.sleep(0.01)  # hold the lock across awaits, as a real transaction does


async def test_waiting_writers_go_in_order_and_the_group_commit_goes_first(
    database: Database,
) -> None:
    order: list[str] = []
    holder = asyncio.create_task(_writer(database, "holder", order))
    await asyncio.sleep(0.001)  # the holder has the turn
    tasks = [asyncio.create_task(_writer(database, f"w{i}", order)) for i in range(3)]
    await asyncio.sleep(0.001)
    tasks.append(asyncio.create_task(_writer(database, "commit", order, first=True)))
    await asyncio.gather(holder, *tasks)
    assert order == ["holder", "commit", "w0", "w1", "w2"]
    async with database.read() as conn:
        stored = (await conn.execute(sa.text("SELECT who FROM log"))).scalars().all()
    assert stored == order
    await database.close()


async def test_a_cancelled_waiter_leaves_the_line_and_the_next_one_writes(
    database: Database,
) -> None:
    order: list[str] = []
    holder = asyncio.create_task(_writer(database, "holder", order))
    await asyncio.sleep(0.001)
    gone = asyncio.create_task(_writer(database, "gone", order))
    after = asyncio.create_task(_writer(database, "after", order))
    await asyncio.sleep(0.001)
    gone.cancel()
    await asyncio.gather(holder, after)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert order == ["holder", "after"]
    # The turn is free again: a writer that comes now does not wait.
    await asyncio.wait_for(_writer(database, "later", order), timeout=2)
    await database.close()


async def test_a_waiter_cancelled_as_its_turn_came_passes_the_turn_on(database: Database) -> None:
    order: list[str] = []
    release = asyncio.Event()

    async def hold() -> None:
        async with database.write():
            order.append("holder")
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0.001)
    unlucky = asyncio.create_task(_writer(database, "unlucky", order))
    next_one = asyncio.create_task(_writer(database, "next", order))
    await asyncio.sleep(0.001)
    release.set()
    await holder  # the turn is handed to `unlucky`, which is cancelled before it resumes
    unlucky.cancel()
    await asyncio.wait_for(next_one, timeout=2)
    assert order == ["holder", "next"]
    await database.close()


def test_one_database_serves_writers_on_several_event_loops(database: Database) -> None:
    order: list[str] = []
    for loop_number in range(2):

        async def burst(n: int = loop_number) -> None:
            await asyncio.gather(*(_writer(database, f"{n}.{i}", order) for i in range(3)))
            await database.engine.dispose()

        asyncio.run(burst())
    assert sorted(order) == ["0.0", "0.1", "0.2", "1.0", "1.1", "1.2"]
