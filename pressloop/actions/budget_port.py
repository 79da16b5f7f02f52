"""What the executor needs from the daily budgets (the runtime provides the counting one)."""

from __future__ import annotations

from typing import Protocol

from pressloop.contracts import ActionContext


class BudgetPort(Protocol):
    async def action_refusal(self, context: ActionContext) -> str | None:
        """Why this action may not run (a daily action budget is used up; the refusal is
        counted), or None: it may."""
        ...
