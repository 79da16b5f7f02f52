"""What `pressloop serve`'s /metrics reads from the database at scrape time: the queue and the
approvals waiting for a person. Each read uses an index on (status, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import RunStatus
from pressloop.store.approvals import PENDING
from pressloop.store.claims import _head_of_thread
from pressloop.store.schema import approvals, runs


@dataclass(kw_only=True, frozen=True)
class QueueState:
    due: int  # queued runs due now
    running: int
    oldest_startable_due_at: datetime | None  # the oldest due run first on its idle thread


@dataclass(kw_only=True, frozen=True)
class PendingApprovals:
    pending: int
    oldest_created_at: datetime | None


async def queue_state(conn: AsyncConnection, *, now: datetime) -> QueueState:
    queued_due = sa.and_(runs.c.status == RunStatus.QUEUED.value, runs.c.not_before <= now)
    due = (await conn.execute(sa.select(sa.func.count()).where(queued_due))).scalar_one()
    running = (
        await conn.execute(
            sa.select(sa.func.count()).where(runs.c.status == RunStatus.RUNNING.value)
        )
    ).scalar_one()
    # What a claim could take now (store/claims.py), the longest-waiting first.
    oldest = (
        await conn.execute(
            sa.select(runs.c.not_before)
            .where(queued_due, runs.c.id == _head_of_thread())
            .order_by(runs.c.not_before)
            .limit(1)
        )
    ).scalar_one_or_none()
    return QueueState(due=int(due), running=int(running), oldest_startable_due_at=oldest)


async def pending_approvals(conn: AsyncConnection) -> PendingApprovals:
    row = (
        await conn.execute(
            sa.select(sa.func.count(), sa.func.min(approvals.c.created_at)).where(
                approvals.c.status == PENDING
            )
        )
    ).one()
    return PendingApprovals(pending=int(row[0]), oldest_created_at=row[1])
