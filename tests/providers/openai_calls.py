"""What the OpenAI adapter's wire tests share: a request, a tool, the provider on the fake
server, and a stream collected."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pressloop.contracts import Message, Role
from pressloop.providers.base import ModelRequest, StreamPart, ToolSpec
from pressloop.providers.openai_chat import OpenAIChatProvider
from tests.wire.openai_server import FakeOpenAIServer

CREATE_POST = ToolSpec(
    name="create_post",
    description="Create a draft post.",
    parameters={
        "type": "object",
        "properties": {"title": {"type": "string"}, "content": {"type": "string"}},
        "required": ["title"],
    },
)


def ask(text: str = "Hello?", **kwargs: object) -> ModelRequest:
    return ModelRequest(
        system="You run a WordPress site.",
        messages=[Message(role=Role.USER, content=text)],
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
async def openai_provider(openai_server: FakeOpenAIServer) -> AsyncIterator[OpenAIChatProvider]:
    provider = OpenAIChatProvider(
        api_key="sk-test", model="gpt-test", base_url=openai_server.base_url, timeout_s=5
    )
    yield provider
    await provider.aclose()


async def collect(provider: OpenAIChatProvider, request: ModelRequest) -> list[StreamPart]:
    return [part async for part in provider.stream(request)]


# The two ways a call goes out: `post` through the SDK (`complete`) and the streamed call
# (`stream_calls.py`): what fails on the wire must fail the same on both.
WAYS = ("complete", "stream")


async def call(provider: OpenAIChatProvider, way: str, request: ModelRequest | None = None) -> None:
    if way == "complete":
        await provider.complete(request or ask())
    else:
        await collect(provider, request or ask())
