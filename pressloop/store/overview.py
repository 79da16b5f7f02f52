"""Read models for the admin UI's lists: what a page shows beside each thread or schedule.

Each function answers for a whole page in one or two queries, not one query per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.schema import runs, threads


@dataclass(frozen=True, kw_only=True)
class RunBrief:
    id: str
    thread_id: str
    trigger: str
    status: str
    created_at: datetime
    finished_at: datetime | None


def _brief(row: Any) -> RunBrief:  # a Row of the _BRIEF_COLUMNS
    return RunBrief(**dict(row._mapping))


_BRIEF_COLUMNS = (
    runs.c.id,
    runs.c.thread_id,
    runs.c.trigger,
    runs.c.status,
    runs.c.created_at,
    runs.c.finished_at,
)


async def last_runs(conn: AsyncConnection, thread_ids: Sequence[str]) -> dict[str, RunBrief]:
    """The newest run of each thread (threads without runs are absent)."""
    if not thread_ids:
        return {}
    newest = (
        sa.select(runs.c.thread_id, sa.func.max(runs.c.created_at).label("created_at"))
        .where(runs.c.thread_id.in_(thread_ids))
        .group_by(runs.c.thread_id)
        .subquery()
    )
    query = sa.select(*_BRIEF_COLUMNS).join(
        newest,
        sa.and_(runs.c.thread_id == newest.c.thread_id, runs.c.created_at == newest.c.created_at),
    )
    found: dict[str, RunBrief] = {}
    for row in (await conn.execute(query)).all():
        brief = _brief(row)
        # Two runs created in the same instant: keep the larger id (ids grow with time).
        if brief.thread_id not in found or brief.id > found[brief.thread_id].id:
            found[brief.thread_id] = brief
    return found


async def child_counts(conn: AsyncConnection, thread_ids: Sequence[str]) -> dict[str, int]:
    if not thread_ids:
        return {}
    query = (
        sa.select(threads.c.parent_id, sa.func.count())
        .where(threads.c.parent_id.in_(thread_ids))
        .group_by(threads.c.parent_id)
    )
    return {str(parent): int(count) for parent, count in (await conn.execute(query)).all()}


async def runs_by_key_prefix(
    conn: AsyncConnection, prefix: str, *, limit: int = 10
) -> list[RunBrief]:
    """The newest runs whose idempotency key starts with `prefix` (a schedule's beats)."""
    query = (
        sa.select(*_BRIEF_COLUMNS)
        .where(runs.c.idempotency_key.startswith(prefix, autoescape=True))
        .order_by(runs.c.created_at.desc())
        .limit(limit)
    )
    return [_brief(row) for row in (await conn.execute(query)).all()]
