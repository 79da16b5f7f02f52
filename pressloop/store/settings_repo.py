"""Settings kept in the database (changed from the UI or API without a restart)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.schema import settings

_VALUE = sa.select(settings.c.value).where(settings.c.key == sa.bindparam("b_key"))  # store/db.py
_LOCKED_VALUE = _VALUE.with_for_update()


async def get_setting(conn: AsyncConnection, key: str, default: Any = None) -> Any:
    row = (await conn.execute(_VALUE, {"b_key": key})).one_or_none()
    return default if row is None else row[0]


async def get_settings(conn: AsyncConnection, keys: list[str]) -> dict[str, Any]:
    """The stored values of `keys`, in one query; keys never set are missing."""
    rows = await conn.execute(
        sa.select(settings.c.key, settings.c.value).where(settings.c.key.in_(keys))
    )
    return {row.key: row.value for row in rows}


async def set_setting(conn: AsyncConnection, key: str, value: Any, *, now: datetime) -> None:
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(
        settings
    ).values(key=key, value=value, updated_at=now)
    await conn.execute(
        insert.on_conflict_do_update(
            index_elements=["key"], set_={"value": insert.excluded.value, "updated_at": now}
        )
    )


async def lock_setting(conn: AsyncConnection, key: str, default: Any, *, now: datetime) -> Any:
    """The value of `key`, its row locked until the transaction ends (stored as `default`
    first if it was never set), so a read-change-write of one setting loses no concurrent
    change: on PostgreSQL the row lock, on SQLite the writer's `BEGIN IMMEDIATE`."""
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(
        settings
    ).values(key=key, value=default, updated_at=now)
    await conn.execute(insert.on_conflict_do_nothing(index_elements=["key"]))
    row = (await conn.execute(_LOCKED_VALUE, {"b_key": key})).one()
    return row[0]
