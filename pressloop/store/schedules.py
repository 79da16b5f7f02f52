"""Schedules: heartbeat rules and when each is next due."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.ids import new_id
from pressloop.store.schema import schedules


@dataclass(kw_only=True)
class ScheduleRecord:
    id: str
    agent_id: str
    thread_id: str | None
    kind: str
    interval_s: int | None
    cron: str | None
    timezone: str
    active_hours: dict[str, str] | None
    message: str | None
    status: str
    next_due_at: datetime
    last_due_at: datetime | None
    last_run_id: str | None
    created_by: str | None
    created_at: datetime
    updated_at: datetime


def _record(row: sa.Row[Any]) -> ScheduleRecord:
    return ScheduleRecord(**dict(row._mapping))


async def create_schedule(
    conn: AsyncConnection, *, now: datetime, next_due_at: datetime, **fields: Any
) -> ScheduleRecord:
    schedule_id = new_id("sch")
    await conn.execute(
        sa.insert(schedules).values(
            id=schedule_id, next_due_at=next_due_at, created_at=now, updated_at=now, **fields
        )
    )
    created = await get_schedule(conn, schedule_id)
    assert created is not None
    return created


async def get_schedule(conn: AsyncConnection, schedule_id: str) -> ScheduleRecord | None:
    row = (
        await conn.execute(sa.select(schedules).where(schedules.c.id == schedule_id))
    ).one_or_none()
    return _record(row) if row else None


async def list_schedules(conn: AsyncConnection) -> list[ScheduleRecord]:
    rows = (await conn.execute(sa.select(schedules).order_by(schedules.c.created_at))).all()
    return [_record(r) for r in rows]


async def due_schedules(
    conn: AsyncConnection, *, now: datetime, limit: int = 50
) -> list[ScheduleRecord]:
    """Active schedules that are due, locked for this scheduler (others skip them)."""
    query = (
        sa.select(schedules)
        .where(schedules.c.status == "active", schedules.c.next_due_at <= now)
        .order_by(schedules.c.next_due_at)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return [_record(r) for r in (await conn.execute(query)).all()]


async def advance(
    conn: AsyncConnection,
    schedule: ScheduleRecord,
    *,
    next_due_at: datetime,
    now: datetime,
    run_id: str | None,
    thread_id: str | None,
) -> bool:
    """Move the schedule past the beat it just handled; False if another scheduler did first."""
    values: dict[str, Any] = {
        "next_due_at": next_due_at,
        "last_due_at": schedule.next_due_at,
        "updated_at": now,
        "thread_id": thread_id,
    }
    if run_id is not None:
        values["last_run_id"] = run_id
    done = await conn.execute(
        sa.update(schedules)
        .where(schedules.c.id == schedule.id, schedules.c.next_due_at == schedule.next_due_at)
        .values(**values)
    )
    return done.rowcount == 1


async def update_schedule(
    conn: AsyncConnection, schedule_id: str, *, now: datetime, **fields: Any
) -> ScheduleRecord | None:
    await conn.execute(
        sa.update(schedules).where(schedules.c.id == schedule_id).values(updated_at=now, **fields)
    )
    return await get_schedule(conn, schedule_id)


async def delete_schedule(conn: AsyncConnection, schedule_id: str) -> bool:
    done = await conn.execute(sa.delete(schedules).where(schedules.c.id == schedule_id))
    return done.rowcount == 1
