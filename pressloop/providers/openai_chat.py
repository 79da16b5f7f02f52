"""OpenAI Chat Completions adapter: OpenAI, OpenRouter, GLM (Z.ai) and any compatible server.

The official SDK does the transport, the SSE parsing, the connection pool and the error classes.
We call it through its generic `post` with the JSON body as bytes (`wire.RequestBodies`: the
tool catalog serialized once) and `cast_to=object`, which hands back the decoded JSON of each
answer or chunk: the typed `chat.completions.create` walks the whole request through its
type-directed transform and builds a typed object per chunk, which we would then dump back to
JSON to validate — about 5 ms of CPU a call with a 20-action catalog, against 1.4 ms this way
(bench/peers profiles; at 1,000 turns in flight that decides the wall time). A streamed call
skips `post`'s request building too (`stream_calls.py`), and is read by the SDK's `AsyncStream`
all the same. Every answer is checked against the small tolerant models below before we read it
(a compatible server may send anything): a wrong shape becomes a clear `ProviderError`, never an
`AttributeError` deep in the engine.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from pydantic import Field

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

OPENAI_BASE_URL = "https://api.openai.com/v1"
# On a relayed call: the provider's base URL, where the stream process passes the call on.
UPSTREAM_HEADER = "X-Pressloop-Upstream"
COMPLETIONS_PATH = "/chat/completions"
ERRORS = SDKErrors.of(openai, openai.OpenAIError)


class _Function(WireModel):
    name: str | None = None
    # Some compatible servers send an object instead of the JSON string OpenAI sends.
    arguments: str | dict[str, Any] | None = None


class _ToolCall(WireModel):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Message(WireModel):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(WireModel):
    message: _Message
    finish_reason: str | None = None


class _Usage(WireModel):
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0

    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.prompt_tokens or 0,
            output_tokens=self.completion_tokens or 0,
            model_calls=1,
        )


class _Completion(WireModel):
    model: str | None = None
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


class _ChunkChoice(WireModel):
    delta: _Message | None = None  # some compatible servers send null in the last chunk
    finish_reason: str | None = None


class _Chunk(WireModel):
    model: str | None = None
    choices: list[_ChunkChoice] | None = None
    usage: _Usage | None = None


def to_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The transcript in Chat Completions shape: system first, then one entry per message."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        out.append(_to_message(message))
    return out


def _to_message(message: Message) -> dict[str, Any]:
    if message.role is Role.USER:
        return {"role": "user", "content": message.content}
    if message.role is Role.TOOL:
        if not message.tool_call_id:
            raise ProviderError("a tool message has no tool_call_id", retryable=False)
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    entry: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        # OpenAI wants null content beside tool calls when the model said nothing.
        entry["content"] = message.content or None
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.params)},
            }
            for call in message.tool_calls
        ]
    return entry


@dataclass(kw_only=True)
class _PartialCall:
    """A streamed tool call: the id and name come first, the arguments in pieces."""

    id: str | None = None
    name: str = ""
    arguments: str = ""


class StreamState:
    """Accumulates one streamed answer: text, tool calls by index, usage, finish reason."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self._streamed = StreamedText()
        self.calls: dict[int, _PartialCall] = {}
        self.usage = Usage(model_calls=1)
        self.finish_reason: str | None = None
        self.model: str | None = None

    def add(self, chunk: _Chunk) -> str:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = chunk.usage.usage()
        delta_text = ""
        for choice in chunk.choices or []:
            self.finish_reason = choice.finish_reason or self.finish_reason
            delta = choice.delta or _Message()
            delta_text += delta.content or ""
            for position, piece in enumerate(delta.tool_calls or []):
                index = piece.index if piece.index is not None else position
                call = self.calls.setdefault(index, _PartialCall())
                call.id = call.id or piece.id
                if piece.function is not None:
                    # Some servers repeat the name in every piece: the first one counts.
                    call.name = call.name or piece.function.name or ""
                    args = piece.function.arguments
                    call.arguments += json.dumps(args) if isinstance(args, dict) else args or ""
        delta_text = self._streamed.add(delta_text)
        self.text.append(delta_text)
        return delta_text

    def response(self, default_model: str) -> ModelResponse:
        calls = [
            ActionCall(
                id=call.id or f"call_{index}",
                name=call.name,
                params=decode_arguments(call.arguments),
            )
            for index, call in sorted(self.calls.items())
        ]
        return storable_response(
            ModelResponse(
                text="".join(self.text),
                tool_calls=calls,
                usage=self.usage,
                finish_reason=self.finish_reason,
                model=self.model or default_model,
            )
        )


def read_chunk(state: StreamState, provider: str, chunk: object) -> str:
    """One streamed chunk (as the SDK decoded it) added to `state`: the text it adds, the one
    delta the engine emits for it. The stream process cuts a relayed answer with this too."""
    return state.add(parse(provider, _Chunk, chunk, "a stream chunk of the wrong shape"))


class OpenAIChatProvider(SDKProvider):
    """A `Provider` speaking the Chat Completions API through the official `openai` SDK."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float,
        name: str = "openai",
        extra_headers: Mapping[str, str] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._name = name
        self._model = model
        # Always explicit, so the SDK never falls back to reading OPENAI_BASE_URL itself:
        # configuration is read in one place (pressloop.config).
        self._base_url = base_url or OPENAI_BASE_URL
        http = http_client(openai, max_connections)
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self._base_url,
            timeout=timeout_s,
            max_retries=0,  # RetryingProvider retries, with our backoff and our budget.
            default_headers=dict(extra_headers) if extra_headers else None,
            http_client=http,
        )
        # Streamed calls (a person may be waiting for their tokens): the same client, headers
        # and stream class, without `post`'s per-call request building (`stream_calls.py`).
        self._streams = StreamCalls(openai, self._client, http, COMPLETIONS_PATH, timeout_s)
        self._bodies = RequestBodies(to_tools)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        with translated(self._name, ERRORS):
            completion = await self._client.post(
                COMPLETIONS_PATH, content=self._body(request, stream=False), cast_to=object
            )
        parsed = parse(self._name, _Completion, completion, "a body that is not a chat completion")
        choice = parsed.choices[0]
        return storable_response(
            ModelResponse(
                text=choice.message.content or "",
                tool_calls=[
                    ActionCall(
                        id=call.id or f"call_{position}",
                        name=(call.function.name if call.function else None) or "",
                        params=decode_arguments(call.function.arguments if call.function else None),
                    )
                    for position, call in enumerate(choice.message.tool_calls or [])
                ],
                usage=parsed.usage.usage() if parsed.usage else Usage(model_calls=1),
                finish_reason=choice.finish_reason,
                model=parsed.model or self._model,
            )
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        state = StreamState()
        with translated(self._name, ERRORS, what="a stream event"):
            body = self._body(request, stream=True)
            if request.relay is not None and request.relay.alive():
                # The stream process passes the call on (`pressloop.streamer.relay`), told where
                # to (the key travels in the headers).
                upstream = {UPSTREAM_HEADER: self._base_url}
                chunks = await self._streams.open(request.relay.base_url, body, upstream)
            else:
                chunks = await self._streams.open(self._base_url, body)
            async with chunks:
                async for chunk in chunks:
                    text = read_chunk(state, self._name, chunk)
                    if text:
                        yield TextDelta(text=text)
        if state.finish_reason is None and not state.calls and not "".join(state.text):
            raise garbage(self._name, "an empty stream")
        yield ResponseDone(response=state.response(self._model))

    def _body(self, request: ModelRequest, *, stream: bool) -> bytes:
        """The request's JSON, the tool catalog serialized once (`wire.RequestBodies`)."""
        body: dict[str, Any] = {"model": self._model, "messages": to_messages(request)}
        if request.max_output_tokens:
            # Newer OpenAI models reject `max_tokens`; compatible servers accept this name too.
            body["max_completion_tokens"] = request.max_output_tokens
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "decision",
                    "schema": request.response_schema,
                    "strict": False,
                },
            }
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return self._bodies.encode(body, request.tools)


def to_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The catalog as Chat Completions functions."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]
