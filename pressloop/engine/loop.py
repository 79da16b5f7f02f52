"""THE agent loop: one turn is CallModel -> RunActions -> CallModel ... -> Finish.

Every way a turn starts (chat, heartbeat, spawn, API, MCP) ends up here through the runtime. The
loop knows nothing of databases or HTTP: it reads and writes only through `EngineDeps`.
"""

from __future__ import annotations

import asyncio
from typing import assert_never

from pressloop.contracts import (
    Checkpoint,
    EventType,
    Message,
    NextAction,
    Role,
    StepStatus,
    TurnRequest,
    TurnResult,
    TurnStatus,
)
from pressloop.engine.action_step import run_actions
from pressloop.engine.model_step import call_model
from pressloop.engine.ports import EngineDeps
from pressloop.engine.state import CallModel, Finish, LoopStep, RunActions, TurnState
from pressloop.engine.transcript import pending_calls
from pressloop.errors import AgentDisabled, LeaseLost, LimitExceeded, RunFailure


def _start(request: TurnRequest) -> Checkpoint:
    if request.checkpoint is not None:
        resumed = request.checkpoint.model_copy(deep=True)
        # A step that paused for approval is recorded again, at the same index, with its outcome.
        resumed.steps = [s for s in resumed.steps if s.status is not StepStatus.PENDING_APPROVAL]
        return resumed
    checkpoint = Checkpoint()
    if request.message:
        checkpoint.messages.append(Message(role=Role.USER, content=request.message))
    return checkpoint


def _first_step(checkpoint: Checkpoint) -> LoopStep:
    return RunActions() if pending_calls(checkpoint.messages) else CallModel()


async def _advance(state: TurnState, step: LoopStep) -> Finish:
    while True:
        match step:
            case CallModel():
                await state.deps.pace()
                step = await call_model(state, step)
            case RunActions():
                await state.deps.pace()
                step = await run_actions(state, step)
            case Finish():
                return step
            case _:
                assert_never(step)


def _failure(error: RunFailure) -> Finish:
    return Finish(
        status=TurnStatus.FAILED,
        error=error.info(),
        next_action=NextAction.RESCHEDULE if error.retryable else NextAction.STOP,
    )


async def run_turn(request: TurnRequest, deps: EngineDeps) -> TurnResult:
    """Run (or resume) one turn and say how it ended. Never raises for a model or action failure;
    `LeaseLost` and task cancellation propagate to the runtime."""
    checkpoint = _start(request)
    paused = request.checkpoint.steps if request.checkpoint is not None else []
    state = TurnState(
        request=request,
        deps=deps,
        checkpoint=checkpoint,
        started_at=deps.monotonic(),
        elapsed_before=checkpoint.elapsed_s,
        asked=frozenset(s.index for s in paused if s.status is StepStatus.PENDING_APPROVAL),
    )
    if deps.disabled:
        disabled = AgentDisabled(
            "the agent is disabled (PRESSLOOP_DISABLE_AGENT or the kill-switch setting); "
            "no new turn runs until it is enabled again"
        ).info()
        await deps.emit(EventType.ERROR, disabled.model_dump())
        return state.result(Finish(status=TurnStatus.FAILED, error=disabled))
    remaining = state.remaining()
    try:
        if remaining <= 0:
            raise TimeoutError
        async with asyncio.timeout(remaining):
            finish = await _advance(state, _first_step(checkpoint))
    except TimeoutError:
        error = LimitExceeded(
            f"the turn ran out of its wall time of {request.policy.wall_time_s:g} s"
        )
        finish = Finish(status=TurnStatus.TIMED_OUT, error=error.info())
    except LeaseLost:
        raise
    except RunFailure as failure:
        finish = _failure(failure)
    if finish.error is not None:
        await deps.emit(EventType.ERROR, finish.error.model_dump())
    return state.result(finish)
