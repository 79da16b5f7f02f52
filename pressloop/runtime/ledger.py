"""The durable action ledger for one run, written through its session (so it is fenced)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.actions.ledger_port import PriorStep
from pressloop.contracts import ActionCall, ActionContext, ActionOutcome, Risk
from pressloop.runtime.session import RunSession
from pressloop.store import ledger as ledger_store


class SessionLedger:
    def __init__(self, session: RunSession) -> None:
        self.session = session

    async def lookup(self, context: ActionContext) -> PriorStep | None:
        async with self.session.database.read() as conn:
            entry = await ledger_store.get_entry(conn, context.run_id, context.step_index)
        if entry is None:
            return None
        return PriorStep(call_id=entry.call_id, action=entry.action, outcome=entry.outcome)

    async def intent(
        self, call: ActionCall, risk: Risk, context: ActionContext, snapshot: Any
    ) -> None:
        step, now = _step(call, risk, context), self.session.now()

        async def write(conn: AsyncConnection) -> None:
            await ledger_store.record_intent(conn, step, snapshot=snapshot, now=now)

        await self.session.write(write)

    async def settled(
        self, call: ActionCall, risk: Risk, context: ActionContext, outcome: ActionOutcome
    ) -> None:
        step, now = _step(call, risk, context), self.session.now()

        async def write(conn: AsyncConnection) -> None:
            await ledger_store.record_settled(conn, step, outcome=outcome, now=now)

        await self.session.write(write)

    async def outcome(self, context: ActionContext, outcome: ActionOutcome) -> None:
        now = self.session.now()

        async def write(conn: AsyncConnection) -> None:
            await ledger_store.record_outcome(
                conn,
                run_id=context.run_id,
                step_index=context.step_index,
                outcome=outcome,
                now=now,
            )

        await self.session.write(write)


def _step(call: ActionCall, risk: Risk, context: ActionContext) -> ledger_store.LedgerStep:
    return ledger_store.LedgerStep(
        run_id=context.run_id,
        step_index=context.step_index,
        thread_id=context.thread_id,
        call_id=call.id,
        action=call.name,
        params=call.params,
        risk=risk.value,
    )
