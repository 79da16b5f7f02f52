"""The streaming floor: a turn's model calls relayed with no agent runtime and no store.

The relay makes the turn's 4 streamed model calls (the growing transcript, the no-op answered
"ok" in place) through Pressloop's own model client (`OpenAIChatProvider`: the SDK's generic
`post`, aiohttp), and yields each text delta the moment it is parsed. Behind the bench's
FastAPI SSE app it is what any Python server on this machine pays to carry a model's first
token to a client under the same load: the model server, the client and 2 cores shared by
all three. A system's first frame cannot be much better than this; what it adds above it is
its own (workload 3 shows the relay beside the systems, never as a peer).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from bench.peers.system import INSTRUCTIONS, ROUNDS, Target, check_turn
from pressloop.contracts import Message, Role
from pressloop.providers.base import ModelRequest, ResponseDone, TextDelta, ToolSpec
from pressloop.providers.openai_chat import OpenAIChatProvider

NOOP = ToolSpec(
    name="noop",
    description="Does nothing and answers ok.",
    parameters={"type": "object", "properties": {}},
)


class RelaySystem:
    key = "relay"
    streams = True
    clone_excluded: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.provider: OpenAIChatProvider | None = None

    async def open(self, target: Target) -> None:
        self.provider = OpenAIChatProvider(
            api_key="bench", model="bench", base_url=target.model_url, timeout_s=300
        )

    async def new_thread(self) -> str:
        return str(uuid.uuid4())

    async def stream(self, thread: str, message: str) -> AsyncIterator[str]:
        assert self.provider is not None
        messages = [Message(role=Role.USER, content=message)]
        calls, text = 0, ""
        for _round in range(ROUNDS + 1):
            request = ModelRequest(system=INSTRUCTIONS, messages=messages, tools=[NOOP])
            done = None
            async for part in self.provider.stream(request):
                if isinstance(part, TextDelta):
                    text += part.text
                    yield part.text
                elif isinstance(part, ResponseDone):
                    done = part.response
            if done is None or not done.tool_calls:
                break
            calls += len(done.tool_calls)
            messages.append(Message(role=Role.ASSISTANT, tool_calls=done.tool_calls))
            for call in done.tool_calls:
                messages.append(Message(role=Role.TOOL, content="ok", tool_call_id=call.id))
        check_turn(self.key, calls, text)

    async def turn(self, thread: str, message: str) -> None:
        async for _delta in self.stream(thread, message):
            pass

    async def resume(self, thread: str, message: str) -> None:
        await self.turn(thread, message)

    async def close(self) -> None:
        if self.provider is not None:
            await self.provider.aclose()


def build(_key: str) -> RelaySystem:
    return RelaySystem()
