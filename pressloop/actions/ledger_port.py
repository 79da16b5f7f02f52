"""What the executor needs from the action ledger (the runtime provides a durable, fenced one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pressloop.contracts import ActionCall, ActionContext, ActionOutcome, Risk


@dataclass(kw_only=True)
class PriorStep:
    """What the ledger holds for this (run, step): the intent, and the outcome if it finished."""

    call_id: str
    action: str
    outcome: ActionOutcome | None


class LedgerPort(Protocol):
    async def lookup(self, context: ActionContext) -> PriorStep | None: ...

    async def intent(
        self, call: ActionCall, risk: Risk, context: ActionContext, snapshot: Any
    ) -> None: ...

    async def outcome(self, context: ActionContext, outcome: ActionOutcome) -> None: ...

    async def settled(
        self, call: ActionCall, risk: Risk, context: ActionContext, outcome: ActionOutcome
    ) -> None:
        """Record a step that never reached the site (denied, rejected, refused, failed before
        it was sent) with its outcome, once: a step already recorded is left as it is."""
        ...
