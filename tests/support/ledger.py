"""An in-memory action ledger keyed like the real one (run id, step index): the executor's
`LedgerPort` for tests that drive the real Executor without a database (the action tests, the
WordPress action tests), with the snapshots it takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pressloop.actions.ledger_port import PriorStep
from pressloop.contracts import ActionCall, ActionContext, ActionOutcome, Risk


@dataclass
class Step:
    call: ActionCall
    snapshot: Any
    outcome: ActionOutcome | None = None


@dataclass
class MemoryLedger:
    steps: dict[tuple[str, int], Step] = field(default_factory=dict)

    async def lookup(self, context: ActionContext) -> PriorStep | None:
        step = self.steps.get((context.run_id, context.step_index))
        if step is None:
            return None
        return PriorStep(call_id=step.call.id, action=step.call.name, outcome=step.outcome)

    async def intent(
        self, call: ActionCall, risk: Risk, context: ActionContext, snapshot: Any
    ) -> None:
        self.steps[(context.run_id, context.step_index)] = Step(call=call, snapshot=snapshot)

    async def outcome(self, context: ActionContext, outcome: ActionOutcome) -> None:
        self.steps[(context.run_id, context.step_index)].outcome = outcome

    async def settled(
        self, call: ActionCall, risk: Risk, context: ActionContext, outcome: ActionOutcome
    ) -> None:
        self.steps.setdefault(
            (context.run_id, context.step_index), Step(call=call, snapshot=None, outcome=outcome)
        )
