"""Approvals: one per (run, step) that needs a person; pending until approved, rejected or expired.

Deciding an approval and putting its run back in the queue happen in one transaction, so a run is
never left `waiting_approval` after its approval was decided. A read of an approval brings what
became of its step (the ledger's fate: ran, failed, ...) and its run's status along, so the
approval, the step and the run are shown together; a pending approval whose run was cancelled is
closed as `cancelled` (with a ledger row for its step) by `expire_due`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import ActionOutcome, Risk, RunStatus, StepStatus
from pressloop.store.ids import new_id
from pressloop.store.ledger import LedgerStep, fate_of, record_settled
from pressloop.store.schema import UTCDateTime, action_ledger, approvals, runs

PENDING = "pending"
DECIDED = ("approved", "rejected", "expired", "cancelled")
CANCELLED_NOTE = "the run was cancelled before anyone decided"


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
    # Read with the approval: its run's status and its step's ledger outcome (None: not yet).
    run_status: str | None = None
    step_outcome: ActionOutcome | None = None

    @property
    def run_params(self) -> dict[str, Any]:
        """What the step runs (or ran) with: the person's edit if there is one."""
        return self.edited_params if self.edited_params is not None else self.params

    @property
    def asked_by(self) -> str:
        """Who asked, for people: the person behind the run, and the trigger."""
        if self.requested_by:
            return f"{self.requested_by} ({self.trigger})"
        return f"{self.trigger} (no person)"

    @property
    def step(self) -> str | None:
        """What became of the step: a ledger fate (ran, failed, rejected, refused, cancelled,
        unknown), "waiting" while it has none, None for a step the ledger does not keep."""
        if self.step_outcome is not None:
            return fate_of(self.step_outcome)
        if self.status == "cancelled" or self.run_status == RunStatus.CANCELLED.value:
            return "cancelled"
        if self.risk == "read":
            return None
        return "waiting"

    @property
    def step_summary(self) -> str | None:
        """What the step did, in a line (None: nothing yet)."""
        return self.step_outcome.summary if self.step_outcome is not None else None


def _record(row: sa.Row[Any]) -> ApprovalRecord:
    fields = dict(row._mapping)
    outcome = fields.pop("step_outcome", None)
    fields["step_outcome"] = ActionOutcome.model_validate(outcome) if outcome else None
    return ApprovalRecord(**fields)


def _with_step() -> sa.Select[Any]:
    """Approvals with their run's status and their step's ledger outcome."""
    step = sa.and_(
        action_ledger.c.run_id == approvals.c.run_id,
        action_ledger.c.step_index == approvals.c.step_index,
    )
    return sa.select(
        approvals,
        runs.c.status.label("run_status"),
        action_ledger.c.outcome.label("step_outcome"),
    ).select_from(
        approvals.join(runs, runs.c.id == approvals.c.run_id).outerjoin(action_ledger, step)
    )


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
    row = (await conn.execute(_with_step().where(approvals.c.id == approval_id))).one_or_none()
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
    query = _with_step().limit(limit)
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


# Every worker's maintenance runs these two on every poll (built once, store/db.py).
_NOW = sa.bindparam("b_now", type_=UTCDateTime)
_EXPIRE_DUE = (
    sa.update(approvals)
    .where(approvals.c.status == PENDING, approvals.c.expires_at <= _NOW)
    .values(
        status="expired", decided_by="expiry", note="expired without a decision", decided_at=_NOW
    )
    .returning(*approvals.c)
)
_CLOSE_CANCELLED = (
    sa.update(approvals)
    .where(
        approvals.c.status == PENDING,
        approvals.c.run_id.in_(
            sa.select(runs.c.id).where(runs.c.status == RunStatus.CANCELLED.value)
        ),
    )
    .values(status="cancelled", decided_by="cancel", note=CANCELLED_NOTE, decided_at=_NOW)
    .returning(*approvals.c)
)


async def expire_due(conn: AsyncConnection, *, now: datetime) -> list[ApprovalRecord]:
    """Turn every pending approval past its expiry into `expired` (a reject) and requeue its
    run, so no forgotten approval blocks a thread forever (and close those of cancelled runs)."""
    await close_cancelled(conn, now=now)
    rows = (await conn.execute(_EXPIRE_DUE, {"b_now": now})).all()
    expired = [_record(r) for r in rows]
    for record in expired:
        await _requeue_run(conn, record.run_id, now)
    return expired


async def close_cancelled(conn: AsyncConnection, *, now: datetime) -> list[ApprovalRecord]:
    """Close the pending approvals of cancelled runs as `cancelled`: nobody can decide them any
    more. The ledger gets the step's fate, as it does for every step."""
    rows = (await conn.execute(_CLOSE_CANCELLED, {"b_now": now})).all()
    closed = [_record(r) for r in rows]
    for record in closed:
        if record.risk == "read":
            continue  # reads are not ledgered
        message = f"cancelled: {record.action} did not run; {CANCELLED_NOTE}"
        step = LedgerStep(
            run_id=record.run_id,
            step_index=record.step_index,
            thread_id=record.thread_id,
            call_id=record.call_id,
            action=record.action,
            params=record.params,
            risk=record.risk,
        )
        await record_settled(
            conn,
            step,
            outcome=ActionOutcome(
                status=StepStatus.CANCELLED,
                content=message,
                summary=message,
                risk=Risk(record.risk),
            ),
            now=now,
        )
    return closed


async def _requeue_run(conn: AsyncConnection, run_id: str, now: datetime) -> None:
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.WAITING_APPROVAL.value)
        .values(status=RunStatus.QUEUED.value, not_before=now, updated_at=now)
    )
