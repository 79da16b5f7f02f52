"""What a system says to the peers benchmark's scripted model server: its one tool, and a
conversation `rounds` tool rounds in (the server answers with a tool call until the third)."""

from __future__ import annotations

from typing import Any

TOOLS: Any = [{"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}]


def transcript(rounds: int, message: str = "go") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": message}]
    for n in range(rounds):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "ok"})
    return messages
