"""The action ledger: (run, step) -> intent, then outcome. Makes each step's effect happen once.

Every write and destructive step has a row, whatever its fate (`LedgerEntry.fate`): ran, failed,
unknown (no outcome yet, or one that could not tell whether the site changed), and the steps that
never reached the site: rejected, denied, refused (a daily budget), cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import ActionOutcome, StepStatus
from pressloop.store.schema import action_ledger

FATES = ("ran", "failed", "rejected", "denied", "refused", "cancelled", "unknown")
_FATE_OF_STATUS = {
    StepStatus.SUCCEEDED: "ran",
    StepStatus.FAILED: "failed",
    StepStatus.REJECTED: "rejected",
    StepStatus.DENIED: "denied",
    StepStatus.REFUSED: "refused",
    StepStatus.CANCELLED: "cancelled",
}


def fate_of(outcome: ActionOutcome | None) -> str:
    """One of FATES for a step's outcome (None: it has none yet)."""
    if outcome is None:
        return "unknown"
    if isinstance(outcome.data, dict) and outcome.data.get("unknown") is True:
        return "unknown"
    return _FATE_OF_STATUS.get(outcome.status, "unknown")


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

    @property
    def fate(self) -> str:
        return fate_of(self.outcome)


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


@dataclass(frozen=True, kw_only=True)
class LedgerStep:
    """Which step a ledger row is about: its run and index, and the call as it will run."""

    run_id: str
    step_index: int
    thread_id: str
    call_id: str
    action: str
    params: dict[str, Any]
    risk: str

    def columns(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "step_index": self.step_index,
            "thread_id": self.thread_id,
            "call_id": self.call_id,
            "action": self.action,
            "params": self.params,
            "risk": self.risk,
        }


async def record_intent(
    conn: AsyncConnection, step: LedgerStep, *, snapshot: Any, now: datetime
) -> None:
    await conn.execute(
        sa.insert(action_ledger).values(
            **step.columns(), status="intent", snapshot=snapshot, created_at=now
        )
    )


async def record_settled(
    conn: AsyncConnection, step: LedgerStep, *, outcome: ActionOutcome, now: datetime
) -> None:
    """Record a step that never reached the site with its outcome; a row already there for
    (run, step) is left as it is (a resumed turn decides the same step again)."""
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(
        action_ledger
    ).values(
        **step.columns(),
        status="done",
        outcome=outcome.model_dump(mode="json"),
        snapshot=None,
        created_at=now,
        finished_at=now,
    )
    await conn.execute(insert.on_conflict_do_nothing(index_elements=["run_id", "step_index"]))


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
