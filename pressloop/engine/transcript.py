"""Keeping a transcript valid for every provider: each tool call answered exactly once."""

from __future__ import annotations

from collections.abc import Sequence

from pressloop.contracts import (
    ActionCall,
    ActionOutcome,
    Checkpoint,
    Message,
    Role,
    Step,
    StepStatus,
)
from pressloop.engine.taint import UNTRUSTED_PREFIX


def pending_calls(messages: Sequence[Message]) -> list[ActionCall]:
    """The calls of the last assistant message that have no result yet (resume point)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role is Role.ASSISTANT:
            answered = {m.tool_call_id for m in messages[position + 1 :] if m.role is Role.TOOL}
            return [call for call in message.tool_calls if call.id not in answered]
    return []


def close_dangling_calls(messages: Sequence[Message], reason: str) -> list[Message]:
    """Answer every unanswered tool call with `reason` so providers accept the thread later."""
    closed = list(messages)
    for call in pending_calls(closed):
        closed.append(Message(role=Role.TOOL, tool_call_id=call.id, name=call.name, content=reason))
    return closed


def record_step(
    checkpoint: Checkpoint, call: ActionCall, index: int, outcome: ActionOutcome
) -> None:
    """Keep one call's outcome in the turn: its step, and its result for the model (a call
    waiting for a person stays unanswered, so the resumed turn runs it)."""
    checkpoint.steps.append(
        Step(
            index=index,
            call_id=call.id,
            action=call.name,
            params=call.params,
            risk=outcome.risk,
            status=outcome.status,
            result_summary=outcome.summary or outcome.content[:500],
            approval_id=outcome.approval_id,
            error=outcome.error,
        )
    )
    if outcome.status is StepStatus.PENDING_APPROVAL:
        return
    content = UNTRUSTED_PREFIX + outcome.content if outcome.untrusted else outcome.content
    checkpoint.messages.append(
        Message(
            role=Role.TOOL,
            tool_call_id=call.id,
            name=call.name,
            content=content,
            untrusted=outcome.untrusted,
        )
    )
