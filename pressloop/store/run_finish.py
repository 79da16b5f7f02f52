"""A run leaving `running`: the columns it sets, the record it leaves, and the fenced UPDATE.

The group commit (`store/run_writes.py`) writes the same values inside its batches; `finish_run`
is the run's own transaction (a claim given back, a turn ended outside the committer). Both
write only while the claim's lease token still holds the run, so a worker that lost its lease
finds zero rows and stops (DESIGN.md section 8).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import (
    FINAL_RUN_STATUSES,
    Checkpoint,
    ErrorInfo,
    RunStatus,
    TurnResult,
    Usage,
)
from pressloop.errors import LeaseLost
from pressloop.store.records import Claim, RunRecord
from pressloop.store.runs import to_record
from pressloop.store.schema import runs


def finish_values(
    *,
    status: RunStatus,
    now: datetime,
    result: TurnResult | None = None,
    error: ErrorInfo | None = None,
    usage: Usage | None = None,
    checkpoint: Checkpoint | None = None,
    not_before: datetime | None = None,
    attempt: int | None = None,
    event_seq: int | None = None,
) -> dict[str, Any]:
    """The columns a run leaving `running` sets (None: the column keeps its value)."""
    values: dict[str, Any] = {
        "status": status.value,
        "lease_owner": None,
        "lease_expires_at": None,
        "updated_at": now,
        "cancel_requested": False,
    }
    if result is not None:
        values["result"] = result.model_dump(mode="json")
    if error is not None:
        values["error"] = error.model_dump()
    if usage is not None:
        values["usage"] = usage.model_dump()
    if checkpoint is not None:
        values["checkpoint"] = checkpoint.model_dump(mode="json")
    if not_before is not None:
        values["not_before"] = not_before
    if attempt is not None:
        values["attempt"] = attempt
    if event_seq is not None:
        values["event_seq"] = event_seq
    if status in FINAL_RUN_STATUSES:
        values["finished_at"] = now
    return values


def finished_record(
    run: RunRecord,
    *,
    status: RunStatus,
    now: datetime,
    result: TurnResult | None = None,
    error: ErrorInfo | None = None,
    usage: Usage | None = None,
    checkpoint: Checkpoint | None = None,
    not_before: datetime | None = None,
    attempt: int | None = None,
    event_seq: int | None = None,
) -> RunRecord:
    """The record `finish_values` leaves in the row, built without reading the row back."""
    return replace(
        run,
        status=status,
        lease_owner=None,
        lease_expires_at=None,
        updated_at=now,
        cancel_requested=False,
        result=result if result is not None else run.result,
        error=error if error is not None else run.error,
        usage=usage if usage is not None else run.usage,
        checkpoint=checkpoint if checkpoint is not None else run.checkpoint,
        not_before=not_before if not_before is not None else run.not_before,
        attempt=attempt if attempt is not None else run.attempt,
        event_seq=event_seq if event_seq is not None else run.event_seq,
        finished_at=now if status in FINAL_RUN_STATUSES else run.finished_at,
    )


async def finish_run(
    conn: AsyncConnection,
    claim: Claim,
    *,
    status: RunStatus,
    now: datetime,
    result: TurnResult | None = None,
    error: ErrorInfo | None = None,
    usage: Usage | None = None,
    checkpoint: Checkpoint | None = None,
    not_before: datetime | None = None,
    attempt: int | None = None,
    event_seq: int | None = None,
) -> RunRecord:
    """Leave `running` for any other state (final, queued for a retry, waiting for approval)."""
    values = finish_values(
        status=status,
        now=now,
        result=result,
        error=error,
        usage=usage,
        checkpoint=checkpoint,
        not_before=not_before,
        attempt=attempt,
        event_seq=event_seq,
    )
    row = (
        await conn.execute(
            sa.update(runs)
            .where(
                runs.c.id == claim.run.id,
                runs.c.lease_token == claim.token,
                runs.c.status == RunStatus.RUNNING.value,
            )
            .values(**values)
            .returning(*runs.c)
        )
    ).one_or_none()
    if row is None:
        raise LeaseLost(f"run {claim.run.id}: the lease (token {claim.token}) is no longer ours")
    return to_record(row)
