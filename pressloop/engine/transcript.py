"""Keeping a transcript valid for every provider: each tool call answered exactly once."""

from __future__ import annotations

from collections.abc import Sequence

from pressloop.contracts import ActionCall, Message, Role


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
