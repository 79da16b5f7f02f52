"""Run events: appended by the run's lease holder, read by anyone after a sequence number."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Event, EventType
from pressloop.store.schema import run_events

_INSERT = sa.insert(run_events)


async def append_events(conn: AsyncConnection, events: Sequence[Event]) -> None:
    if not events:
        return
    await conn.execute(
        _INSERT,
        [
            {
                "run_id": e.run_id,
                "thread_id": e.thread_id,
                "seq": e.seq,
                "type": e.type.value,
                "ts": e.ts,
                "data": e.data,
            }
            for e in events
        ],
    )


async def list_events(
    conn: AsyncConnection, run_id: str, *, after_seq: int = 0, limit: int = 1000
) -> list[Event]:
    rows = (
        await conn.execute(
            sa.select(run_events)
            .where(run_events.c.run_id == run_id, run_events.c.seq > after_seq)
            .order_by(run_events.c.seq)
            .limit(limit)
        )
    ).all()
    return [
        Event(
            run_id=r.run_id,
            thread_id=r.thread_id,
            seq=r.seq,
            type=EventType(r.type),
            ts=r.ts,
            data=r.data,
        )
        for r in rows
    ]


async def last_seq(conn: AsyncConnection, run_id: str) -> int:
    value = (
        await conn.execute(
            sa.select(sa.func.max(run_events.c.seq)).where(run_events.c.run_id == run_id)
        )
    ).scalar_one()
    return int(value or 0)
