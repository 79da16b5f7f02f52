"""What the engine is handed: everything it touches comes in through `EngineDeps`.

The engine owns no clock, database or HTTP; the runtime builds these from the real things and
tests build them from small in-memory ones.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    CatalogEntry,
    Checkpoint,
    DecisionProtocol,
    EventType,
    Message,
)
from pressloop.providers.base import Provider


class ActionPort(Protocol):
    """The executor as the engine sees it: a catalog and one call at a time."""

    def catalog(self) -> list[CatalogEntry]: ...

    async def run(self, call: ActionCall, context: ActionContext) -> ActionOutcome: ...


Emit = Callable[[EventType, dict[str, Any]], Awaitable[None]]
SaveCheckpoint = Callable[[Checkpoint], Awaitable[None]]


@dataclass(kw_only=True, frozen=True)
class MemoryNote:
    """One memory for MEMORY_CONTEXT; `untrusted`: written in a tainted turn."""

    content: str
    untrusted: bool = False


@dataclass(kw_only=True)
class PromptContext:
    """The system prompt's sections that come from outside the engine."""

    instructions: str = ""
    agent_files: dict[str, str] = field(default_factory=dict)
    site_context: str = ""
    # What the runtime says of the MCP servers beside their tools (one that is down); the
    # tools themselves come with the catalog (`CatalogEntry.server`).
    mcp_tool_catalog: str = ""
    memory_context: str = ""
    # The untrusted memories MEMORY_CONTEXT shows: while there is one, the turn is tainted.
    untrusted_memories: list[str] = field(default_factory=list)
    conversation_context: str = ""


async def _no_emit(_type: EventType, _data: dict[str, Any]) -> None:
    return None


async def no_pace() -> None:
    return None


async def _no_checkpoint(_checkpoint: Checkpoint) -> None:
    return None


def _never() -> bool:
    return False


@dataclass(kw_only=True)
class EngineDeps:
    provider: Provider
    actions: ActionPort
    history: list[Message] = field(default_factory=list)
    prompt: PromptContext = field(default_factory=PromptContext)
    protocol: DecisionProtocol | None = None  # None: native tools when the provider has them
    emit: Emit = _no_emit
    # Called after every model call and action with the live checkpoint: serialise or copy it
    # before returning, the engine goes on changing it.
    save_checkpoint: SaveCheckpoint = _no_checkpoint
    # Read at safe points (after each model call and each action): a person asked to stop.
    cancel_requested: Callable[[], bool] = _never
    disabled: bool = False
    # False on the run's last attempt: an action's retryable failure is then the step's result,
    # told to the model, instead of a reason to run the turn again.
    retries_left: bool = True
    monotonic: Callable[[], float] = time.monotonic
    max_history_messages: int = 60
    max_output_tokens: int | None = None
    # End a round of successful writes with Pressloop's account of them (engine/grounded.py).
    answer_from_results: bool = False
    # Awaited before each step (a model call, a round of actions): a step may wait here while
    # work that cannot wait runs first (the runtime's pacing: another turn's stream).
    pace: Callable[[], Awaitable[None]] = no_pace

    def decision_protocol(self) -> DecisionProtocol:
        if self.protocol is not None:
            return self.protocol
        return DecisionProtocol.TOOLS if self.provider.supports_tools else DecisionProtocol.JSON
