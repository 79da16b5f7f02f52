"""Bring a database to the newest schema with Alembic (`pressloop db upgrade`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from pressloop.store.db import Database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection, revision: str) -> None:
    command.upgrade(alembic_config(connection), revision)


async def upgrade(database: Database, revision: str = "head") -> None:
    async with database.engine.begin() as conn:
        await conn.run_sync(_upgrade, revision)


def head_revision() -> str | None:
    """The newest migration this code knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(database: Database) -> str | None:
    """The migration the database is at (None for an empty database)."""
    async with database.read() as conn:
        return await conn.run_sync(_current)
