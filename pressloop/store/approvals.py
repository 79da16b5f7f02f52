"""Approvals: one per (run, step) that needs a person; pending until approved, rejected or expired.

Deciding an approval and putting its run back in the queue happen in one transaction, so a run is
never left `waiting_approval` after its approval was decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import RunStatus
from pressloop.store.ids import new_id
from pressloop.store.schema import approvals, runs

PENDING = "pending"
DECIDED = ("approved", "rejected", "expired")


@dataclass(kw_only=True)
class ApprovalRecord:
    id: str
    run_id: str
    thread_id: str
    step_index: int
    call_id: str
    action: str
    params: dict[str, Any]
    risk: str
    trigger: str
    reason: str
    preview: Any
    status: str
    requested_by: str | None
    decided_by: str | None
    note: str | None
    edited_params: dict[str, Any] | None
    # The untrusted text in front of the model when it asked (UntrustedSource dicts), if any.
    untrusted: list[dict[str, Any]] | None
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None

    def public(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _record(row: sa.Row[Any]) -> ApprovalRecord:
    return ApprovalRecord(**dict(row._mapping))


async def create_approval(conn: AsyncConnection, *, now: datetime, **fields: Any) -> ApprovalRecord:
    row = (
        await conn.execute(
            sa.insert(approvals)
            .values(id=new_id("apr"), status=PENDING, created_at=now, **fields)
            .returning(*approvals.c)
        )
    ).one()
    return _record(row)


async def get_approval(conn: AsyncConnection, approval_id: str) -> ApprovalRecord | None:
    row = (
        await conn.execute(sa.select(approvals).where(approvals.c.id == approval_id))
    ).one_or_none()
    return _record(row) if row else None


async def find_for_step(
    conn: AsyncConnection, run_id: str, step_index: int
) -> ApprovalRecord | None:
    row = (
        await conn.execute(
            sa.select(approvals).where(
                approvals.c.run_id == run_id, approvals.c.step_index == step_index
            )
        )
    ).one_or_none()
    return _record(row) if row else None


async def list_approvals(
    conn: AsyncConnection, *, status: str | None = None, limit: int = 100
) -> list[ApprovalRecord]:
    """Pending first (soonest to expire first), then the newest decisions."""
    query = sa.select(approvals).limit(limit)
    if status is not None:
        query = query.where(approvals.c.status == status)
    query = query.order_by(
        sa.case((approvals.c.status == PENDING, 0), else_=1),
        sa.case((approvals.c.status == PENDING, approvals.c.expires_at), else_=None),
        approvals.c.created_at.desc(),
    )
    return [_record(r) for r in (await conn.execute(query)).all()]


async def decide(
    conn: AsyncConnection,
    approval_id: str,
    *,
    status: str,
    now: datetime,
    decided_by: str | None,
    note: str | None = None,
    edited_params: dict[str, Any] | None = None,
) -> ApprovalRecord | None:
    """Decide a pending approval and requeue its run; None if it was not pending any more."""
    row = (
        await conn.execute(
            sa.update(approvals)
            .where(approvals.c.id == approval_id, approvals.c.status == PENDING)
            .values(
                status=status,
                decided_by=decided_by,
                note=note,
                edited_params=edited_params,
                decided_at=now,
            )
            .returning(*approvals.c)
        )
    ).one_or_none()
    if row is None:
        return None
    record = _record(row)
    await _requeue_run(conn, record.run_id, now)
    return record


async def expire_due(conn: AsyncConnection, *, now: datetime) -> list[ApprovalRecord]:
    """Turn every pending approval past its expiry into `expired` (a reject) and requeue its
    run, so no forgotten approval blocks a thread forever."""
    rows = (
        await conn.execute(
            sa.update(approvals)
            .where(approvals.c.status == PENDING, approvals.c.expires_at <= now)
            .values(
                status="expired",
                decided_by="expiry",
                note="expired without a decision",
                decided_at=now,
            )
            .returning(*approvals.c)
        )
    ).all()
    expired = [_record(r) for r in rows]
    for record in expired:
        await _requeue_run(conn, record.run_id, now)
    return expired


async def _requeue_run(conn: AsyncConnection, run_id: str, now: datetime) -> None:
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.WAITING_APPROVAL.value)
        .values(status=RunStatus.QUEUED.value, not_before=now, updated_at=now)
    )
