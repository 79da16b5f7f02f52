"""Several processes may open one new SQLite database at once (two `pressloop` commands on a
fresh data directory): the switch to WAL waits for the other's lock instead of failing with
"database is locked", and it waits no longer than PRESSLOOP_DB_BUSY_TIMEOUT."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from pressloop.config import Settings
from pressloop.runtime.service import Service
from pressloop.store.db import Database


@contextmanager
def another_writer(path: Path, hold_s: float) -> Iterator[None]:
    """Another process's writing transaction on a database still in SQLite's default journal
    mode, released after `hold_s` (SQLite does not call the busy handler for a WAL switch
    then: the case two fresh processes met)."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE IF NOT EXISTS scratch (x INTEGER)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO scratch VALUES (1)")

    def release() -> None:
        time.sleep(hold_s)
        other.execute("COMMIT")

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        yield
    finally:
        releaser.join()
        other.close()


async def test_a_new_database_locked_by_another_writer_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with another_writer(path, hold_s=0.4):
        started = time.monotonic()
        database = Database.open(f"sqlite:///{path}", busy_timeout_s=10)
        waited = time.monotonic() - started
    try:
        assert waited >= 0.3, "the open went on while another process held the write lock"
        async with database.write() as conn:
            await conn.execute(sa.text("CREATE TABLE mine (x INTEGER)"))
        async with database.read() as conn:
            mode = (await conn.execute(sa.text("PRAGMA journal_mode"))).scalar_one()
            rows = (await conn.execute(sa.text("SELECT count(*) FROM scratch"))).scalar_one()
        assert mode == "wal"
        assert rows == 1
    finally:
        await database.close()


def test_the_wait_ends_at_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with another_writer(path, hold_s=2.0):
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            Database.open(f"sqlite:///{path}", busy_timeout_s=0.3)
        waited = time.monotonic() - started
    assert 0.25 <= waited < 1.9


async def test_two_services_open_one_new_data_directory_at_once(tmp_path: Path) -> None:
    """What two `pressloop` commands on a fresh data directory do: both open and migrate."""
    settings = Settings(data_dir=str(tmp_path / "data"))
    opened = await asyncio.gather(*(asyncio.to_thread(_open_and_close, settings) for _ in range(4)))
    assert opened == [True] * 4


def _open_and_close(settings: Settings) -> bool:
    async def run() -> bool:
        service = await Service.open(settings)
        await service.close()
        return True

    return asyncio.run(run())
