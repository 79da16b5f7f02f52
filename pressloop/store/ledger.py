"""The action ledger: (run, step) -> intent, then outcome. Makes each step's effect happen once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import ActionOutcome
from pressloop.store.schema import action_ledger


@dataclass(kw_only=True)
class LedgerEntry:
    id: int
    run_id: str
    step_index: int
    thread_id: str
    call_id: str
    action: str
    params: dict[str, Any]
    risk: str
    status: str  # "intent" | "done"
    outcome: ActionOutcome | None
    snapshot: Any
    undo_state: str | None
    created_at: datetime
    finished_at: datetime | None


def _entry(row: sa.Row[Any]) -> LedgerEntry:
    m = dict(row._mapping)
    m["outcome"] = ActionOutcome.model_validate(m["outcome"]) if m["outcome"] else None
    return LedgerEntry(**m)


async def get_entry(conn: AsyncConnection, run_id: str, step_index: int) -> LedgerEntry | None:
    row = (
        await conn.execute(
            sa.select(action_ledger).where(
                action_ledger.c.run_id == run_id, action_ledger.c.step_index == step_index
            )
        )
    ).one_or_none()
    return _entry(row) if row else None


async def get_entry_by_id(conn: AsyncConnection, entry_id: int) -> LedgerEntry | None:
    row = (
        await conn.execute(sa.select(action_ledger).where(action_ledger.c.id == entry_id))
    ).one_or_none()
    return _entry(row) if row else None


async def record_intent(
    conn: AsyncConnection,
    *,
    run_id: str,
    step_index: int,
    thread_id: str,
    call_id: str,
    action: str,
    params: dict[str, Any],
    risk: str,
    snapshot: Any,
    now: datetime,
) -> None:
    await conn.execute(
        sa.insert(action_ledger).values(
            run_id=run_id,
            step_index=step_index,
            thread_id=thread_id,
            call_id=call_id,
            action=action,
            params=params,
            risk=risk,
            status="intent",
            snapshot=snapshot,
            created_at=now,
        )
    )


async def record_outcome(
    conn: AsyncConnection, *, run_id: str, step_index: int, outcome: ActionOutcome, now: datetime
) -> None:
    await conn.execute(
        sa.update(action_ledger)
        .where(action_ledger.c.run_id == run_id, action_ledger.c.step_index == step_index)
        .values(status="done", outcome=outcome.model_dump(mode="json"), finished_at=now)
    )


async def list_entries(conn: AsyncConnection, run_id: str) -> list[LedgerEntry]:
    rows = (
        await conn.execute(
            sa.select(action_ledger)
            .where(action_ledger.c.run_id == run_id)
            .order_by(action_ledger.c.step_index)
        )
    ).all()
    return [_entry(r) for r in rows]


async def claim_undo(conn: AsyncConnection, entry_id: int) -> bool:
    """Mark a done step as being undone; False if it is not done or already undone (so one
    step is never reversed twice, whoever asks at the same time)."""
    done = await conn.execute(
        sa.update(action_ledger)
        .where(
            action_ledger.c.id == entry_id,
            action_ledger.c.status == "done",
            action_ledger.c.undo_state.is_(None),
        )
        .values(undo_state="undoing")
    )
    return done.rowcount == 1


async def set_undo_state(conn: AsyncConnection, entry_id: int, state: str | None) -> None:
    await conn.execute(
        sa.update(action_ledger).where(action_ledger.c.id == entry_id).values(undo_state=state)
    )
