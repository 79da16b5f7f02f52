"""The writers of several processes on one SQLite file take turns through an OS file lock
(`store/write_lock.py`): a writer waits while another process writes and goes on when it ends;
one that gives up (the busy timeout, a cancel) leaves no lock behind. Two `Database`s on one
file stand for two processes here (each turn opens the lock file anew: locks of two opens
exclude each other as two processes' do), and one test uses a real second process."""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from pressloop.store.db import Database
from pressloop.store.write_lock import SUFFIX

ROOT = Path(__file__).resolve().parents[2]


def _open(path: Path, busy_timeout_s: float = 10) -> Database:
    return Database.open(f"sqlite:///{path}", busy_timeout_s=busy_timeout_s)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "shared.db"

    async def create() -> None:
        database = _open(path)
        async with database.write() as conn:
            await conn.execute(sa.text("CREATE TABLE log (who TEXT)"))
        await database.close()

    asyncio.run(create())
    return path


async def _log(database: Database, who: str) -> None:
    async with database.write() as conn:
        await conn.execute(sa.text("INSERT INTO log VALUES (:who)"), {"who": who})


async def _stored(database: Database) -> list[str]:
    async with database.read() as conn:
        return list((await conn.execute(sa.text("SELECT who FROM log"))).scalars().all())


def _hold(database: Database, who: str | None = None) -> tuple[asyncio.Task[None], asyncio.Event]:
    """A write transaction (logging `who`) kept open until the returned event is set."""
    release = asyncio.Event()

    async def hold() -> None:
        async with database.write() as conn:
            if who is not None:
                await conn.execute(sa.text("INSERT INTO log VALUES (:who)"), {"who": who})
            await release.wait()

    return asyncio.create_task(hold()), release


async def test_a_writer_waits_for_another_process_and_goes_on_when_it_ends(path: Path) -> None:
    one, other = _open(path), _open(path)
    holder, release = _hold(one, "one")
    await asyncio.sleep(0.05)
    waiter = asyncio.create_task(_log(other, "other"))
    await asyncio.sleep(0.3)
    assert not waiter.done()  # waiting on the file lock, not failing on SQLite's
    release.set()
    async with asyncio.timeout(10):
        await asyncio.gather(holder, waiter)
    assert await _stored(other) == ["one", "other"]
    await one.close()
    await other.close()


async def test_a_write_holds_the_file_lock_and_waits_for_it(path: Path) -> None:
    database = _open(path)
    lock_file = path.with_name(path.name + SUFFIX)
    holder, release = _hold(database)
    await asyncio.sleep(0.05)
    probe = os.open(lock_file, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by the write
        release.set()
        await holder
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # let go with its transaction
        # Held by someone else, with no SQLite lock at all: a write waits for it.
        writer = asyncio.create_task(_log(database, "after the lock"))
        await asyncio.sleep(0.3)
        assert not writer.done()
        fcntl.flock(probe, fcntl.LOCK_UN)
        async with asyncio.timeout(10):
            await writer
    finally:
        os.close(probe)
    assert await _stored(database) == ["after the lock"]
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600
    await database.close()


async def test_a_writer_that_waits_past_the_busy_timeout_fails_and_leaves_no_lock(
    path: Path,
) -> None:
    one, impatient = _open(path), _open(path, busy_timeout_s=0.2)
    holder, release = _hold(one)
    await asyncio.sleep(0.05)
    with pytest.raises(OperationalError, match="database is locked"):
        await _log(impatient, "impatient")
    release.set()
    await holder
    # The thread that was still waiting gets the lock, then lets it go: others write on.
    async with asyncio.timeout(10):
        await _log(one, "one")
        await _log(impatient, "impatient, later")
    assert await _stored(one) == ["one", "impatient, later"]
    await one.close()
    await impatient.close()


async def test_a_writer_cancelled_while_it_waits_leaves_no_lock(path: Path) -> None:
    one, other = _open(path), _open(path)
    holder, release = _hold(one)
    await asyncio.sleep(0.05)
    gone = asyncio.create_task(_log(other, "gone"))
    await asyncio.sleep(0.1)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    release.set()
    await holder
    async with asyncio.timeout(10):
        await _log(other, "other")
        await _log(one, "one")
    assert await _stored(one) == ["other", "one"]
    await one.close()
    await other.close()


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    import sqlalchemy as sa
    from pressloop.store.db import Database

    async def main():
        database = Database.open(sys.argv[1], busy_timeout_s=10)
        async with database.write() as conn:
            await conn.execute(sa.text("INSERT INTO log VALUES ('child')"))
            print("holding", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        await database.close()

    asyncio.run(main())
    """
)


def test_writers_of_two_processes_take_turns(path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, f"sqlite:///{path}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        try:
            assert child.stdout.readline().strip() == "holding"
            stdin = child.stdin

            async def write_while_the_child_holds() -> list[str]:
                database = _open(path)
                writer = asyncio.create_task(_log(database, "parent"))
                await asyncio.sleep(0.3)
                assert not writer.done()  # the child process holds the lock
                stdin.write("go\n")
                stdin.flush()
                async with asyncio.timeout(10):
                    await writer
                stored = await _stored(database)
                await database.close()
                return stored

            assert asyncio.run(write_while_the_child_holds()) == ["child", "parent"]
        finally:
            if child.poll() is None:
                child.kill()
