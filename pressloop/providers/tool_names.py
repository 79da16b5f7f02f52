"""Tool names as the providers' APIs accept them.

An action may be named `server.tool` (an MCP server's tool), but OpenAI and Anthropic accept
only `^[a-zA-Z0-9_-]{1,64}$` as a tool's name. `NativeToolNames` wraps a provider: the names of
the request's tools and of the calls in its history go out in that alphabet (`everything.echo`
-> `everything__echo`, a name too long cut and given a hash), and the calls in the answer come
back under the action's own name. The map is made per request, from that request's names, so two
names that would meet on the wire are told apart by a suffix and nothing is kept between calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import AsyncIterator, Iterable

from pressloop.contracts import ActionCall, Message
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    ToolSpec,
    WrappedProvider,
)

WIRE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_CHARS = 64


def wire_name(name: str) -> str:
    """The name in the providers' alphabet (unchanged when it already is)."""
    if WIRE_NAME.match(name):
        return name
    plain = re.sub(r"[^a-zA-Z0-9_-]", "_", name.replace(".", "__")) or "tool"
    if len(plain) <= MAX_CHARS:
        return plain
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{plain[: MAX_CHARS - 9]}_{digest}"


class ToolNameMap:
    """One request's names: action name <-> wire name, one to one."""

    def __init__(self, names: Iterable[str]) -> None:
        self.out: dict[str, str] = {}
        self.back: dict[str, str] = {}
        for name in names:
            if name in self.out:
                continue
            wire = wire_name(name)
            count = 1
            while wire in self.back:  # taken by another name: a suffix tells them apart
                count += 1
                suffix = f"_{count}"
                wire = wire_name(name)[: MAX_CHARS - len(suffix)] + suffix
            self.out[name] = wire
            self.back[wire] = name

    @classmethod
    def of(cls, request: ModelRequest) -> ToolNameMap:
        called = (call.name for m in request.messages for call in m.tool_calls)
        return cls([*(tool.name for tool in request.tools), *called])

    def request(self, request: ModelRequest) -> ModelRequest:
        tools = [
            ToolSpec(name=self.out[t.name], description=t.description, parameters=t.parameters)
            for t in request.tools
        ]
        messages = [self._message(m) for m in request.messages]
        return dataclasses.replace(request, messages=messages, tools=tools)

    def response(self, response: ModelResponse) -> ModelResponse:
        calls = [self._call(call, self.back) for call in response.tool_calls]
        return ModelResponse(
            text=response.text,
            tool_calls=calls,
            usage=response.usage,
            finish_reason=response.finish_reason,
            model=response.model,
        )

    def _message(self, message: Message) -> Message:
        if not message.tool_calls:
            return message
        calls = [self._call(call, self.out) for call in message.tool_calls]
        return message.model_copy(update={"tool_calls": calls})

    @staticmethod
    def _call(call: ActionCall, names: dict[str, str]) -> ActionCall:
        # A name the model made up is passed on as it is: the executor refuses it by name.
        return call.model_copy(update={"name": names.get(call.name, call.name)})


class NativeToolNames(WrappedProvider):
    """A provider whose API limits tool names, given any action name (see the module)."""

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        names = ToolNameMap.of(request)
        return names.response(await self.inner.complete(names.request(request)))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        names = ToolNameMap.of(request)
        async for part in self.inner.stream(names.request(request)):
            if isinstance(part, ResponseDone):
                yield ResponseDone(response=names.response(part.response))
            else:
                yield part
