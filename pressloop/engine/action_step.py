"""RunActions: run the model's calls in order through the executor and record each result.

- Calls over the round's limit are answered "limit exceeded, retry next round", never dropped.
- A failed, denied or rejected call stops the plan: the calls after it are answered "skipped".
- A call that needs approval pauses the turn; it stays unanswered so a resume runs it. The
  parked turn's answer is Pressloop's statement of what waits (`parked.py`), not the model's.
- A retryable failure is retried with the whole run; on the run's last attempt it is the step's
  result instead, and the model is asked once more to explain (`model_step._explain`).
- Each call is told which untrusted text is in front of the model (`taint.py`), and gets back
  the secret params its checkpoint and events only name (`TurnState.secrets`).
The checkpoint is saved after every call, so a resumed turn never repeats a recorded one.
"""

from __future__ import annotations

from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    ErrorInfo,
    EventType,
    Role,
    Step,
    StepStatus,
    TurnStatus,
)
from pressloop.engine.grounded import account, left_undone, wrote_everything
from pressloop.engine.parked import parked_answer
from pressloop.engine.state import CallModel, Finish, LoopStep, RunActions, TurnState
from pressloop.engine.taint import untrusted_sources
from pressloop.engine.transcript import pending_calls, record_step
from pressloop.errors import LeaseLost, RunFailure

STOPS_PLAN = frozenset(
    {StepStatus.FAILED, StepStatus.DENIED, StepStatus.REJECTED, StepStatus.REFUSED}
)
# Calls that did not reach their action: they do not count against the daily action budget.
NOT_COUNTED = frozenset(
    {StepStatus.PENDING_APPROVAL, StepStatus.DENIED, StepStatus.REJECTED, StepStatus.REFUSED}
)


def _plan_calls(state: TurnState) -> list[ActionCall]:
    """All calls of the model's last answer (answered or not), in the order it gave them."""
    for message in reversed(state.checkpoint.messages):
        if message.role is Role.ASSISTANT:
            return list(message.tool_calls)
    return []


def _reason(state: TurnState) -> str:
    """What the model said with its plan: shown to a person asked to approve a step."""
    for message in reversed(state.checkpoint.messages):
        if message.role is Role.ASSISTANT:
            return message.content[:2000]
    return ""


def _plan_failed(state: TurnState, plan: list[ActionCall]) -> bool:
    ids = {call.id for call in plan}
    return any(s.call_id in ids and s.status in STOPS_PLAN for s in state.checkpoint.steps)


def _fixed_outcome(status: StepStatus, content: str) -> ActionOutcome:
    return ActionOutcome(status=status, content=content, summary=content)


async def _execute(state: TurnState, call: ActionCall, index: int, total: int) -> ActionOutcome:
    deps, request = state.deps, state.request
    await deps.emit(
        EventType.ACTION,
        {
            "index": index,
            "total": total,
            "action": call.name,
            "params": call.params,
            "call_id": call.id,
        },
    )
    context = ActionContext(
        run_id=request.run_id,
        thread_id=request.thread_id,
        agent_id=request.agent_id,
        trigger=request.trigger,
        step_index=index,
        policy=request.policy,
        requesting_user=request.requesting_user,
        execution_user=request.execution_user,
        untrusted=untrusted_sources(deps, state.checkpoint),
        approval_requested=index in state.asked,
        reason=_reason(state),
    )
    secrets = state.secrets.pop(call.id, None)
    if secrets:
        call = call.model_copy(update={"params": {**call.params, **secrets}})
    try:
        outcome = await deps.actions.run(call, context)
    except (LeaseLost, RunFailure) as failure:
        if isinstance(failure, LeaseLost) or (failure.retryable and deps.retries_left):
            raise
        if failure.retryable:  # the run's last attempt: the model is told, then explains
            state.ending = failure.info()
        outcome = _fixed_outcome(StepStatus.FAILED, f"error: {failure.message}")
    except Exception as exc:  # an action's bug must not take the whole turn down
        outcome = _fixed_outcome(StepStatus.FAILED, f"error: {type(exc).__name__}: {exc}")
    if outcome.status not in NOT_COUNTED:
        state.checkpoint.usage = state.checkpoint.usage.model_copy(
            update={"action_calls": state.checkpoint.usage.action_calls + 1}
        )
    return outcome


async def _record(
    state: TurnState, call: ActionCall, index: int, total: int, outcome: ActionOutcome
) -> None:
    deps = state.deps
    record_step(state.checkpoint, call, index, outcome)
    await deps.emit(EventType.STEP, {"index": index, "total": total, "status": outcome.status})
    await deps.emit(
        EventType.RESULT,
        {
            "index": index,
            "status": outcome.status,
            "message": outcome.summary or outcome.content[:500],
        },
    )
    if outcome.status is StepStatus.PENDING_APPROVAL:
        await deps.emit(
            EventType.APPROVAL,
            {
                "approval_id": outcome.approval_id,
                "action": call.name,
                "risk": outcome.risk.value if outcome.risk else None,
                "index": index,
            },
        )


async def run_actions(state: TurnState, _step: RunActions) -> LoopStep:
    policy = state.request.policy
    plan = _plan_calls(state)
    total = len(plan)
    positions = {call.id: position for position, call in enumerate(plan)}
    for call in pending_calls(state.checkpoint.messages):
        if state.deps.cancel_requested():
            return Finish(status=TurnStatus.CANCELLED)
        index = len(state.checkpoint.steps)
        if positions.get(call.id, 0) >= policy.max_calls_per_round:
            outcome = _fixed_outcome(
                StepStatus.LIMIT_EXCEEDED,
                f"limit exceeded: at most {policy.max_calls_per_round} action calls per round; "
                "retry this call in the next round",
            )
        elif _plan_failed(state, plan):
            outcome = _fixed_outcome(
                StepStatus.SKIPPED, "skipped: an earlier action of this plan did not succeed"
            )
        else:
            outcome = await _execute(state, call, index, total)
        await _record(state, call, index, total, outcome)
        await state.save()
        if outcome.status is StepStatus.PENDING_APPROVAL:
            return await _park(state)
    if state.checkpoint.direct:
        return await _direct_answer(state)
    ids = {call.id for call in plan}
    round_steps = [s for s in state.checkpoint.steps if s.call_id in ids]
    # After a failure the model decides again, even once a later round succeeded: what it did
    # then may be a detour (a category made for a post it has not created yet).
    clean = all(s.status is StepStatus.SUCCEEDED for s in state.checkpoint.steps)
    steps = state.checkpoint.steps
    if state.deps.answer_from_results and clean and wrote_everything(round_steps):
        undone = left_undone(state.request.message, steps)
        if not undone:
            return await _account(state, steps)
        _remind(state, undone)
    return CallModel()


def _remind(state: TurnState, undone: list[str]) -> None:
    """Tell the model, with the round's last result, what the request names that no step has
    done yet: asked to "create a post ... and publish it", a small model that had created it
    answered "created" and stopped."""
    names = [entry.name for entry in state.deps.actions.catalog()]
    # Told only "not done", the model answered "I cannot publish the post" (the catalog has
    # publish_post): the note names the action that does it, as the next step.
    steps = [
        f"{verb} with {' or '.join(n for n in names if n.startswith(verb))}"
        if any(n.startswith(verb) for n in names)
        else verb
        for verb in undone
    ]
    messages = state.checkpoint.messages
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role is Role.TOOL:
            note = (
                f"\nNEXT: {' and '.join(steps)} (the request asks for it; no action has done "
                "it yet)."
            )
            messages[position] = message.model_copy(update={"content": message.content + note})
            return


async def _account(state: TurnState, steps: list[Step]) -> Finish:
    """Every action of the round changed the site as asked, and the turn did what the request
    names: the answer is Pressloop's account of the turn's writes (`grounded.py`), not another
    model call."""
    answer = account(steps)
    state.checkpoint.assistant_text = answer
    await state.deps.emit(EventType.MESSAGE, {"text": answer, "final": True, "by": "pressloop"})
    return Finish(status=TurnStatus.SUCCEEDED, assistant_text=answer)


async def _direct_answer(state: TurnState) -> Finish:
    """A direct call ends with its own result, not a model's reply: succeeded when its action
    did, failed (naming the step's status and result) when it failed, was denied, refused or
    rejected."""
    step = state.checkpoint.steps[-1] if state.checkpoint.steps else None
    answers = [
        m.content
        for m in state.checkpoint.messages
        if m.role is Role.TOOL and step is not None and m.tool_call_id == step.call_id
    ]
    answer = answers[-1] if answers else "no action was called"
    await state.deps.emit(EventType.MESSAGE, {"text": answer, "final": True, "by": "pressloop"})
    if step is not None and step.status is StepStatus.SUCCEEDED:
        return Finish(status=TurnStatus.SUCCEEDED, assistant_text=answer)
    status = step.status.value if step is not None else "missing"
    error = ErrorInfo(cls=f"Action{status.title().replace('_', '')}", message=answer)
    return Finish(status=TurnStatus.FAILED, assistant_text=answer, error=error)


async def _park(state: TurnState) -> Finish:
    """The turn waits for a person: its answer is Pressloop's statement of what waits (the
    model's own words may claim a change that has not happened)."""
    waiting = pending_calls(state.checkpoint.messages)[1:]  # [0] is the step that waits
    answer = parked_answer(state.checkpoint.steps, waiting)
    await state.deps.emit(EventType.MESSAGE, {"text": answer, "final": True, "by": "pressloop"})
    return Finish(status=TurnStatus.REQUIRES_APPROVAL, assistant_text=answer)
