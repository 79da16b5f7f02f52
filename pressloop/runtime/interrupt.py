"""Cancel now (DESIGN.md section 8): a turn stopped whatever it awaits, then closed cleanly.

A cancel request (`POST /v1/runs/{id}/cancel`, `multitask: interrupt`) cancels the task running
the turn (`RunSession.request_cancel`): a model answer or stream, an action's request, a write
waiting for its commit. What that leaves is settled here before the run ends `cancelled`:
- the action cut short gets its result in the transcript, like every other call;
- a write or destructive one whose intent the ledger holds without an outcome is reconciled by
  reading the site, as a step a dead worker left is (`actions/executor.py`): found, it
  succeeded; not found, it did not happen; with no way to check, the model is told the outcome
  is unknown. The outcome is recorded, so a finished run never leaves an open intent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pressloop.actions.guard import scrubbed
from pressloop.actions.registry import ActionServices, ActionSpec, Registry
from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    CatalogEntry,
    Checkpoint,
    EventType,
    Risk,
    StepStatus,
    TurnResult,
    TurnStatus,
)
from pressloop.engine.ports import ActionPort, EngineDeps
from pressloop.engine.taint import untrusted_sources
from pressloop.engine.transcript import pending_calls, record_step
from pressloop.errors import LeaseLost, PressloopError
from pressloop.redaction import secret_values
from pressloop.runtime.ledger import SessionLedger
from pressloop.runtime.outcome import initial_checkpoint
from pressloop.runtime.session import RunSession
from pressloop.store import ledger as ledger_store
from pressloop.store.records import RunRecord

log = logging.getLogger(__name__)

CUT = "cancelled: the run was cancelled while {action} ran"


class ActionsInFlight:
    """The executor as the engine sees it, remembering the call a cancel cut short."""

    def __init__(self, inner: ActionPort) -> None:
        self.inner = inner
        self.cut: tuple[ActionCall, ActionContext] | None = None

    def catalog(self) -> list[CatalogEntry]:
        return self.inner.catalog()

    async def run(self, call: ActionCall, context: ActionContext) -> ActionOutcome:
        try:
            return await self.inner.run(call, context)
        except asyncio.CancelledError:
            self.cut = (call, context)
            raise


@dataclass(kw_only=True)
class TurnParts:
    """What the runner built for a turn, kept so a cancelled turn can be closed."""

    deps: EngineDeps | None = None
    actions: ActionsInFlight | None = None


async def run_cancellable(
    session: RunSession, work: Coroutine[Any, Any, TurnResult]
) -> TurnResult | None:
    """Run the turn as a task of its own that a cancel request cancels; None if it did.

    When the caller itself is cancelled (the worker is stopping), the turn is cancelled too and
    the cancellation goes on up: the run is handed back, not ended."""
    task = asyncio.create_task(work, name=f"turn:{session.run_id}")
    session.turn = task
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        session.turn = None
    return None if task.cancelled() else task.result()


async def cancelled_turn(
    run: RunRecord,
    session: RunSession,
    parts: TurnParts,
    *,
    registry: Registry,
    services: ActionServices,
) -> TurnResult:
    """The result of a turn a cancel cut short, with the call in flight answered."""
    await session.renew()  # what the turn queued (a ledger intent) is committed before we look
    live = session.last_checkpoint or initial_checkpoint(run)
    checkpoint = live.model_copy(deep=True)
    cut = parts.actions.cut if parts.actions is not None else None
    pending = {call.id: call for call in pending_calls(checkpoint.messages)}
    if cut is not None and cut[0].id in pending:
        call, context = cut
        try:
            outcome = await settle(session, registry, services, call, context)
        except LeaseLost:
            raise
        except Exception:  # never keep a cancelled run running: end it, say less
            log.exception("run %s: the action in flight could not be settled", run.id)
            outcome = _cancelled(CUT.format(action=call.name) + "; its outcome is unknown")
        # The stored call (secret params only named), not the one the action ran with.
        record_step(checkpoint, pending[call.id], context.step_index, outcome)
        await _emit_step(session, checkpoint, context.step_index, outcome)
        await session.save_checkpoint(checkpoint)
    deps = parts.deps
    return TurnResult(
        status=TurnStatus.CANCELLED,
        assistant_text=checkpoint.assistant_text,
        steps=list(checkpoint.steps),
        usage=checkpoint.usage,
        provider=deps.provider.name if deps else "",
        model=deps.provider.model if deps else "",
        untrusted=bool(untrusted_sources(deps, checkpoint)) if deps else False,
    )


async def settle(
    session: RunSession,
    registry: Registry,
    services: ActionServices,
    call: ActionCall,
    context: ActionContext,
) -> ActionOutcome:
    """What became of the call a cancel cut short (reconciled and recorded if it was a write)."""
    spec = registry.get(call.name)
    if spec is None or spec.risk is Risk.READ:
        return _cancelled(CUT.format(action=call.name) + "; it did not finish (nothing changed)")
    async with session.database.read() as conn:
        entry = await ledger_store.get_entry(conn, context.run_id, context.step_index)
    if entry is None or entry.action != spec.name:
        return _cancelled(CUT.format(action=call.name) + "; it was not sent (nothing changed)")
    if entry.outcome is not None:
        return entry.outcome  # it had finished: its outcome was being recorded
    outcome = await reconcile(spec, call, context, services)
    await SessionLedger(session).outcome(context, outcome)
    return outcome


async def reconcile(
    spec: ActionSpec, call: ActionCall, context: ActionContext, services: ActionServices
) -> ActionOutcome:
    """Did the write a cancel cut short take effect? Read the site, never send it again."""
    cut = CUT.format(action=spec.name)
    if spec.reconcile is None:
        return _cancelled(
            f"{cut}; whether it took effect is unknown (there is no way to check "
            f"{spec.name}): look before trying again",
            spec,
        )
    try:
        params = spec.params.model_validate(call.params)
        found = await spec.reconcile(params, context, services)
    except (ValidationError, PressloopError) as problem:
        return _cancelled(
            f"{cut}; whether it took effect is unknown (checking failed: {problem}): look "
            "before trying again",
            spec,
        )
    if found is None:
        return _cancelled(f"{cut}; the site shows no sign of it: it did not take effect", spec)
    content = found.content
    if not isinstance(content, str):
        content = json.dumps(content, default=str, ensure_ascii=False)
    outcome = ActionOutcome(
        status=StepStatus.SUCCEEDED,
        content=f"{cut}, and it had taken effect: {content}",
        summary=found.summary,
        risk=spec.risk,
        untrusted=found.untrusted or spec.untrusted_output,
        data=found.content,
    )
    return scrubbed(outcome, secret_values(params.model_dump(), spec.secret_params()))


def _cancelled(message: str, spec: ActionSpec | None = None) -> ActionOutcome:
    return ActionOutcome(
        status=StepStatus.CANCELLED,
        content=message,
        summary=message,
        risk=spec.risk if spec else None,
    )


async def _emit_step(
    session: RunSession, checkpoint: Checkpoint, index: int, outcome: ActionOutcome
) -> None:
    plan = next((m.tool_calls for m in reversed(checkpoint.messages) if m.tool_calls), [])
    message = outcome.summary or outcome.content[:500]
    await session.emit(
        EventType.STEP, {"index": index, "total": len(plan), "status": outcome.status}
    )
    await session.emit(
        EventType.RESULT, {"index": index, "status": outcome.status, "message": message}
    )
