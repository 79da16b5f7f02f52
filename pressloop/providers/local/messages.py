"""The chat messages the local model's template lays out, in the order that keeps the stable
prefix first: the system prompt's stable part, the worked examples, the rest of the system prompt
(site, memories), then the transcript."""

from __future__ import annotations

from pressloop.contracts import Message, Role
from pressloop.providers.base import ModelRequest
from pressloop.providers.local.catalog import example_turns, split_system


def to_messages(request: ModelRequest, *, late_system: bool = True) -> list[dict[str, str]]:
    """Chat messages for the model's own chat template: the system prompt's stable part, the
    worked examples, the rest of the system prompt (site, memories: as a second system message
    when the template takes one, `late_system`), then the transcript."""
    head, tail = split_system(request.system)
    if tail and not late_system:
        head, tail = f"{head}\n\n{tail}", ""
    out = [{"role": "system", "content": head}] if head else []
    out += example_turns(head)
    if tail:
        out.append({"role": "system", "content": tail})
    for message in request.messages:
        out.append({"role": _role(message), "content": message.content})
    return out


def _role(message: Message) -> str:
    # The JSON protocol renders action results as user messages; a stray tool message is read
    # the same way, since the chat template has no tool role without tools.
    return "assistant" if message.role is Role.ASSISTANT else "user"


def stable_count(messages: list[dict[str, str]]) -> int:
    """How many leading messages are the same for every request: the system prompt's stable
    part and the worked examples."""
    return 1 + sum(1 for m in messages[1:] if m.get("example"))
