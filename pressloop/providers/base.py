"""The one seam between the agent loop and any model: `complete` and `stream`.

Adapters translate `ModelRequest` to their wire protocol and the answer back to `ModelResponse`.
They raise `pressloop.errors.ProviderError` (with `retryable` set for 429, 5xx, timeouts and
network errors) and nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pressloop.contracts import ActionCall, Message, Usage


@dataclass(kw_only=True, frozen=True)
class ToolSpec:
    """An action offered to the model as a native tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(kw_only=True, frozen=True)
class RelayRoute:
    """A streamed call's way through the stream process (`pressloop.streamer`), which reads the
    answer's text for a person watching the run: the base URL to call instead of the
    provider's own, while `alive()` (else the call goes straight to the provider)."""

    base_url: str
    alive: Callable[[], bool]


@dataclass(kw_only=True)
class ModelRequest:
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_output_tokens: int | None = None
    # For models without tool calling that support constrained decoding (the JSON protocol).
    response_schema: dict[str, Any] | None = None
    # The engine emits this call's text as it comes (the tools protocol): a person may be
    # reading it. A JSON decision is never shown as it comes.
    streams_text: bool = False
    # Set by the runtime on a streamed call someone watches through the stream process; an
    # adapter that cannot be relayed ignores it.
    relay: RelayRoute | None = None


@dataclass(kw_only=True)
class ModelResponse:
    text: str = ""
    tool_calls: list[ActionCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""


@dataclass(kw_only=True, frozen=True)
class TextDelta:
    text: str


@dataclass(kw_only=True, frozen=True)
class ResponseDone:
    response: ModelResponse


StreamPart = TextDelta | ResponseDone


@runtime_checkable
class Provider(Protocol):
    """A model adapter. `stream` yields text deltas, then exactly one `ResponseDone`."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def supports_tools(self) -> bool: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]: ...


class WrappedProvider:
    """A provider around another one (retries, budgets): it answers as the inner provider does,
    and a subclass adds its behaviour to `complete` and `stream`."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def supports_tools(self) -> bool:
        return self.inner.supports_tools
