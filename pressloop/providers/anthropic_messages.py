"""Anthropic Messages adapter, through the official `anthropic` SDK.

As for OpenAI (see openai_chat.py for why), the SDK is called through its generic `post` with
the JSON body as bytes (the tool catalog serialized once) and `cast_to=object`: it does the
transport, the SSE decoding (error events included) and the error classes, and hands back
decoded JSON, which is checked against small tolerant models before we read it; a streamed
call skips `post`'s request building (`stream_calls.py`) and is read by the SDK's `AsyncStream`.
The transcript is reshaped to what the Messages API requires: strict user/assistant alternation,
and every tool result of one assistant turn in the single user message that follows it, before
any text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic

from pressloop.contracts import ActionCall, Message, Role, Usage
from pressloop.errors import ProviderError
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    TextDelta,
    ToolSpec,
)
from pressloop.providers.errors_map import SDKErrors, garbage, translated
from pressloop.providers.stream_calls import StreamCalls
from pressloop.providers.text import StreamedText, storable_response
from pressloop.providers.wire import (
    DEFAULT_MAX_CONNECTIONS,
    RequestBodies,
    SDKProvider,
    WireModel,
    decode_arguments,
    http_client,
    parse,
)
from pressloop.storable import storable

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
MESSAGES_PATH = "/v1/messages"
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; this is enough for one agent round
ERRORS = SDKErrors.of(anthropic, anthropic.AnthropicError)


class _Block(WireModel):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None


class _Usage(WireModel):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    def merged(self, later: _Usage | None) -> _Usage:
        """Stream usage arrives in parts: later non-null counts replace earlier ones."""
        if later is None:
            return self
        return self.model_copy(update=later.model_dump(exclude_none=True))

    def usage(self) -> Usage:
        # Cached prompt tokens are still prompt tokens: the budget counts them all.
        prompt = (
            (self.input_tokens or 0)
            + (self.cache_read_input_tokens or 0)
            + (self.cache_creation_input_tokens or 0)
        )
        return Usage(input_tokens=prompt, output_tokens=self.output_tokens or 0, model_calls=1)


class _Message(WireModel):
    model: str | None = None
    content: list[_Block]
    stop_reason: str | None = None
    usage: _Usage | None = None


class _Delta(WireModel):
    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class _Event(WireModel):
    """Any raw stream event; only the fields of its `type` are set."""

    type: str
    index: int = 0
    message: _Message | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None


def to_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The transcript as alternating user/assistant turns of content blocks."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        # Tool results must open the user message that follows the tool calls (stable sort).
        turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return turns


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    # The API rejects empty or whitespace-only text blocks, so those are left out.
    text = [{"type": "text", "text": message.content}] if message.content.strip() else []
    if message.role is Role.USER:
        return "user", text
    if message.role is Role.TOOL:
        if not message.tool_call_id:
            raise ProviderError("a tool message has no tool_call_id", retryable=False)
        result = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        return "user", [{**result, "content": message.content}]
    calls = [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.params}
        for call in message.tool_calls
    ]
    return "assistant", text + calls


@dataclass(kw_only=True)
class _Building:
    """A content block while its deltas arrive."""

    type: str
    id: str | None = None
    name: str | None = None
    text: str = ""
    json: str = ""


class _StreamState:
    """Accumulates one streamed answer from raw Messages events."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Building] = {}
        self.usage = _Usage()
        self.stop_reason: str | None = None
        self.model: str | None = None
        self.started = False
        self.stopped = False
        self._streamed = StreamedText()

    def add(self, event: _Event) -> str:
        if event.type == "message_start" and event.message is not None:
            self.started = True
            self.model = event.message.model
            self.usage = self.usage.merged(event.message.usage)
        elif event.type == "content_block_start" and event.content_block is not None:
            start = event.content_block
            self.blocks[event.index] = _Building(
                type=start.type, id=start.id, name=start.name, text=storable(start.text or "")
            )
        elif event.type == "content_block_delta" and event.delta is not None:
            block = self.blocks.setdefault(event.index, _Building(type="text"))
            if event.delta.type == "text_delta" and event.delta.text:
                text = self._streamed.add(event.delta.text)
                block.text += text
                return text
            if event.delta.type == "input_json_delta":
                block.json += event.delta.partial_json or ""
        elif event.type == "message_delta":
            if event.delta is not None:
                self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.usage = self.usage.merged(event.usage)
        elif event.type == "message_stop":
            self.stopped = True
        return ""

    def response(self, default_model: str) -> ModelResponse:
        ordered = [self.blocks[index] for index in sorted(self.blocks)]
        return storable_response(
            ModelResponse(
                text="".join(block.text for block in ordered if block.type == "text"),
                tool_calls=[
                    ActionCall(
                        id=block.id or f"toolu_{position}",
                        name=block.name or "",
                        params=decode_arguments(block.json),
                    )
                    for position, block in enumerate(ordered)
                    if block.type == "tool_use"
                ],
                usage=self.usage.usage(),
                finish_reason=self.stop_reason,
                model=self.model or default_model,
            )
        )


class AnthropicMessagesProvider(SDKProvider):
    """A `Provider` speaking the Anthropic Messages API."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float,
        name: str = "anthropic",
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._name = name
        self._model = model
        self._timeout_s = timeout_s
        # Explicit, so the SDK never reads ANTHROPIC_BASE_URL itself (pressloop.config does).
        self._base_url = base_url or ANTHROPIC_BASE_URL
        http = http_client(anthropic, max_connections)
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self._base_url,
            timeout=timeout_s,
            max_retries=0,
            http_client=http,
        )
        # Streamed calls without `post`'s per-call request building (`stream_calls.py`).
        self._streams = StreamCalls(anthropic, self._client, http, MESSAGES_PATH, timeout_s)
        self._bodies = RequestBodies(to_tools)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        with translated(self._name, ERRORS):
            message = await self._client.post(
                MESSAGES_PATH, content=self._body(request, stream=False), cast_to=object
            )
        parsed = parse(self._name, _Message, message, "a body that is not a message")
        return storable_response(
            ModelResponse(
                text="".join(block.text or "" for block in parsed.content if block.type == "text"),
                tool_calls=[
                    ActionCall(
                        id=block.id or f"toolu_{n}", name=block.name or "", params=block.input or {}
                    )
                    for n, block in enumerate(parsed.content)
                    if block.type == "tool_use"
                ],
                usage=(parsed.usage or _Usage()).usage(),
                finish_reason=parsed.stop_reason,
                model=parsed.model or self._model,
            )
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        state = _StreamState()
        with translated(self._name, ERRORS, what="a stream event"):
            events = await self._streams.open(self._base_url, self._body(request, stream=True))
            async with events:
                async for event in events:
                    what = "a stream event of the wrong shape"
                    text = state.add(parse(self._name, _Event, event, what))
                    if text:
                        yield TextDelta(text=text)
        if not (state.started and state.stopped):
            raise garbage(self._name, "a stream that ended before message_stop")
        yield ResponseDone(response=state.response(self._model))

    def _body(self, request: ModelRequest, *, stream: bool) -> bytes:
        """The request's JSON, the tool catalog serialized once (`wire.RequestBodies`)."""
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_output_tokens or DEFAULT_MAX_TOKENS,
            "messages": to_messages(request.messages),
        }
        if request.system:
            # One block marked for the prompt cache: tools and system are the stable prefix.
            body["system"] = [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ]
        if stream:
            body["stream"] = True
        # `response_schema` is for models without tool calling; every Claude model has it.
        return self._bodies.encode(body, request.tools)


def to_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The catalog as Messages API tools."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]
