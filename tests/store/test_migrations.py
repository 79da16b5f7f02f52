"""The schema built by the migrations is exactly the one declared in schema.py."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from pressloop.store.db import Database
from pressloop.store.schema import metadata


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_migrated_schema_equals_declared_schema(database: Database) -> None:
    async with database.read() as conn:
        differences = await conn.run_sync(_diff)
    assert differences == []
