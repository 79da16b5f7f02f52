"""Fixtures shared by every test: databases (SQLite and the real PostgreSQL) and a clock."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy as sa

from pressloop.store import migrate
from pressloop.store.db import Database
from pressloop.store.schema import metadata

# Tests send many messages a second as one user: the per-user cooldown (5 s by default) is off
# unless a test turns it on; the budget and cooldown tests set their own limits.
os.environ.setdefault("PRESSLOOP_COOLDOWN", "0")

POSTGRES_ADMIN_URL = os.environ.get(
    "PRESSLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


class FakeClock:
    """An injected clock: tests move time forward instead of sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now_value = start or datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now_value

    def advance(self, seconds: float) -> None:
        self.now_value += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    name = f"pressloop_test_{uuid.uuid4().hex[:10]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    try:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL} ({exc}); `make test` starts it"
        )
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base}/{name}".replace("postgresql://", "postgresql+asyncpg://", 1)
    migrated = Database.open(url)
    asyncio.run(_migrate_and_close(migrated))
    yield url
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _migrate_and_close(database: Database) -> None:
    await migrate.upgrade(database)
    await database.close()


async def empty_tables(database: Database) -> None:
    names = ", ".join(t.name for t in metadata.sorted_tables)
    async with database.write() as conn:
        await conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Every store test runs on both databases."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'pressloop.db'}"
    return str(request.getfixturevalue("postgres_database"))


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database.open(database_url)
    if database.is_sqlite:
        await migrate.upgrade(database)
    else:
        await empty_tables(database)
    yield database
    await database.close()
